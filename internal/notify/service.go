package notify

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/ratelimit"
)

// Options configure a [Service]. Store, Queue and Providers are required.
type Options struct {
	Store Store
	Queue Queue
	// Providers sends each channel; every channel needs one.
	Providers map[Channel]Provider
	// Backups are each channel's backup providers, tried in order after
	// the channel's provider fails or is unavailable, for categories in
	// Failover.
	Backups map[Channel][]Provider
	// Failover lists the categories whose failed attempts go on to the
	// channel's backups and then to the user's other enabled channels.
	// If nil, critical only; empty turns failover off.
	Failover []Category
	// Links, if not nil, is asked for the clicks on an SMS delivery's
	// tracked links (ShortenSMSLinks, among Rewriters, makes them).
	Links LinkShortener
	// Reads, if not nil, says whether the user read a notification in the
	// in-app inbox, for escalations that wait on "read"; without it that
	// condition never holds.
	Reads InboxReads
	// Callbacks are the providers that take delivery receipts at
	// POST /v1/providers/{name}/callbacks, by name.
	Callbacks map[string]CallbackParser
	// Rewriters run, in order, on every rendered message before it is sent.
	Rewriters []Rewriter
	// Email configures tracked links and opens in email; with its Store
	// set, its rewriter runs after Rewriters.
	Email EmailTracking
	// Dedupe is the request_id fast path. If nil, a MemoryDedupe of
	// 100,000 keys.
	Dedupe Dedupe
	// DedupeTimeout bounds each call of the fast path on a request (a
	// Redis that stops answering costs a request this long at most, then
	// the store's unique request_id decides). If zero,
	// DefaultDedupeTimeout.
	DedupeTimeout time.Duration
	// MarketingCap, if not nil, caps marketing notifications per user (the
	// key is the user id): a refused one is suppressed as throttled.
	MarketingCap ratelimit.Limiter
	// SMSGuard, if not nil, checks every notification's SMS destination
	// before it is saved; a refusal refuses the whole request.
	SMSGuard SMSGuard
	// Retry holds each category's rule. Missing categories get
	// DefaultRetryRules.
	Retry map[Category]RetryRule
	// History is how far back user history reaches and how long records
	// are kept. If zero, 90 days.
	History time.Duration
	// RecoveryAfter is how long a queued delivery may go unhandled before
	// the recovery sweep republishes it. If zero, one minute.
	RecoveryAfter time.Duration
	// StoreRetry is how long Send retries the store's transient failures
	// (a connection refused or dropped, the database restarting; see
	// apperr.ErrTransient) before it returns the store's Unavailable error
	// (503 at the edge); never past the request's context deadline. If
	// zero, apperr.RetryWindow; negative: no retry.
	StoreRetry time.Duration
	// SendTimeout bounds one provider call. If zero, 15 seconds.
	SendTimeout time.Duration
	// ClaimFor is how long a worker's claim on a delivery (status sending)
	// holds other copies of its job off. The attempt's provider calls are
	// cut off when three quarters of it have passed, leaving the rest to
	// record the outcome; after it, another worker may take the delivery
	// over (its worker is presumed dead). If zero, twice SendTimeout.
	ClaimFor time.Duration
	// ClaimLease is how long a claim holds past its worker's last
	// renewal: the worker renews it every third of the lease while its
	// provider calls run (never past ClaimFor from the claim), so the
	// claim of a worker that died lapses within the lease and another
	// copy of the job takes the delivery over. If zero,
	// DefaultClaimLease (at most ClaimFor).
	ClaimLease time.Duration
	// CacheTTL bounds how stale cached settings and templates may be on
	// nodes other than the one that changed them. If zero, 5 seconds.
	CacheTTL time.Duration
	// Observe, if set, is called with every stored delivery outcome (an
	// attempt's result, or a suppression at acceptance), for metrics. It
	// must be fast and safe for concurrent use.
	Observe func(Observation)
	// System sends system notifications (SendSystem, see
	// SystemUserPrefix). If nil, SendSystem is refused.
	System Provider
	// OnStatus, if set, is called with every accepted notification and
	// every stored delivery status that status events report (see
	// StatusEvent), after it is stored, except for system notifications.
	// It runs on the request's or the worker's path: it must be quick.
	OnStatus func(context.Context, StatusEvent)
	// Logger receives the pipeline's logs. If nil, nothing is logged.
	Logger *slog.Logger
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
	// Rand returns numbers in [0, 1) for retry jitter. If nil, math/rand/v2.
	Rand func() float64
}

// Service accepts notifications, answers queries about them and processes
// their jobs. It is safe for concurrent use; build it with NewService.
type Service struct {
	opts      Options
	log       *slog.Logger
	now       func() time.Time
	settings  *ttlCache[string, Settings]
	templates *ttlCache[string, Template]
	types     *ttlCache[string, map[string]Category]
	fresh     *freshSet
	// defaults are the settings of users who stored none, shared by
	// their cache entries (Settings hands out copies).
	defaults Settings
}

// Log attribute keys.
const (
	logKeyNotification = "notification_id"
	logKeyChannel      = "channel"
	logKeyError        = "error"
)

// DefaultClaimLease is Options.ClaimLease when unset: a renewal every
// second, and a dead worker's claim over within 3 s of its last one.
const DefaultClaimLease = 3 * time.Second

// DefaultDedupeTimeout is how long a request waits for the request_id fast
// path (Options.DedupeTimeout) before going on without it.
const DefaultDedupeTimeout = 250 * time.Millisecond

// NewService returns a Service with opts' defaults filled in.
func NewService(opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	if opts.Dedupe == nil {
		opts.Dedupe = NewMemoryDedupe(100_000, 24*time.Hour, opts.Now)
	}
	rules := DefaultRetryRules()
	for c, r := range opts.Retry {
		rules[c] = r
	}
	opts.Retry = rules
	if opts.Failover == nil {
		opts.Failover = []Category{Critical}
	}
	opts.History = cmp.Or(opts.History, 90*24*time.Hour)
	opts.RecoveryAfter = cmp.Or(opts.RecoveryAfter, time.Minute)
	opts.SendTimeout = cmp.Or(opts.SendTimeout, 15*time.Second)
	opts.ClaimFor = cmp.Or(opts.ClaimFor, 2*opts.SendTimeout)
	opts.ClaimLease = min(cmp.Or(opts.ClaimLease, DefaultClaimLease), opts.ClaimFor)
	opts.CacheTTL = cmp.Or(opts.CacheTTL, 5*time.Second)
	opts.DedupeTimeout = cmp.Or(opts.DedupeTimeout, DefaultDedupeTimeout)
	opts.StoreRetry = cmp.Or(opts.StoreRetry, apperr.RetryWindow)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		opts:      opts,
		log:       log,
		now:       opts.Now,
		settings:  newTTLCache[string, Settings](250_000, opts.CacheTTL, opts.Now),
		templates: newTTLCache[string, Template](1_000, opts.CacheTTL, opts.Now),
		types:     newTTLCache[string, map[string]Category](1, opts.CacheTTL, opts.Now),
		fresh:     newFreshSet(1 << 20),
		defaults:  DefaultSettings(),
	}
	if opts.Email.Store != nil {
		s.opts.Rewriters = append(slices.Clip(s.opts.Rewriters), RewriterFunc(s.trackEmail))
	}
	return s
}

// Send accepts one notification: it answers once the notification is
// durably saved, then queues its deliveries. A request_id seen before
// answers the first notification (Duplicate) when the request is the same,
// and apperr Conflict when it differs.
//
// Each store call Send makes is retried on a transient failure for up to
// Options.StoreRetry in all (one window for the whole request), so a
// database restart of a few seconds delays the answer instead of failing
// it. The retries are safe: the reads change nothing, and the create is
// of one notification whose id is chosen once, before the first attempt,
// so a create whose transaction committed but whose answer was lost (the
// connection dropped during COMMIT) is found by the next attempt under
// that id and reported created, once (notify.Store.CreateNotification);
// its jobs are then queued as usual. Only the store is retried: the
// marketing cap and the SMS guard, which count, are asked once.
func (s *Service) Send(ctx context.Context, req Request) (Accepted, error) {
	now := s.now()
	req, err := req.Validate(now)
	if err != nil {
		return Accepted{}, err
	}
	retry := s.storeRetry(ctx)
	var cat Category
	if err := retry(func() (err error) { cat, err = s.category(ctx, req.Type); return err }); err != nil {
		return Accepted{}, err
	}
	hash := req.hash()
	n := Notification{
		ID: NewID("ntf_", now), RequestID: req.RequestID, RequestHash: hash, UserID: req.UserID,
		Type: req.Type, Category: cat, Data: req.Data, Channels: req.Channels, ExpiresAt: req.ExpiresAt,
		CreatedAt: now,
	}
	claimed := false
	if req.RequestID != "" {
		key := "notify:req:" + req.RequestID
		dctx, cancel := context.WithTimeout(ctx, s.opts.DedupeTimeout)
		existing, ok, err := s.opts.Dedupe.Claim(dctx, key, n.ID+" "+hash)
		cancel()
		if err != nil {
			s.log.Warn("request_id fast path failed; relying on the store", logKeyError, err)
		}
		claimed = ok && err == nil
		if err == nil && !ok {
			var (
				a    Accepted
				done bool
			)
			err := retry(func() (err error) { a, done, err = s.resolveDuplicate(ctx, req.RequestID, hash, existing); return err })
			if done || err != nil {
				return a, err
			}
		}
		defer func() {
			if claimed { // nothing of ours was saved: let the next request ask the store
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.DedupeTimeout)
				_ = s.opts.Dedupe.Release(rctx, key)
				cancel()
			}
		}()
	}
	var settings Settings
	if err := retry(func() (err error) { settings, err = s.sharedSettings(ctx, req.UserID); return err }); err != nil { // read only
		return Accepted{}, err
	}
	ds := s.plan(ctx, n, settings, now)
	var rules Template
	if err := retry(func() (err error) { rules, err = s.rulesOf(ctx, n.Type); return err }); err != nil {
		return Accepted{}, err
	}
	joins := s.digestJoins(n, rules, ds)
	if joins == nil { // a digest's message escalates, not its events
		ds = s.escalate(n, rules, settings, ds, now)
	}
	if err := s.checkSMS(ctx, n.UserID, settings, ds); err != nil {
		return s.smsRefused(ctx, req.RequestID, hash, err)
	}
	var (
		existing Notification
		created  bool
	)
	if err := retry(func() (err error) { existing, created, err = s.create(ctx, n, ds, joins); return err }); err != nil {
		return Accepted{}, err
	}
	// Keep the fast-path key only when it describes what was stored; a
	// request that lost the race to the store leaves it to the store.
	claimed = claimed && !created
	if created && s.opts.Observe != nil {
		for _, d := range ds {
			if d.Status == StatusSuppressed {
				s.opts.Observe(Observation{Channel: d.Channel, Category: d.Category, Status: d.Status})
			}
		}
	}
	if !created {
		if existing.RequestHash != hash {
			return Accepted{}, conflict(req.RequestID)
		}
		s.requeue(ctx, existing.ID)
		return Accepted{NotificationID: existing.ID, Duplicate: true}, nil
	}
	s.publish(ctx, n, ds)
	s.emitAccepted(ctx, n, ds)
	return Accepted{NotificationID: n.ID}, nil
}

// storeRetry returns the retry of Send's store calls: each call it is given
// runs until it succeeds, fails otherwise, or the request's window
// (Options.StoreRetry from now, on the wall clock, as the pauses are) or
// ctx's deadline would be passed.
func (s *Service) storeRetry(ctx context.Context) func(fn func() error) error {
	deadline := time.Now().Add(s.opts.StoreRetry)
	return func(fn func() error) error { return apperr.RetryTransient(ctx, deadline, fn) }
}

// requeue publishes again the jobs of notification id's deliveries that
// are still queued and due, for a repeated request: the first one may have
// been saved by a node that died before its jobs reached the queue (the
// client, getting no answer, retried), and the client sends its next
// request only after this answer, so the jobs are queued before it rather
// than by the recovery sweep a minute later, out of order. A job the queue
// still holds is not added twice (Nats-Msg-Id); one already done is
// dropped by the worker, which finds the delivery no longer queued.
func (s *Service) requeue(ctx context.Context, id string) {
	rec, err := s.opts.Store.Notification(ctx, id)
	if err != nil {
		s.log.Warn("could not read a repeated notification to queue it again; the recovery sweep will", logKeyNotification, id, logKeyError, err)
		return
	}
	var ds []Delivery
	for _, d := range rec.Deliveries {
		if d.Status == StatusQueued && d.NextAttemptAt.IsZero() {
			ds = append(ds, d)
		}
	}
	s.publishJobs(ctx, rec.Notification, ds, false)
}

// publish queues the jobs of n's deliveries ds that are due now: confirmed
// by the queue before Send answers when it can confirm (QueueConfirmer).
// A job the queue did not take is logged; the recovery sweep republishes
// it.
func (s *Service) publish(ctx context.Context, n Notification, ds []Delivery) {
	s.publishJobs(ctx, n, ds, true)
}

// publishJobs publishes the jobs of ds that are queued and due; fresh says
// they were just saved by this node (see freshSet).
func (s *Service) publishJobs(ctx context.Context, n Notification, ds []Delivery, fresh bool) {
	var jobs []Job
	for _, d := range ds {
		if d.Status == StatusQueued && d.NextAttemptAt.IsZero() {
			if fresh {
				// Known fresh before the publish, so a worker that picks
				// the job up at once finds it.
				s.fresh.add(d.Key())
			}
			jobs = append(jobs, JobFor(n, d))
		}
	}
	if qc, ok := s.opts.Queue.(QueueConfirmer); ok && len(jobs) > 0 {
		if err := qc.PublishConfirmed(context.WithoutCancel(ctx), jobs); err != nil {
			s.log.Warn("publish not confirmed; the recovery sweep will retry", logKeyNotification, n.ID, logKeyError, err)
		}
		return
	}
	for _, j := range jobs {
		if err := s.opts.Queue.Publish(ctx, j); err != nil {
			s.log.Warn("publish failed; the recovery sweep will retry", logKeyNotification, n.ID,
				logKeyChannel, j.Channel, logKeyError, err)
		}
	}
}

// resolveDuplicate handles a request_id the fast path has seen: a
// different body is a conflict at once; the same body is a duplicate once
// the store has the first request (done true). While the first request is
// still being saved (or failed), done is false and Send carries on: the
// store's unique request_id decides.
func (s *Service) resolveDuplicate(ctx context.Context, requestID, hash, existing string) (Accepted, bool, error) {
	_, existingHash, _ := strings.Cut(existing, " ")
	if existingHash != hash {
		return Accepted{}, true, conflict(requestID)
	}
	n, err := s.opts.Store.NotificationByRequestID(ctx, requestID)
	switch {
	case apperr.Is(err, apperr.NotFound):
		return Accepted{}, false, nil
	case err != nil:
		return Accepted{}, true, err
	case n.RequestHash != hash:
		return Accepted{}, true, conflict(requestID)
	}
	s.requeue(ctx, n.ID)
	return Accepted{NotificationID: n.ID, Duplicate: true}, true, nil
}

func conflict(requestID string) error {
	return &apperr.Error{Code: apperr.Conflict,
		Message: "request_id " + requestID + " was already used with a different request",
		Fields:  []apperr.FieldError{{Field: "request_id", Detail: "already used with a different body"}}}
}

// category returns the category of typ: shipped types, then stored
// templates; an unknown type is Unprocessable.
func (s *Service) category(ctx context.Context, typ string) (Category, error) {
	if c, ok := defaultTypes[typ]; ok {
		return c, nil
	}
	types, err := s.types.get(ctx, "", func(ctx context.Context) (map[string]Category, error) {
		return s.opts.Store.TemplateCategories(ctx)
	})
	if err != nil {
		return "", err
	}
	if c, ok := types[typ]; ok {
		return c, nil
	}
	return "", &apperr.Error{Code: apperr.Unprocessable, Message: "unknown notification type",
		Fields: []apperr.FieldError{{Field: "type", Detail: "unknown type " + typ + "; PUT /v1/templates/" + typ + " defines it"}}}
}

// plan decides every requested channel's delivery: queued (delayed to the
// end of quiet hours for non-critical messages) or suppressed with a reason.
// A critical notification always gets at least one enabled channel with a
// contact, even one outside a narrowing, when the user has one.
func (s *Service) plan(ctx context.Context, n Notification, st Settings, now time.Time) []Delivery {
	throttled := false
	if n.Category == Marketing && s.opts.MarketingCap != nil {
		dec, err := s.opts.MarketingCap.Allow(ctx, n.UserID, 1)
		if err != nil {
			s.log.Warn("marketing cap check failed; sending", logKeyError, err)
		}
		throttled = err == nil && !dec.Allowed
	}
	var quietUntil time.Time
	if n.Category != Critical {
		quietUntil = st.QuietUntil(now)
	}
	requested := func(ch Channel) bool {
		return len(n.Channels) == 0 || slices.Contains(n.Channels, ch)
	}
	var ds []Delivery
	live := false
	for _, ch := range Channels {
		if !requested(ch) {
			continue
		}
		d := s.newDelivery(n, ch, now)
		switch reason := s.suppressed(n, st, ch); {
		case reason != "":
			d.Status, d.Error = StatusSuppressed, reason
		case throttled:
			d.Status, d.Error = StatusSuppressed, ReasonThrottled
		default:
			d.NextAttemptAt = quietUntil
			live = true
		}
		ds = append(ds, d)
	}
	if n.Category == Critical && !live {
		for _, ch := range Channels {
			if !requested(ch) && st.Channels[ch] && (!s.needsContact(ch) || st.Contacts.contactFor(ch) != "") {
				ds = append(ds, s.newDelivery(n, ch, now))
				break
			}
		}
	}
	return ds
}

func (s *Service) newDelivery(n Notification, ch Channel, now time.Time) Delivery {
	name := "none"
	if p := s.opts.Providers[ch]; p != nil {
		name = p.Name()
	}
	return Delivery{
		NotificationID: n.ID, Channel: ch, UserID: n.UserID, Category: n.Category, Provider: name,
		Status: StatusQueued, ExpiresAt: n.ExpiresAt, CreatedAt: now, UpdatedAt: now,
	}
}

// suppressed is why the user's settings st suppress n's delivery on ch:
// the channel off, n's category muted (never Critical) or no contact for
// ch; "" when they do not.
func (s *Service) suppressed(n Notification, st Settings, ch Channel) string {
	switch {
	case !st.Channels[ch]:
		return ReasonChannelOff
	case !st.Categories[n.Category] && n.Category != Critical:
		return ReasonCategoryMuted
	case s.needsContact(ch) && st.Contacts.contactFor(ch) == "":
		return ReasonNoContact
	}
	return ""
}

func (s *Service) needsContact(ch Channel) bool {
	p := s.opts.Providers[ch]
	return p == nil || p.NeedsContact()
}

// Observation is one stored delivery outcome.
type Observation struct {
	Channel  Channel
	Category Category
	Status   Status
	// Latency is the time from acceptance to this outcome (zero for
	// suppressions, which happen at acceptance).
	Latency time.Duration
	// TakenOver marks, instead of an outcome, a delivery whose lapsed
	// claim this worker took over (Status is empty): the worker that held
	// it stopped renewing it mid-call, so that call may have reached the
	// provider and the delivery may go out twice.
	TakenOver bool
}
