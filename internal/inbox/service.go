package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/fanout"
)

// Options configures a Service. Store is required.
type Options struct {
	Store Store
	// Publish sends an event to every node's Receive, this node's
	// included, and must not block (cmd/sluice posts it on NATS). If nil,
	// events go to this node's Receive alone.
	Publish func(Event) error
	// MaxStreams bounds the streams open on this node; default 10,000.
	MaxStreams int
	// MaxStreamsPerUser bounds one user's streams on this node; default 5.
	MaxStreamsPerUser int
	// MaxStreamsPerKey bounds the streams one API key (or a dashboard
	// session's key) holds open on this node, over every user; default
	// 1,000. Streams opened with an inbox token are bounded per user
	// alone: the token names its user.
	MaxStreamsPerKey int
	// Buffer is how many events a stream may have waiting before it is
	// ended as too slow; default 64.
	Buffer int
	// TokenCacheTTL is how long this node trusts the inbox token
	// generation it last read for a user (tokens.go): a revocation made on
	// another node is honoured here within it. Default
	// DefaultTokenCacheTTL; negative: read the store on every use.
	TokenCacheTTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Errors of Subscribe, which callers map to 429 / 503.
var (
	ErrUserStreams = errors.New("too many open inbox streams for this user")
	ErrKeyStreams  = errors.New("too many open inbox streams for this API key")
	ErrStreams     = errors.New("too many open inbox streams on this node")
	ErrClosed      = errors.New("inbox streams are shutting down")
)

// Service is the inbox: storage through Store, and the fan-out of events
// to this node's streams. It is safe for concurrent use; build it with New.
type Service struct {
	opts Options
	log  *slog.Logger

	tokens generations

	streams *fanout.Hub[string, Event] // user -> this node's streams
}

// New returns a Service.
func New(opts Options) *Service {
	opts.MaxStreams = cmp.Or(opts.MaxStreams, 10_000)
	opts.MaxStreamsPerUser = cmp.Or(opts.MaxStreamsPerUser, 5)
	opts.MaxStreamsPerKey = cmp.Or(opts.MaxStreamsPerKey, 1000)
	opts.Buffer = cmp.Or(opts.Buffer, 64)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TokenCacheTTL == 0 {
		opts.TokenCacheTTL = DefaultTokenCacheTTL
	}
	s := &Service{opts: opts, log: cmp.Or(opts.Logger, slog.Default()), streams: fanout.New[string, Event](fanout.Options{
		MaxStreams: opts.MaxStreams, MaxPerKey: opts.MaxStreamsPerKey, KeylessUnbounded: true,
		MaxPerTopic: opts.MaxStreamsPerUser, Buffer: opts.Buffer, Refused: opts.refused, Closed: ErrClosed})}
	return s
}

// Deliver stores m in its user's inbox and publishes it. A message already
// there (a retried delivery) is published again, as the first attempt may
// have stopped between the store and the publish; streams drop events they
// have sent. A publish that fails is logged, not returned: the message is
// stored, and streams that missed it catch up when they reconnect.
func (s *Service) Deliver(ctx context.Context, m Message) (Message, error) {
	if m.CreatedAt.IsZero() {
		m.CreatedAt = s.opts.Now()
	}
	stored, _, err := s.opts.Store.AddInboxMessage(ctx, m)
	if err != nil {
		return Message{}, fmt.Errorf("store inbox message: %w", err)
	}
	unread, err := s.opts.Store.InboxUnread(ctx, m.UserID)
	if err != nil {
		return Message{}, fmt.Errorf("count unread: %w", err)
	}
	s.publish(Event{Kind: KindMessage, UserID: m.UserID, Unread: unread, Message: &stored})
	return stored, nil
}

// Stored publishes m, which the store has just saved in its user's inbox
// under m.Seq (the inapp provider's message, stored with its delivery's
// outcome), with the user's unread count. Its failures are logged: the
// message is stored, and streams that missed it catch up when they
// reconnect.
func (s *Service) Stored(ctx context.Context, m Message) {
	m.CreatedAt = m.CreatedAt.Truncate(time.Microsecond).UTC()
	unread, err := s.opts.Store.InboxUnread(ctx, m.UserID)
	if err != nil {
		s.log.Warn("inbox event not published: unread count unreadable; streams catch up when they reconnect",
			"user", m.UserID, "error", err)
		return
	}
	s.publish(Event{Kind: KindMessage, UserID: m.UserID, Unread: unread, Message: &m})
}

// Page is one page of an inbox, newest first.
type Page struct {
	Items  []Message
	Unread int
	// Next is the Seq to pass as before for the next page; 0 at the end.
	Next int64
}

// List returns up to limit of user's messages below Seq before (0: from the
// newest), newest first, with the unread count.
func (s *Service) List(ctx context.Context, user string, before int64, limit int, archived bool) (Page, error) {
	items, err := s.opts.Store.InboxMessages(ctx, user, before, limit+1, archived)
	if err != nil {
		return Page{}, err
	}
	p := Page{Items: items}
	if len(items) > limit {
		p.Items = items[:limit]
		p.Next = p.Items[limit-1].Seq
	}
	if p.Unread, err = s.opts.Store.InboxUnread(ctx, user); err != nil {
		return Page{}, err
	}
	return p, nil
}

// Since returns up to limit of user's messages after Seq after, oldest
// first: what a stream resuming from Last-Event-ID missed.
func (s *Service) Since(ctx context.Context, user string, after int64, limit int) ([]Message, error) {
	return s.opts.Store.InboxMessagesAfter(ctx, user, after, limit)
}

// Unread returns user's unread count.
func (s *Service) Unread(ctx context.Context, user string) (int, error) {
	return s.opts.Store.InboxUnread(ctx, user)
}

// Mark applies a to user's message id and publishes the new unread count.
func (s *Service) Mark(ctx context.Context, user, id string, a Action) (Message, int, error) {
	m, err := s.opts.Store.SetInboxState(ctx, user, id, a, s.opts.Now())
	if err != nil {
		return Message{}, 0, err
	}
	unread, err := s.changed(ctx, user)
	return m, unread, err
}

// ReadAll marks every message of user read, publishes the unread count and
// returns how many changed.
func (s *Service) ReadAll(ctx context.Context, user string) (changed, unread int, err error) {
	if changed, err = s.opts.Store.MarkInboxRead(ctx, user, s.opts.Now()); err != nil {
		return 0, 0, err
	}
	unread, err = s.changed(ctx, user)
	return changed, unread, err
}

func (s *Service) changed(ctx context.Context, user string) (int, error) {
	unread, err := s.opts.Store.InboxUnread(ctx, user)
	if err != nil {
		return 0, err
	}
	s.publish(Event{Kind: KindUnread, UserID: user, Unread: unread})
	return unread, nil
}

func (s *Service) publish(e Event) {
	e.At = s.opts.Now().UnixMicro()
	if s.opts.Publish == nil {
		s.Receive(e)
		return
	}
	if err := s.opts.Publish(e); err != nil {
		s.log.Warn("inbox event not published; streams catch up when they reconnect", "user", e.UserID, "error", err)
	}
}
