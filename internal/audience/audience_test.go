package audience_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/audience"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// nopQueue drops the notifications' jobs: these tests count the
// notifications a broadcast makes, not their delivery.
type nopQueue struct{}

func (nopQueue) Publish(context.Context, notify.Job) error { return nil }

// notifier sends through the real notify.Service and records each
// notification created (not the duplicates); hook, when set, runs before
// each send.
type notifier struct {
	*notify.Service
	mu      sync.Mutex
	created map[string]int // user -> notifications created
	order   []string
	hook    func(n int)
	sends   int
}

func (n *notifier) Send(ctx context.Context, req notify.Request) (notify.Accepted, error) {
	n.mu.Lock()
	n.sends++
	sends, hook := n.sends, n.hook
	n.mu.Unlock()
	if hook != nil {
		hook(sends)
	}
	a, err := n.Service.Send(ctx, req)
	if err == nil && !a.Duplicate {
		n.mu.Lock()
		n.created[req.UserID]++
		n.order = append(n.order, req.RequestID)
		n.mu.Unlock()
	}
	return a, err
}

// exactlyOnce fails unless each of users got one notification and no one
// else got any.
func (n *notifier) exactlyOnce(t *testing.T, users []string) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.created) != len(users) {
		t.Fatalf("%d users got notifications, want %d", len(n.created), len(users))
	}
	for _, u := range users {
		if n.created[u] != 1 {
			t.Fatalf("user %s got %d notifications, want 1", u, n.created[u])
		}
	}
}

type bundle struct {
	db     *store.DB
	clock  *ratelimittest.Clock
	notify *notify.Service
	n      *notifier
	opts   audience.Options
	svc    *audience.Service
	// The metrics hooks' sums.
	mu                sync.Mutex
	accepted, skipped int64
	ended             map[audience.Status]int
}

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T, batch int) *bundle {
	t.Helper()
	return setupOn(t, storetest.SQLite(t), batch)
}

// engines runs test on SQLite and on PostgreSQL (skipped without
// SLUICE_TEST_POSTGRES_URL), each with its own bundle.
func engines(t *testing.T, batch int, test func(t *testing.T, b *bundle)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, setup(t, batch))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
		db, err := store.Open(t.Context(), store.Options{URL: url, MaxOpenConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if _, err := db.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		test(t, setupOn(t, db, batch))
	})
}

func setupOn(t *testing.T, db *store.DB, batch int) *bundle {
	t.Helper()
	b := &bundle{db: db, clock: ratelimittest.NewClock(t0)}
	b.notify = notify.NewService(notify.Options{Store: b.db, Queue: nopQueue{}, Now: b.clock.Now,
		Providers: map[notify.Channel]notify.Provider{}})
	b.n = &notifier{Service: b.notify, created: map[string]int{}}
	_, err := b.notify.PutTemplate(t.Context(), notify.Template{Type: "promo", Category: notify.Marketing,
		Channels: map[string]map[string]notify.Content{"default": {"en": {Subject: "Sale", Body: "Half off today"}}}})
	if err != nil {
		t.Fatal(err)
	}
	b.ended = map[audience.Status]int{}
	b.opts = audience.Options{Store: b.db, Notifier: b.n, Batch: batch, Lease: time.Minute, Now: b.clock.Now,
		Metrics: audience.Metrics{
			Members: func(a, s int64) { b.mu.Lock(); b.accepted += a; b.skipped += s; b.mu.Unlock() },
			Ended:   func(st audience.Status) { b.mu.Lock(); b.ended[st]++; b.mu.Unlock() },
		}}
	b.svc = audience.New(b.opts)
	return b
}

// subscribe subscribes n users (u0000, ...) to topic and returns them.
func (b *bundle) subscribe(t *testing.T, topic string, n int) []string {
	t.Helper()
	all := make([]string, n)
	for i := range all {
		all[i] = fmt.Sprintf("u%04d", i)
	}
	for chunk := range slices.Chunk(all, audience.MaxSubscribe) {
		if _, err := b.svc.Subscribe(t.Context(), topic, chunk); err != nil {
			t.Fatal(err)
		}
	}
	return all
}

func (b *bundle) create(t *testing.T, req audience.Request) audience.Broadcast {
	t.Helper()
	bc, created, err := b.svc.Create(t.Context(), req)
	if err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	return bc
}

func (b *bundle) get(t *testing.T, id string) audience.Broadcast {
	t.Helper()
	bc, err := b.svc.Broadcast(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return bc
}

func promo(topic string) audience.Request {
	return audience.Request{RequestID: "r-" + topic, Type: "promo", To: audience.To{Topic: topic}}
}

func TestBroadcastSendsOneNotificationPerMember(t *testing.T) {
	t.Parallel()
	engines(t, 0, testOnePerMember)
}

func testOnePerMember(t *testing.T, b *bundle) {
	all := b.subscribe(t, "news", 1000)
	bc := b.create(t, promo("news"))
	if n, err := b.svc.RunDue(t.Context()); err != nil || n != 1 {
		t.Fatalf("RunDue = %d, %v; want 1", n, err)
	}
	b.n.exactlyOnce(t, all)
	for _, id := range b.n.order {
		if !strings.HasPrefix(id, "bc:"+bc.ID+":u") {
			t.Fatalf("request id %q, want bc:%s:<user>", id, bc.ID)
		}
	}
	got := b.get(t, bc.ID)
	if got.Status != audience.StatusDone || got.Targeted != 1000 || got.Accepted != 1000 || got.Skipped != 0 {
		t.Fatalf("broadcast = %s targeted %d accepted %d skipped %d; want done 1000 1000 0", got.Status, got.Targeted, got.Accepted, got.Skipped)
	}
	if n, err := b.svc.RunDue(t.Context()); err != nil || n != 0 {
		t.Fatalf("RunDue after done = %d, %v; want 0", n, err)
	}
	b.mu.Lock()
	if b.accepted != 1000 || b.skipped != 0 || b.ended[audience.StatusDone] != 1 {
		t.Errorf("metrics: %d accepted, %d skipped, ended %v; want 1000, 0, done once", b.accepted, b.skipped, b.ended)
	}
	b.mu.Unlock()
	// The same request again answers the first broadcast; another body is
	// refused.
	again, created, err := b.svc.Create(t.Context(), promo("news"))
	if err != nil || created || again.ID != bc.ID {
		t.Fatalf("Create again = %s %v %v", again.ID, created, err)
	}
	other := promo("news")
	other.Type = "other"
	if _, _, err := b.svc.Create(t.Context(), other); err == nil {
		t.Fatal("the same request_id with another body was accepted")
	}
}

func TestBroadcastResumesAfterACrash(t *testing.T) {
	t.Parallel()
	engines(t, 100, testResume)
}

func testResume(t *testing.T, b *bundle) {
	all := b.subscribe(t, "news", 1000)
	bc := b.create(t, promo("news"))
	// The first sender dies in its fifth batch: 450 sends, 400 checkpointed.
	ctx, cancel := context.WithCancel(t.Context())
	b.n.hook = func(n int) {
		if n == 451 {
			cancel()
		}
	}
	_, _ = b.svc.RunDue(ctx)
	cancel()
	b.n.hook = nil
	mid := b.get(t, bc.ID)
	if mid.Status != audience.StatusSending || mid.Accepted != 400 || mid.Groups[0].Cursor != "u0399" {
		t.Fatalf("after the crash: %s accepted %d cursor %q; want sending 400 u0399", mid.Status, mid.Accepted, mid.Groups[0].Cursor)
	}
	// Within the lease no one resumes it; after, a second sender does.
	second := audience.New(b.opts)
	if n, _ := second.RunDue(t.Context()); n != 0 {
		t.Fatalf("claimed within the lease: %d", n)
	}
	b.clock.Advance(time.Minute)
	if n, err := second.RunDue(t.Context()); err != nil || n != 1 {
		t.Fatalf("second RunDue = %d, %v", n, err)
	}
	b.n.exactlyOnce(t, all)
	got := b.get(t, bc.ID)
	if got.Status != audience.StatusDone || got.Targeted != 1000 || got.Accepted != 1000 {
		t.Fatalf("broadcast = %s targeted %d accepted %d; want done 1000 1000", got.Status, got.Targeted, got.Accepted)
	}
}

func TestBroadcastAtLocalTime(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	zones := map[string]string{"u0000": "America/New_York", "u0001": "Europe/Berlin", "u0002": "America/New_York", "u0003": "Europe/Berlin"}
	for u, tz := range zones {
		if _, err := b.notify.PutSettings(t.Context(), u, notify.Settings{Timezone: tz}); err != nil {
			t.Fatal(err)
		}
	}
	b.subscribe(t, "news", 4)
	req := promo("news")
	req.Local = &audience.Local{Time: "09:00", Date: "2026-06-02"}
	bc := b.create(t, req)
	berlin := time.Date(2026, 6, 2, 7, 0, 0, 0, time.UTC) // 09:00 CEST
	newYork := time.Date(2026, 6, 2, 13, 0, 0, 0, time.UTC)
	if !bc.SendAt.Before(berlin) {
		t.Fatalf("send_at %v, want before Berlin's 09:00", bc.SendAt)
	}
	// Planned when first due (UTC+14's 09:00); nothing sent yet.
	b.clock.Set(bc.SendAt)
	if _, err := b.svc.RunDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := b.get(t, bc.ID)
	if len(got.Groups) != 2 || got.Groups[0].Timezone != "Europe/Berlin" || !got.Groups[0].DueAt.Equal(berlin) ||
		got.Groups[1].Timezone != "America/New_York" || !got.Groups[1].DueAt.Equal(newYork) || got.Status != audience.StatusScheduled {
		t.Fatalf("planned %s %+v", got.Status, got.Groups)
	}
	b.clock.Set(berlin)
	if _, err := b.svc.RunDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.n.exactlyOnce(t, []string{"u0001", "u0003"})
	if got := b.get(t, bc.ID); got.Status != audience.StatusSending || !got.DueAt.Equal(newYork) {
		t.Fatalf("after Berlin: %s due %v", got.Status, got.DueAt)
	}
	b.clock.Set(newYork.Add(-time.Second))
	if n, _ := b.svc.RunDue(t.Context()); n != 0 {
		t.Fatal("New York's group sent before 09:00 there")
	}
	b.clock.Set(newYork)
	if _, err := b.svc.RunDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.n.exactlyOnce(t, []string{"u0000", "u0001", "u0002", "u0003"})
	if got := b.get(t, bc.ID); got.Status != audience.StatusDone || got.Accepted != 4 {
		t.Fatalf("after New York: %s accepted %d", got.Status, got.Accepted)
	}
}

func TestBroadcastCancelStopsTheRest(t *testing.T) {
	t.Parallel()
	b := setup(t, 10)
	b.subscribe(t, "news", 100)
	bc := b.create(t, promo("news"))
	b.n.hook = func(n int) {
		if n == 15 {
			if _, err := b.svc.Cancel(context.Background(), bc.ID); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := b.svc.RunDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour)
	if n, _ := b.svc.RunDue(t.Context()); n != 0 {
		t.Fatal("a canceled broadcast was claimed")
	}
	got := b.get(t, bc.ID)
	b.n.mu.Lock()
	sent := len(b.n.created)
	b.n.mu.Unlock()
	b.mu.Lock()
	if b.ended[audience.StatusCanceled] != 1 || b.ended[audience.StatusDone] != 0 {
		t.Errorf("metrics: ended %v, want canceled once", b.ended)
	}
	b.mu.Unlock()
	if got.Status != audience.StatusCanceled || sent != 20 {
		t.Fatalf("canceled during the second batch: %s with %d sent, want canceled with 20 (the batch in flight completes)", got.Status, sent)
	}
}

func TestBroadcastToASegmentIsNotAvailableYet(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	_, _, err := b.svc.Create(t.Context(), audience.Request{RequestID: "r", Type: "promo", To: audience.To{Segment: "vip"}})
	if err == nil || !strings.Contains(err.Error(), "segments are not available yet") {
		t.Fatalf("Create to a segment = %v", err)
	}
}

// TestBroadcastTwoSendersAtOnce: two nodes' senders racing for the same
// broadcast: one claims it, every member gets one notification.
func TestBroadcastTwoSendersAtOnce(t *testing.T) {
	t.Parallel()
	engines(t, 50, func(t *testing.T, b *bundle) {
		all := b.subscribe(t, "news", 1000)
		bc := b.create(t, promo("news"))
		other := audience.New(b.opts)
		var wg sync.WaitGroup
		claims := make([]int, 2)
		for i, s := range []*audience.Service{b.svc, other} {
			wg.Go(func() {
				n, err := s.RunDue(t.Context())
				if err != nil {
					t.Errorf("RunDue: %v", err)
				}
				claims[i] = n
			})
		}
		wg.Wait()
		if claims[0]+claims[1] != 1 {
			t.Fatalf("claims %v, want one between them", claims)
		}
		b.n.exactlyOnce(t, all)
		if got := b.get(t, bc.ID); got.Status != audience.StatusDone || got.Accepted != 1000 {
			t.Fatalf("broadcast %s accepted %d", got.Status, got.Accepted)
		}
	})
}
