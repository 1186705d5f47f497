package audience

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// Notifier is the notification path a broadcast sends through
// (*notify.Service implements it).
type Notifier interface {
	Send(ctx context.Context, req notify.Request) (notify.Accepted, error)
	// PrefetchSettings loads many users' settings in a few queries before
	// a batch of sends reads them one by one.
	PrefetchSettings(ctx context.Context, users []string) error
	Settings(ctx context.Context, user string) (notify.Settings, error)
	// Template answers NotFound for a type without one.
	Template(ctx context.Context, typ string) (notify.Template, error)
}

// The defaults of Options.
const (
	DefaultMaxTopics         = 10_000
	DefaultMaxSubscriptions  = 10_000_000
	DefaultMaxLiveBroadcasts = 1_000
	DefaultBatch             = 500
	DefaultLease             = time.Minute
	DefaultRetention         = 90 * 24 * time.Hour
	// MaxSubscribe bounds the user ids of one Subscribe call.
	MaxSubscribe = 1_000
	// MaxKeyBytes bounds a topic key.
	MaxKeyBytes = 128
)

// Options configure a Service. Store and Notifier are required.
type Options struct {
	Store    Store
	Notifier Notifier
	// MaxTopics and MaxSubscriptions bound what the node keeps; 0 means
	// DefaultMaxTopics and DefaultMaxSubscriptions.
	MaxTopics, MaxSubscriptions int64
	// MaxLiveBroadcasts bounds the broadcasts scheduled or sending at once;
	// 0 means DefaultMaxLiveBroadcasts.
	MaxLiveBroadcasts int
	// Batch is how many members the sender reads, sends and checkpoints at
	// a time; 0 means DefaultBatch.
	Batch int
	// Lease is how long a node's claim on a broadcast lasts without a
	// checkpoint; another node resumes it after. 0 means DefaultLease.
	Lease time.Duration
	// Retention is how long a done or canceled broadcast is kept; 0 means
	// DefaultRetention.
	Retention time.Duration
	// Metrics are called as broadcasts send and end; nil fields are
	// skipped.
	Metrics Metrics
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger // nil: discard
}

// Metrics are the hooks a Service reports through (internal/metrics
// feeds Prometheus from them). Each may be nil.
type Metrics struct {
	// Members is called after each checkpointed batch with how many of
	// its members' notifications were accepted and how many refused.
	Members func(accepted, skipped int64)
	// Ended is called when a broadcast ends: done (by the node that sent
	// its last group) or canceled (by the node that took the cancel).
	Ended func(status Status)
}

// Service keeps topics and broadcasts and sends the due ones.
type Service struct {
	opts Options
	log  *slog.Logger
}

// New returns a Service with opts' defaults filled in.
func New(opts Options) *Service {
	opts.MaxTopics = cmp.Or(opts.MaxTopics, DefaultMaxTopics)
	opts.MaxSubscriptions = cmp.Or(opts.MaxSubscriptions, DefaultMaxSubscriptions)
	opts.MaxLiveBroadcasts = cmp.Or(opts.MaxLiveBroadcasts, DefaultMaxLiveBroadcasts)
	opts.Batch = cmp.Or(opts.Batch, DefaultBatch)
	opts.Lease = cmp.Or(opts.Lease, DefaultLease)
	opts.Retention = cmp.Or(opts.Retention, DefaultRetention)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts, log: log}
}

// CheckKey refuses a topic key that is empty, too long or not of
// letters, digits and . _ - :.
func CheckKey(field, key string) error {
	if key == "" || len(key) > MaxKeyBytes {
		return fields(apperr.Invalid, field, fmt.Sprintf("must be 1 to %d bytes", MaxKeyBytes))
	}
	for _, c := range key {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-:", c)) {
			return fields(apperr.Invalid, field, "must hold letters, digits and . _ - : only")
		}
	}
	return nil
}

// CheckUser refuses a user id notify would refuse.
func CheckUser(field, user string) error {
	if user == "" || len(user) > notify.MaxUserIDBytes || !utf8.ValidString(user) {
		return fields(apperr.Invalid, field, fmt.Sprintf("must be a user id of at most %d bytes", notify.MaxUserIDBytes))
	}
	for _, c := range user {
		if c < 0x20 || c == 0x7f {
			return fields(apperr.Invalid, field, "must hold printable characters only")
		}
	}
	return nil
}

func fields(code apperr.Code, field, detail string) error {
	return apperr.Fields(code, "invalid request", []apperr.FieldError{{Field: field, Detail: detail}})
}

// Subscribe subscribes users to topic and returns how many were new.
func (s *Service) Subscribe(ctx context.Context, topic string, users []string) (int, error) {
	if err := CheckKey("key", topic); err != nil {
		return 0, err
	}
	if len(users) == 0 || len(users) > MaxSubscribe {
		return 0, fields(apperr.Invalid, "user_ids", fmt.Sprintf("must hold 1 to %d user ids", MaxSubscribe))
	}
	for i, u := range users {
		if err := CheckUser(fmt.Sprintf("user_ids[%d]", i), u); err != nil {
			return 0, err
		}
	}
	return s.opts.Store.Subscribe(ctx, topic, users, s.opts.Now(), s.opts.MaxTopics, s.opts.MaxSubscriptions)
}

// Unsubscribe removes user from topic (idempotent).
func (s *Service) Unsubscribe(ctx context.Context, topic, user string) error {
	if err := CheckKey("key", topic); err != nil {
		return err
	}
	if err := CheckUser("user_id", user); err != nil {
		return err
	}
	_, err := s.opts.Store.Unsubscribe(ctx, topic, user)
	return err
}

// Subscribers lists topic's subscribers after the user id after.
func (s *Service) Subscribers(ctx context.Context, topic, after string, limit int) ([]string, error) {
	if err := CheckKey("key", topic); err != nil {
		return nil, err
	}
	return s.opts.Store.Subscribers(ctx, topic, after, limit)
}

// Topics lists the topics with their counts.
func (s *Service) Topics(ctx context.Context) ([]Topic, error) { return s.opts.Store.Topics(ctx) }

// Request asks for a broadcast.
type Request struct {
	RequestID string          `json:"request_id"`
	Type      string          `json:"type"`
	To        To              `json:"to"`
	Data      json.RawMessage `json:"data,omitempty"`
	Channels  []string        `json:"channels,omitempty"`
	// SendAt is an RFC 3339 time, zero for now, unless Local is set.
	SendAt time.Time `json:"-"`
	Local  *Local    `json:"-"`
}

// Create saves a broadcast and answers it, with true when it is new; a
// request_id seen before answers the first broadcast when the request is
// the same, and Conflict otherwise.
func (s *Service) Create(ctx context.Context, req Request) (Broadcast, bool, error) {
	now := s.opts.Now()
	b, err := s.build(req, now)
	if err != nil {
		return Broadcast{}, false, err
	}
	if _, err := s.opts.Notifier.Template(ctx, b.Type); err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return Broadcast{}, false, fields(apperr.Unprocessable, "type", "must be a notification type with a template")
		}
		return Broadcast{}, false, err
	}
	got, created, err := s.opts.Store.CreateBroadcast(ctx, b, s.opts.MaxLiveBroadcasts)
	if err != nil {
		return Broadcast{}, false, err
	}
	if !created && got.Hash != b.Hash {
		return Broadcast{}, false, apperr.New(apperr.Conflict, "request_id %q was used by another broadcast", req.RequestID)
	}
	return got, created, nil
}

// build validates req and returns the broadcast to save.
func (s *Service) build(req Request, now time.Time) (Broadcast, error) {
	var errs []apperr.FieldError
	bad := func(f, d string) { errs = append(errs, apperr.FieldError{Field: f, Detail: d}) }
	if req.RequestID == "" || len(req.RequestID) > 255 {
		bad("request_id", "must be 1 to 255 bytes")
	}
	if req.Type == "" || len(req.Type) > 128 {
		bad("type", "must be a notification type")
	}
	switch {
	case req.To.Segment != "":
		return Broadcast{}, apperr.Fields(apperr.Unprocessable, "segments are not available yet",
			[]apperr.FieldError{{Field: "to.segment", Detail: "segments are not available yet"}})
	case req.To.Topic == "":
		bad("to", `must be {"topic": "<key>"}`)
	default:
		if err := CheckKey("to.topic", req.To.Topic); err != nil {
			bad("to.topic", "must be a topic key")
		}
	}
	data := []byte(req.Data)
	if len(data) == 0 || string(data) == "null" {
		data = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil || obj == nil {
		bad("data", "must be a JSON object")
	} else if len(data) > notify.MaxDataBytes {
		bad("data", fmt.Sprintf("must be at most %d bytes", notify.MaxDataBytes))
	} else {
		data, _ = json.Marshal(obj)
	}
	for i, ch := range req.Channels {
		if !notify.Channel(ch).Valid() {
			bad(fmt.Sprintf("channels[%d]", i), "must be a channel")
		}
	}
	b := Broadcast{ID: notify.NewID("bc_", now), RequestID: req.RequestID, Type: req.Type, To: req.To, Data: data,
		Channels: req.Channels, Status: StatusScheduled, CreatedAt: now, UpdatedAt: now}
	if req.Local != nil {
		first, err := req.Local.earliest()
		if err != nil {
			bad("send_at", err.Error())
		}
		b.Local, b.SendAt, b.DueAt = *req.Local, first, first
	} else {
		b.SendAt = req.SendAt
		if b.SendAt.IsZero() {
			b.SendAt = now
		}
		b.SendAt = b.SendAt.UTC().Truncate(time.Microsecond)
		b.DueAt, b.Planned = b.SendAt, true
		b.Groups = []Group{{DueAt: b.SendAt}}
	}
	if len(errs) > 0 {
		return Broadcast{}, apperr.Fields(apperr.Invalid, "invalid broadcast", errs)
	}
	b.Hash = hashOf(req.Type, req.To, data, req.Channels, req.SendAt.UTC(), b.Local) // as asked: an absent send_at is now, each time
	return b, nil
}

func hashOf(parts ...any) string {
	raw, _ := json.Marshal(parts)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}

// earliest checks l and returns the first instant its local time occurs
// anywhere (UTC+14).
func (l Local) earliest() (time.Time, error) {
	t, err := l.in(time.FixedZone("UTC+14", 14*3600))
	if err != nil {
		return time.Time{}, err
	}
	return t, nil
}

// in returns l's time in loc.
func (l Local) in(loc *time.Location) (time.Time, error) {
	t, err := time.ParseInLocation("2006-01-02 15:04", l.Date+" "+l.Time, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf(`must be {"local": "HH:MM", "date": "YYYY-MM-DD"}`)
	}
	return t.UTC(), nil
}

// Broadcast returns a broadcast with its groups.
func (s *Service) Broadcast(ctx context.Context, id string) (Broadcast, error) {
	return s.opts.Store.Broadcast(ctx, id)
}

// Broadcasts lists broadcasts newest first, before the id before.
func (s *Service) Broadcasts(ctx context.Context, before string, limit int) ([]Broadcast, error) {
	return s.opts.Store.Broadcasts(ctx, before, limit)
}

// Cancel cancels what a broadcast has not sent yet.
func (s *Service) Cancel(ctx context.Context, id string) (Broadcast, error) {
	now := s.opts.Now()
	b, err := s.opts.Store.CancelBroadcast(ctx, id, now)
	if err == nil && b.Status == StatusCanceled && b.UpdatedAt.Equal(now.UTC().Truncate(time.Microsecond)) && s.opts.Metrics.Ended != nil {
		s.opts.Metrics.Ended(StatusCanceled) // this call canceled it
	}
	return b, err
}
