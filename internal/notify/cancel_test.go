package notify_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
)

// held is a provider whose calls block until the test opens its gate, and
// which counts its calls per delivery.
type held struct {
	mu    sync.Mutex
	calls map[notify.DeliveryKey]int
	gate  chan struct{}
	once  sync.Once
	// onCall, if set, is called at the start of every call.
	onCall func(notify.Message)
}

func newHeld() *held { return &held{calls: map[notify.DeliveryKey]int{}, gate: make(chan struct{})} }

func (p *held) Name() string       { return "held" }
func (p *held) NeedsContact() bool { return false }
func (p *held) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	p.mu.Lock()
	p.calls[notify.DeliveryKey{NotificationID: m.NotificationID, Channel: m.Channel}]++
	onCall := p.onCall
	p.mu.Unlock()
	if onCall != nil {
		onCall(m)
	}
	select {
	case <-p.gate:
		return notify.Receipt{ProviderMessageID: "m"}, nil
	case <-ctx.Done():
		return notify.Receipt{}, ctx.Err()
	}
}

func (p *held) open() { p.once.Do(func() { close(p.gate) }) }

func (p *held) count(k notify.DeliveryKey) int { p.mu.Lock(); defer p.mu.Unlock(); return p.calls[k] }

func (p *held) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		n += c
	}
	return n
}

// chanQueue is a queue of workers: jobs go to a channel that Run drains
// with several goroutines calling Process, as the JetStream consumers do;
// a job whose delivery is in flight goes back in, as a redelivery would.
type chanQueue struct{ jobs chan notify.Job }

func (q *chanQueue) Publish(ctx context.Context, j notify.Job) error {
	select {
	case q.jobs <- j:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q *chanQueue) run(ctx context.Context, t *testing.T, svc *notify.Service, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-q.jobs:
					err := svc.Process(ctx, j)
					switch {
					case errors.Is(err, notify.ErrInFlight):
						j.Redelivered = true
						go func() { // requeued off the worker, so a full channel cannot stall it
							select {
							case q.jobs <- j:
							case <-ctx.Done():
							}
						}()
					case err != nil && ctx.Err() == nil:
						t.Errorf("Process(%s): %v", j.Key(), err)
					}
				}
			}
		})
	}
	return &wg
}

// TestCancelRacesSends: many notifications, workers of two nodes sending
// them through a provider that blocks, and three concurrent DELETEs of
// each, on either node, while the sends go on. Every delivery ends sent by exactly one provider call or
// canceled without any, and every cancel's answer tells the truth: what it
// shows canceled was never sent, what it shows sending or sent was.
func TestCancelRacesSends(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		db, err := store.Open(t.Context(), store.Options{DataDir: filepath.Join(t.TempDir(), "data")})
		if err != nil {
			t.Fatal(err)
		}
		cancelRace(t, db)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
		db, err := store.Open(t.Context(), store.Options{URL: url, MaxOpenConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		cancelRace(t, db)
	})
}

func cancelRace(t *testing.T, db *store.DB) {
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	const notifications, workers = 60, 6
	p := newHeld()
	t.Cleanup(p.open)
	q := &chanQueue{jobs: make(chan notify.Job, 4*notifications)}
	// Two nodes on one store and one queue, each with half the workers;
	// the cancels go to either.
	var nodes []*notify.Service
	ctx, stop := context.WithCancel(context.Background())
	var running []*sync.WaitGroup
	t.Cleanup(func() {
		stop()
		for _, wg := range running {
			wg.Wait()
		}
	})
	for range 2 {
		node := notify.NewService(notify.Options{Store: db, Queue: q,
			Providers: map[notify.Channel]notify.Provider{notify.Email: p, notify.SMS: p, notify.Push: p, notify.Webhook: p}})
		running = append(running, q.run(ctx, t, node, workers/2))
		nodes = append(nodes, node)
	}

	ids := make([]string, notifications)
	index := map[string]int{}
	for i := range ids {
		a, err := nodes[i%2].Send(t.Context(), notify.Request{UserID: "u1", Type: "order.shipped",
			Channels: []notify.Channel{notify.Email, notify.SMS}})
		if err != nil {
			t.Fatal(err)
		}
		ids[i], index[a.NotificationID] = a.NotificationID, i
	}
	type report struct {
		rec notify.Record
		err error
	}
	reports := make(chan report, 8*notifications) // more than the cancels made (3 per email call, 1 + 1 per notification)
	var cancels sync.WaitGroup
	cancel := func(id string) {
		rec, err := nodes[index[id]%2].Cancel(t.Context(), id)
		reports <- report{rec, err}
	}
	// Every call on email starts three cancels of the notification three
	// places on, just past the deliveries the workers hold: the cancels
	// meet the workers' claims there, at the edge of what is being sent.
	p.mu.Lock()
	p.onCall = func(m notify.Message) {
		if i := index[m.NotificationID] + 3; m.Channel == notify.Email && i < len(ids) {
			for range 3 {
				cancels.Go(func() { cancel(ids[i]) })
			}
		}
	}
	p.mu.Unlock()
	// Every worker holds a claimed delivery in the provider; the last
	// notification is canceled meanwhile, so something is canceled
	// whatever the timing; then the gate opens.
	enginetest.Eventually(t, 30*time.Second, "every worker in a provider call", func() bool { return p.total() == workers })
	cancel(ids[len(ids)-1])
	p.open()
	final := map[notify.DeliveryKey]notify.Delivery{}
	enginetest.Eventually(t, 30*time.Second, "every delivery final", func() bool {
		for _, id := range ids {
			rec, err := db.Notification(t.Context(), id)
			if err != nil {
				return false
			}
			for _, d := range rec.Deliveries {
				if !d.Status.Terminal() {
					return false
				}
				final[d.Key()] = d
			}
		}
		return true
	})
	// No call starts cancels any more; one more cancel of each
	// notification, after everything, answers what happened too.
	cancels.Wait()
	for _, id := range ids {
		cancel(id)
	}
	close(reports)
	canceled, sent := 0, 0
	for k, d := range final {
		calls := p.count(k)
		switch {
		case d.Status == notify.StatusCanceled && calls == 0:
			canceled++
		case d.Status == notify.StatusSent && calls == 1:
			sent++
		default:
			t.Errorf("%s ended %s after %d provider calls; want sent after 1 or canceled after none", k, d.Status, calls)
		}
	}
	if canceled == 0 || sent < workers {
		t.Errorf("%d canceled, %d sent; want some canceled and at least the %d in flight sent", canceled, sent, workers)
	}
	racing := 0 // cancels that found a delivery in flight
	for r := range reports {
		if r.err != nil {
			t.Errorf("Cancel: %v", r.err)
			continue
		}
		for _, d := range r.rec.Deliveries {
			got := final[d.Key()].Status
			switch d.Status {
			case notify.StatusCanceled:
				if got != notify.StatusCanceled {
					t.Errorf("cancel reported %s canceled, but it ended %s", d.Key(), got)
				}
			case notify.StatusSending, notify.StatusSent:
				if d.Status == notify.StatusSending {
					racing++
				}
				if got != notify.StatusSent {
					t.Errorf("cancel reported %s %s, but it ended %s", d.Key(), d.Status, got)
				}
			default:
				t.Errorf("cancel reported %s %s; want canceled, sending or sent", d.Key(), d.Status)
			}
		}
		if o := notify.CancelOutcome(r.rec); o == "" {
			t.Errorf("no outcome for %s", r.rec.ID)
		}
	}
	t.Logf("%d deliveries canceled, %d sent; %d cancels found one in flight", canceled, sent, racing)
}

// TestCancelIsIdempotentAndFinal: a cancel of queued deliveries cancels
// them and the jobs already queued are dropped unsent; a second cancel
// answers the same; metrics see each canceled delivery once; a delivery
// waiting for quiet hours is canceled too; a sent one is not; an unknown
// id is NotFound.
func TestCancelIsIdempotentAndFinal(t *testing.T) {
	t.Parallel()
	var observed []notify.Observation
	var mu sync.Mutex
	b := setup(t, func(o *notify.Options) {
		o.Observe = func(ob notify.Observation) { mu.Lock(); observed = append(observed, ob); mu.Unlock() }
	})
	a := b.send(t, notify.Request{UserID: "u1", Type: "order.shipped", Channels: []notify.Channel{notify.Email, notify.SMS}})
	jobs := b.q.take()
	first, err := b.svc.Cancel(t.Context(), a.NotificationID)
	if err != nil {
		t.Fatal(err)
	}
	if got := notify.CancelOutcome(first); got != "canceled" {
		t.Errorf("outcome = %s, want canceled", got)
	}
	for _, j := range jobs { // the jobs were queued before the cancel
		if err := b.svc.Process(t.Context(), j); err != nil {
			t.Errorf("Process(canceled %s) = %v, want nil (dropped)", j.Key(), err)
		}
	}
	if calls, _ := b.prov.count(); calls != 0 {
		t.Errorf("provider called %d times for canceled deliveries", calls)
	}
	second, err := b.svc.Cancel(t.Context(), a.NotificationID)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range second.Deliveries {
		if d.Status != notify.StatusCanceled || d.Status != first.Deliveries[i].Status {
			t.Errorf("second cancel: %s = %s, first said %s", d.Channel, d.Status, first.Deliveries[i].Status)
		}
	}
	mu.Lock()
	if len(observed) != 2 || observed[0].Status != notify.StatusCanceled {
		t.Errorf("observed %+v; want two canceled outcomes, once each", observed)
	}
	mu.Unlock()
	if _, err := b.svc.Cancel(t.Context(), "ntf_nope"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("Cancel(unknown) = %v, want NotFound", err)
	}

	// A delivery waiting for the end of quiet hours is canceled, and the
	// scheduler does not publish it when they end; the recovery sweep
	// finds nothing either.
	if _, err := b.svc.PutSettings(t.Context(), "u2", notify.Settings{QuietHours: notify.QuietHours{Start: "11:00", End: "13:00"}}); err != nil {
		t.Fatal(err)
	}
	a = b.send(t, notify.Request{UserID: "u2", Type: "order.shipped", Channels: []notify.Channel{notify.Email}})
	if rec, err := b.svc.Cancel(t.Context(), a.NotificationID); err != nil || notify.CancelOutcome(rec) != "canceled" {
		t.Fatalf("Cancel(delayed) = %+v, %v; want canceled", rec, err)
	}
	b.clock.Advance(2 * time.Hour)
	if n, err := b.svc.QueueDue(t.Context(), 10); err != nil || n != 0 {
		t.Errorf("QueueDue = %d, %v; want nothing for a canceled delivery", n, err)
	}
	if n, err := b.svc.Recover(t.Context(), 10); err != nil || n != 0 {
		t.Errorf("Recover = %d, %v; want nothing for a canceled delivery", n, err)
	}

	// A sent delivery is not canceled.
	a = b.send(t, notify.Request{UserID: "u1", Type: "order.shipped", Channels: []notify.Channel{notify.Email}})
	b.drain(t)
	rec, err := b.svc.Cancel(t.Context(), a.NotificationID)
	if err != nil || notify.CancelOutcome(rec) != "not_canceled" || rec.Deliveries[0].Status != notify.StatusSent {
		t.Errorf("Cancel(sent) = %+v, %v; want not_canceled, delivery sent", rec, err)
	}
}
