package events

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/netguard"
	"github.com/sluicehq/sluice/internal/notify"
)

// Notifier queues system notifications: notify.Service.
type Notifier interface {
	SendSystem(ctx context.Context, r notify.SystemRequest) (notify.Accepted, error)
}

// Options configure a Service. Store and Notifier are required.
type Options struct {
	Store    Store
	Notifier Notifier
	// Retention is how long events stay in the log, and so how far back
	// Recover reaches. If zero, 7 days.
	Retention time.Duration
	// DisableAfter and DisableAfterFailures are a new subscription's
	// defaults (see Subscription); zero never disables (cmd/sluice passes
	// events.disable_after, 5 days like Svix, by default).
	DisableAfter         time.Duration
	DisableAfterFailures int
	// MaxSubscriptions bounds how many subscriptions may exist. If zero,
	// 100.
	MaxSubscriptions int
	// AllowPrivate accepts subscription URLs on loopback and private
	// networks (the sender's guard must allow them too).
	AllowPrivate bool
	// CacheTTL bounds how long a node works from its cached subscription
	// list: a subscription created or deleted on another node is seen
	// within it. If zero, 5 seconds.
	CacheTTL time.Duration
	// MaxRecover bounds the events one Recover call queues. If zero,
	// 10,000.
	MaxRecover int
	// EmitTimeout bounds the store writes one event costs on the path
	// that generated it. If zero, 2 seconds.
	EmitTimeout time.Duration
	// Counted, if not nil, is told the outcome of every event some
	// subscription wants, by type: ResultLogged (in the event log, queued
	// to the enabled subscriptions) or ResultLost (never logged: the
	// subscriptions or the log could not be read or written).
	Counted func(eventType, result string)
	// Disabled, if not nil, is told of each subscription disabled after
	// its run of failures.
	Disabled func()
	Logger   *slog.Logger
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
}

// Outcomes of an event, for Options.Counted.
const (
	ResultLogged = "logged"
	ResultLost   = "lost"
)

// Service manages subscriptions and generates events. It is safe for
// concurrent use; build it with NewService.
type Service struct {
	opts Options
	log  *slog.Logger

	mu         sync.Mutex
	cached     []Subscription
	asked      map[string]bool // event types some cached subscription asks for
	cachedAt   time.Time       // zero: never read, or invalidated
	refreshing bool
}

// NewService returns a Service with opts' defaults filled in.
func NewService(opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Retention = cmp.Or(opts.Retention, 7*24*time.Hour)
	opts.MaxSubscriptions = cmp.Or(opts.MaxSubscriptions, 100)
	opts.CacheTTL = cmp.Or(opts.CacheTTL, 5*time.Second)
	opts.MaxRecover = cmp.Or(opts.MaxRecover, 10_000)
	opts.EmitTimeout = cmp.Or(opts.EmitTimeout, 2*time.Second)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts, log: log}
}

// Retention returns how long events are kept.
func (s *Service) Retention() time.Duration { return s.opts.Retention }

// NewSubscription is what a caller asks for. A nil DisableAfter or
// DisableAfterFailures takes the service's default (Options); zero means
// never.
type NewSubscription struct {
	URL                  string
	Events               []string
	DisableAfter         *time.Duration
	DisableAfterFailures *int
}

// MaxURLBytes bounds a subscription's URL.
const MaxURLBytes = 2048

// Create validates and stores a subscription with a new secret, returned
// in it (the only time the secret is shown).
func (s *Service) Create(ctx context.Context, n NewSubscription) (Subscription, error) {
	var errs []apperr.FieldError
	bad := func(field, detail string) { errs = append(errs, apperr.FieldError{Field: field, Detail: detail}) }
	if detail := s.checkURL(n.URL); detail != "" {
		bad("url", detail)
	}
	if len(n.Events) == 0 {
		bad("events", "is required: one or more of "+strings.Join(Types, ", "))
	}
	seen := map[string]bool{}
	for i, t := range n.Events {
		switch {
		case !ValidType(t):
			bad(fmt.Sprintf("events[%d]", i), "unknown event type (want one of "+strings.Join(Types, ", ")+")")
		case seen[t]:
			bad(fmt.Sprintf("events[%d]", i), "listed twice")
		}
		seen[t] = true
	}
	if d := n.DisableAfter; d != nil && (*d < 0 || (*d > 0 && *d < time.Minute)) {
		bad("disable_after", "must be 0 (never) or at least 1m")
	}
	if f := n.DisableAfterFailures; f != nil && *f < 0 {
		bad("disable_after_failures", "must be 0 (never) or more")
	}
	if err := apperr.Fields(apperr.Unprocessable, "the event subscription is invalid", errs); err != nil {
		return Subscription{}, err
	}
	subs, err := s.opts.Store.EventSubscriptions(ctx)
	if err != nil {
		return Subscription{}, err
	}
	if len(subs) >= s.opts.MaxSubscriptions {
		return Subscription{}, apperr.New(apperr.Conflict, "there are %d event subscriptions already, the most allowed", len(subs))
	}
	now := s.opts.Now()
	sub := Subscription{ID: notify.NewID("evs_", now), URL: n.URL, Events: n.Events, Secret: newSecret(),
		DisableAfter: s.opts.DisableAfter, DisableAfterFailures: s.opts.DisableAfterFailures, CreatedAt: now.UTC()}
	if n.DisableAfter != nil {
		sub.DisableAfter = *n.DisableAfter
	}
	if n.DisableAfterFailures != nil {
		sub.DisableAfterFailures = *n.DisableAfterFailures
	}
	if err := s.opts.Store.CreateEventSubscription(ctx, sub); err != nil {
		return Subscription{}, err
	}
	s.invalidate()
	return sub, nil
}

// checkURL returns what is wrong with a subscription URL, or "".
func (s *Service) checkURL(raw string) string {
	if raw == "" {
		return "is required"
	}
	if len(raw) > MaxURLBytes {
		return fmt.Sprintf("must be at most %d bytes", MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "must be an absolute http or https URL without credentials"
	}
	if s.opts.AllowPrivate {
		return ""
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return "must not point at this machine (loopback)"
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if name, blocked := netguard.Blocked(ip); blocked {
			return "must be globally reachable, not in the " + strings.ToLower(strings.Trim(name, `"`)) + " range"
		}
	}
	return ""
}

// newSecret returns a Standard Webhooks secret: whsec_ and base64 of 32
// random bytes.
func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "whsec_" + base64.StdEncoding.EncodeToString(b[:])
}

// Subscription returns one subscription, or NotFound.
func (s *Service) Subscription(ctx context.Context, id string) (Subscription, error) {
	return s.opts.Store.EventSubscription(ctx, id)
}

// Subscriptions returns every subscription, oldest first.
func (s *Service) Subscriptions(ctx context.Context) ([]Subscription, error) {
	return s.opts.Store.EventSubscriptions(ctx)
}

// Delete deletes a subscription; its pending deliveries fail as deleted.
func (s *Service) Delete(ctx context.Context, id string) error {
	if err := s.opts.Store.DeleteEventSubscription(ctx, id); err != nil {
		return err
	}
	s.invalidate()
	return nil
}

// Recovery is what Recover queued.
type Recovery struct {
	Queued int
	// More is true when MaxRecover events were queued and more remain:
	// call Recover again from Until.
	More bool
	// Until is the time of the last event queued (since when none).
	Until time.Time
}

// Recover enables subscription id again (clearing its failure run) and
// queues the logged events it wants generated at or after since that it
// did not receive: those whose delivery to it failed, went dead, was
// canceled or expired, or is retrying after a failure, or that were never
// queued to it (while it was disabled); an event received, or queued and
// not failed yet, is not queued again (see Store.UndeliveredEvents). With all, it queues every
// one of them, received or not. Each goes under its own event id as
// webhook-id. since must be within the retention.
//
// Called again from Until after More, it does not queue again the events
// at Until it queued already (their deliveries are queued), unless all.
func (s *Service) Recover(ctx context.Context, id string, since time.Time, all bool) (Recovery, error) {
	now := s.opts.Now()
	if oldest := now.Add(-s.opts.Retention); since.Before(oldest) || since.After(now) {
		return Recovery{}, apperr.Fields(apperr.Unprocessable, "since is out of range", []apperr.FieldError{{Field: "since",
			Detail: fmt.Sprintf("must be within the event log's retention (%s): from %s to now", s.opts.Retention, oldest.UTC().Format(time.RFC3339))}})
	}
	sub, err := s.opts.Store.EnableEventSubscription(ctx, id)
	if err != nil {
		return Recovery{}, err
	}
	s.invalidate()
	run := notify.NewID("rcv_", now)
	rec := Recovery{Until: since}
	readAt, after := since, ""
	limit := min(500, s.opts.MaxRecover+1)
	for {
		var page []Event
		if all {
			page, err = s.opts.Store.EventsSince(ctx, readAt, after, limit)
		} else {
			page, err = s.opts.Store.UndeliveredEvents(ctx, sub.ID, sub.Events, readAt, after, limit)
		}
		if err != nil {
			return rec, err
		}
		for _, e := range page {
			readAt, after = e.At, e.ID
			if !sub.Wants(e.Type) {
				continue
			}
			if rec.Queued >= s.opts.MaxRecover {
				rec.More = true
				return rec, nil
			}
			if err := s.queue(ctx, sub, e, run); err != nil {
				return rec, err
			}
			rec.Queued++
			rec.Until = e.At
		}
		if len(page) < limit {
			return rec, nil
		}
	}
}

// queue hands event e to subscription sub's pipeline; run, when not
// empty, names a Recover call (the same event is queued again by each).
func (s *Service) queue(ctx context.Context, sub Subscription, e Event, run string) error {
	body, err := json.Marshal(struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}{e.ID, e.Type, e.At.UTC(), e.Data})
	if err != nil {
		return err
	}
	reqID := "evt:" + e.ID + ":" + sub.ID
	if run != "" {
		reqID += ":" + run
	}
	_, err = s.opts.Notifier.SendSystem(ctx, notify.SystemRequest{RequestID: reqID, Recipient: sub.ID, Type: e.Type, Data: body})
	return err
}

// subscribers returns the enabled subscriptions that want type t, from a
// list cached for CacheTTL, and whether any subscription, disabled ones
// included, asks for t: then the event is logged, for a Recover. While one
// caller reads the list again, the others go on with the stale one.
func (s *Service) subscribers(ctx context.Context, t string) ([]Subscription, bool, error) {
	now := s.opts.Now()
	s.mu.Lock()
	subs, stale := s.cached, s.cachedAt.IsZero() || now.Sub(s.cachedAt) >= s.opts.CacheTTL
	refresh := stale && (!s.refreshing || s.cachedAt.IsZero())
	if refresh {
		s.refreshing = true
	}
	s.mu.Unlock()
	if refresh {
		got, err := s.opts.Store.EventSubscriptions(ctx)
		s.mu.Lock()
		s.refreshing = false
		if err == nil {
			s.cached, s.cachedAt, subs = got, now, got
			s.asked = map[string]bool{}
			for _, sub := range got {
				for _, typ := range sub.Events {
					s.asked[typ] = true
				}
			}
		}
		s.mu.Unlock()
		if err != nil {
			return nil, false, err
		}
	}
	var out []Subscription
	logged := false
	for _, sub := range subs {
		logged = logged || slices.Contains(sub.Events, t)
		if sub.Wants(t) {
			out = append(out, sub)
		}
	}
	return out, logged, nil
}

// mayWant reports whether an event of type t may be wanted: false only
// while the cached list is fresh and no subscription asks for t, so the
// hooks cost a map lookup when nobody subscribed.
func (s *Service) mayWant(t string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cachedAt.IsZero() || s.opts.Now().Sub(s.cachedAt) >= s.opts.CacheTTL {
		return true
	}
	return s.asked[t]
}

func (s *Service) invalidate() {
	s.mu.Lock()
	s.cachedAt = time.Time{}
	s.mu.Unlock()
}

// Emit logs an event of type t with payload data and queues it to every
// enabled subscription that wants it; when no subscription, enabled or
// disabled, asks for t, it stores nothing. Errors are
// logged, not returned: an event is never worth failing the operation it
// reports.
func (s *Service) Emit(ctx context.Context, t string, data any) {
	if !s.mayWant(t) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.EmitTimeout)
	defer cancel()
	subs, logged, err := s.subscribers(ctx, t) // cached: no store read on most calls
	if err != nil {
		s.log.Warn("event subscriptions unreadable; event not sent", "event_type", t, "error", err)
		s.count(t, ResultLost)
		return
	}
	if !logged {
		return
	}
	raw, err := json.Marshal(data)
	if err != nil {
		s.log.Error("event payload", "event_type", t, "error", err)
		s.count(t, ResultLost)
		return
	}
	now := s.opts.Now().UTC()
	e := Event{ID: notify.NewID("evt_", now), Type: t, Data: raw, At: now}
	if err := s.appendEvent(ctx, e); err != nil {
		s.log.Warn("event log write failed; event not sent", "event_type", t, "error", err)
		s.count(t, ResultLost)
		return
	}
	s.count(t, ResultLogged)
	for _, sub := range subs {
		if err := s.queue(ctx, sub, e, ""); err != nil {
			s.log.Warn("event not queued; POST /v1/event-subscriptions/{id}/recover resends it", "event_id", e.ID,
				"subscription", sub.ID, "error", err)
		}
	}
}

// appendEvent logs e. A write that failed may still have committed (a
// connection lost while the commit was on its way), so it is written
// once more: the log is keyed by event id, so the event is logged once
// either way, and a Conflict then says the first write was.
func (s *Service) appendEvent(ctx context.Context, e Event) error {
	err := s.opts.Store.AppendEvent(ctx, e)
	if err == nil || ctx.Err() != nil {
		return err
	}
	if again := s.opts.Store.AppendEvent(ctx, e); again == nil || apperr.Is(again, apperr.Conflict) {
		return nil
	}
	return err
}

func (s *Service) count(t, result string) {
	if s.opts.Counted != nil {
		s.opts.Counted(t, result)
	}
}

// Purge deletes up to limit events older than the retention.
func (s *Service) Purge(ctx context.Context, limit int) (int, error) {
	return s.opts.Store.DeleteEventsBefore(ctx, s.opts.Now().Add(-s.opts.Retention), limit)
}

// Run purges the event log every interval until ctx ends.
func (s *Service) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(cmp.Or(interval, time.Minute))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			for {
				n, err := s.Purge(ctx, 1000)
				if err != nil {
					s.log.Warn("event log purge failed", "error", err)
				}
				if err != nil || n < 1000 {
					break
				}
			}
		}
	}
}
