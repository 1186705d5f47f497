package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// ReasonDigested is the suppression reason of a delivery gathered into a
// digest; the notification's Digests name the digest.
const ReasonDigested = "digested"

// digestRequestPrefix starts the request_id of a digest's message.
const digestRequestPrefix = "digest:"

// MaxDigestLine bounds one event's line in {items}, in bytes.
const MaxDigestLine = 1000

// Digest is one window of one user's notifications of one type on one
// channel.
type Digest struct {
	ID        string
	UserID    string
	Channel   Channel
	Type      string
	WindowEnd time.Time // when it is due
	MaxItems  int
	// Count is the number of events gathered: exact, as the store counts
	// them under the digest's row lock.
	Count int
	// Closed reports a digest that takes no more events (its window ended,
	// it filled up, or it is being sent).
	Closed bool
	// NotificationID is the digest's message once it is saved; empty
	// before.
	NotificationID string
	CreatedAt      time.Time
	// Items are the events in the order they joined; DueDigests leaves
	// them out.
	Items []DigestItem
}

// DigestItem is one event of a digest.
type DigestItem struct {
	NotificationID string
	Data           json.RawMessage
	At             time.Time
}

// DigestJoin asks CreateDigested to add the notification to its user's open
// digest of its type on Channel, opening one (with id NewID, due Window
// after the notification's creation) when none is open, its window ended
// or it is full.
type DigestJoin struct {
	Channel  Channel
	Window   time.Duration
	MaxItems int
	NewID    string
}

// DigestStore keeps digests; part of [Store].
type DigestStore interface {
	// CreateDigested is CreateNotification (group committed too) that
	// also joins n to a digest for each of joins, in the same
	// transaction: an event is in a digest exactly when it is saved. A
	// digest that reaches its MaxItems is closed and due at once. When
	// n.RequestID is taken it saves and joins nothing; when n.ID is
	// already stored, likewise, and it reports created true (see
	// CreateNotification).
	CreateDigested(ctx context.Context, n Notification, ds []Delivery, joins []DigestJoin) (existing Notification, created bool, err error)
	// DueDigests returns up to limit digests without a message whose
	// window ended at or before now, oldest first, without their items.
	DueDigests(ctx context.Context, now time.Time, limit int) ([]Digest, error)
	// CloseDigest closes digest id (no event joins it afterwards) and
	// returns it with its items; NotFound when there is none. Closing a
	// closed digest changes nothing.
	CloseDigest(ctx context.Context, id string) (Digest, error)
	// MarkDigestSent records notificationID as digest id's message,
	// unless it has one.
	MarkDigestSent(ctx context.Context, id, notificationID string) error
	// DigestsOf returns, with their items (Data left out as {}, as it may be
	// large: up to MaxDigestItems events of MaxDataBytes each), the digests
	// notification id joined and the one it is the message of.
	DigestsOf(ctx context.Context, id string) ([]Digest, error)
}

// digestJoins turns the live deliveries of n into digested ones when the
// type has a digest rule, and returns the digests they join. Critical
// notifications are never digested, and neither is a digest's message.
func (s *Service) digestJoins(n Notification, t Template, ds []Delivery) []DigestJoin {
	r := t.Digest
	if r == nil || n.Category == Critical || strings.HasPrefix(n.RequestID, digestRequestPrefix) {
		return nil
	}
	var joins []DigestJoin
	for i, d := range ds {
		if d.Status != StatusQueued {
			continue
		}
		ds[i].Status, ds[i].Error, ds[i].NextAttemptAt = StatusSuppressed, ReasonDigested, time.Time{}
		joins = append(joins, DigestJoin{Channel: d.Channel, Window: r.WindowDuration(), MaxItems: r.Items(),
			NewID: NewID("dig_", n.CreatedAt)})
	}
	return joins
}

// SendDueDigests sends the message of up to limit digests that are due and
// returns how many it sent. Every node's scheduler may run it at once:
// each step is idempotent and the message's request_id is the digest's, so
// a digest goes out once.
func (s *Service) SendDueDigests(ctx context.Context, limit int) (int, error) {
	due, err := s.opts.Store.DueDigests(ctx, s.now(), limit)
	if err != nil {
		return 0, err
	}
	// One digest that cannot be sent (its store write failed) must not
	// hold back the others behind it: each is tried, the errors joined.
	sent, errs := 0, []error(nil)
	for _, d := range due {
		if err := s.sendDigest(ctx, d.ID); err != nil {
			errs = append(errs, fmt.Errorf("send digest %s: %w", d.ID, err))
			continue
		}
		sent++
	}
	return sent, errors.Join(errs...)
}

// sendDigest closes digest id, saves its message and queues it.
func (s *Service) sendDigest(ctx context.Context, id string) error {
	d, err := s.opts.Store.CloseDigest(ctx, id)
	if err != nil {
		return err
	}
	if d.NotificationID != "" {
		return nil // sent by another node meanwhile
	}
	t, err := s.Template(ctx, d.Type)
	if err != nil {
		return err
	}
	cat, err := s.category(ctx, d.Type)
	if err != nil {
		return err
	}
	now := s.now()
	n := Notification{
		ID: NewID("ntf_", now), RequestID: digestRequestPrefix + d.ID, RequestHash: digestRequestPrefix + d.ID,
		UserID: d.UserID, Type: d.Type, Category: cat, Data: digestData(d, t.Digest),
		Channels: []Channel{d.Channel}, CreatedAt: now,
	}
	st, err := s.sharedSettings(ctx, d.UserID)
	if err != nil {
		return err
	}
	ds := s.escalate(n, t, st, s.plan(ctx, n, st, now), now)
	existing, created, err := s.opts.Store.CreateNotification(ctx, n, ds)
	if err != nil {
		return err
	}
	if !created {
		n.ID = existing.ID // saved by a node that died before marking it
	}
	// Marked before the jobs are queued, so a message that went out is
	// always on its digest's timeline (and the digest on the message's).
	// A node that dies between the two leaves queued deliveries, which
	// the recovery sweep publishes.
	if err := s.opts.Store.MarkDigestSent(ctx, d.ID, n.ID); err != nil {
		return err
	}
	if created {
		s.publish(ctx, n, ds)
	} else {
		s.requeue(ctx, n.ID)
	}
	return nil
}

// digestData is the data of digest d's message: the first event's data,
// with count and items set.
func digestData(d Digest, r *DigestRule) json.RawMessage {
	data := map[string]json.RawMessage{}
	if len(d.Items) > 0 {
		if first, err := decodeData(d.Items[0].Data); err == nil && first != nil {
			data = first
		}
	}
	item := ""
	if r != nil {
		item = r.Item
	}
	lines := make([]string, 0, len(d.Items))
	size := 0
	for _, it := range d.Items {
		line := digestLine(item, it.Data)
		if size += len(line) + 1; size > MaxDataBytes {
			break // the count stays exact; the list is cut
		}
		lines = append(lines, line)
	}
	data["count"], _ = json.Marshal(d.Count)
	data["items"], _ = json.Marshal(strings.Join(lines, "\n"))
	raw, _ := json.Marshal(data)
	return raw
}

// digestLine renders one event's line: text filled from its data, or the
// data as "key: value" pairs when text is empty. A line holds no newline.
func digestLine(text string, raw json.RawMessage) string {
	data, _ := decodeData(raw)
	var line string
	if text != "" {
		line = Render(text, data)
	} else {
		parts := make([]string, 0, len(data))
		for _, k := range sortedKeys(data) {
			parts = append(parts, k+": "+dataString(data[k]))
		}
		line = strings.Join(parts, ", ")
	}
	line = strings.ReplaceAll(line, "\n", " ")
	if len(line) > MaxDigestLine {
		line = truncateUTF8(line, MaxDigestLine)
	}
	return line
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// rulesOf returns the template of typ for its digest and escalation rules;
// a type without a template has none.
func (s *Service) rulesOf(ctx context.Context, typ string) (Template, error) {
	t, err := s.Template(ctx, typ)
	if apperr.Is(err, apperr.NotFound) {
		return Template{}, nil
	}
	return t, err
}

// create saves n and its deliveries ds, joining the digests of joins: with
// the group commit when there are none.
func (s *Service) create(ctx context.Context, n Notification, ds []Delivery, joins []DigestJoin) (Notification, bool, error) {
	if len(joins) == 0 {
		return s.opts.Store.CreateNotification(ctx, n, ds)
	}
	return s.opts.Store.CreateDigested(ctx, n, ds, joins)
}
