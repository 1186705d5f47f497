package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
)

// notifyQueue opens the notification queue on c and deletes its streams
// when the test ends.
func notifyQueue(t *testing.T, c *Conn, o NotifyOptions) *NotifyQueue {
	t.Helper()
	q, err := c.NotifyQueue(t.Context(), o)
	if err != nil {
		t.Fatalf("NotifyQueue: %v", err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for k := range q.lanes {
			if err := c.JetStream().DeleteStream(ctx, q.streamName(k)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("DeleteStream: %v", err)
			}
		}
	})
	return q
}

// eachServer runs test in two parallel subtests, connect opening a Conn
// for the subtest's t: on a server of the queue's own in a data directory
// (the subtest named embedded), and on the test NATS server (external).
func eachServer(t *testing.T, embedded, external string, test func(t *testing.T, connect func(*testing.T) *Conn)) {
	t.Helper()
	servers := map[string]func(t *testing.T) *Conn{
		embedded: func(t *testing.T) *Conn { return open(t, Options{DataDir: t.TempDir()}) },
		external: func(t *testing.T) *Conn { return open(t, Options{URL: enginetest.NATSURL(t)}) },
	}
	for _, name := range []string{embedded, external} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, servers[name])
		})
	}
}

func TestNotifyQueue(t *testing.T) {
	t.Parallel()
	eachServer(t, "embedded", "external", func(t *testing.T, connect func(*testing.T) *Conn) {
		t.Run("OrderPerUserAndDedupe", func(t *testing.T) { t.Parallel(); testQueueOrder(t, connect(t), NotifyOptions{}) })
		t.Run("OrderPerUserAndDedupeUnconfirmed", func(t *testing.T) {
			t.Parallel()
			testQueueOrder(t, connect(t), NotifyOptions{Unconfirmed: true})
		})
		t.Run("NakRedelivers", func(t *testing.T) { t.Parallel(); testQueueNak(t, connect(t)) })
		t.Run("InFlightCopyKeepsOrder", func(t *testing.T) { t.Parallel(); testQueueInFlight(t, connect(t), errInFlight) })
		t.Run("FailedJobKeepsOrder", func(t *testing.T) { t.Parallel(); testQueueInFlight(t, connect(t), errStoreDown) })
		t.Run("Horizon", func(t *testing.T) { t.Parallel(); testQueueHorizon(t, connect(t)) })
	})
}

// collector records handled jobs and checks no user has two in flight.
type collector struct {
	mu       sync.Mutex
	inFlight map[string]bool
	got      map[string][]string // user -> notification ids in handling order
	overlap  []string
	n        int
	done     chan struct{}
	want     int
}

func (c *collector) handle(_ context.Context, j notify.Job) error {
	c.mu.Lock()
	if c.inFlight[j.UserID] {
		c.overlap = append(c.overlap, j.UserID)
	}
	c.inFlight[j.UserID] = true
	c.mu.Unlock()
	time.Sleep(time.Millisecond) // work: holds the job so that overlaps would show
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight[j.UserID] = false
	c.got[j.UserID] = append(c.got[j.UserID], j.NotificationID)
	c.n++
	if c.n == c.want {
		close(c.done)
	}
	return nil
}

func testQueueOrder(t *testing.T, c *Conn, o NotifyOptions) {
	o.Workers = map[notify.Category]int{notify.Orders: 8}
	q := notifyQueue(t, c, o)
	const users, per = 5, 20
	col := &collector{inFlight: map[string]bool{}, got: map[string][]string{}, done: make(chan struct{}), want: users * per}
	var want = map[string][]string{}
	for i := range per {
		for u := range users {
			user := fmt.Sprintf("u%d", u)
			j := notify.Job{NotificationID: fmt.Sprintf("n%02d-%s", i, user), Channel: notify.Email, UserID: user, Category: notify.Orders}
			want[user] = append(want[user], j.NotificationID)
			for range 2 { // the second publish has the same Nats-Msg-Id: dropped
				if err := q.Publish(t.Context(), j); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := q.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- q.Run(ctx, col.handle) }()
	select {
	case <-col.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("handled %d of %d jobs within 30s", col.n, col.want)
	}
	cancel()
	if err := <-runDone; err != nil {
		t.Errorf("Run: %v", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	checkOrder(t, want, col.got, col.overlap)
}

func testQueueNak(t *testing.T, c *Conn) {
	q := notifyQueue(t, c, NotifyOptions{})
	j := notify.Job{NotificationID: "n1", Channel: notify.SMS, UserID: "u1", Category: notify.Critical}
	if err := q.Publish(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	calls := 0
	done := make(chan struct{})
	handle := func(context.Context, notify.Job) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return errors.New("store down")
		}
		if calls == 2 {
			close(done)
		}
		return nil
	}
	runQueue(t, q, handle)
	waitClosed(t, done, "a job whose handler failed was not delivered again")
}

// waitClosed waits up to 30s for done to close, failing t with msg if it
// does not.
func waitClosed(t *testing.T, done <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal(msg)
	}
}

func testQueueHorizon(t *testing.T, c *Conn) {
	q := notifyQueue(t, c, NotifyOptions{})
	before := time.Now()
	h, err := q.Horizon(t.Context(), notify.Push, notify.Marketing)
	if err != nil || h.Before(before) {
		t.Errorf("Horizon of an empty stream = %v, %v; want now", h, err)
	}
	for i := range 3 {
		if err := q.Publish(t.Context(), notify.Job{NotificationID: fmt.Sprint(i), Channel: notify.Push, UserID: "u", Category: notify.Marketing}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	h, err = q.Horizon(t.Context(), notify.Push, notify.Marketing)
	if err != nil || h.Before(before.Add(-time.Second)) || h.After(after) {
		t.Errorf("Horizon with jobs pending = %v, %v; want the first publish time, in [%v, %v]", h, err, before, after)
	}
	if other, _ := q.Horizon(t.Context(), notify.Push, notify.Critical); other.Before(after) {
		t.Errorf("Horizon of another stream = %v, want now (streams are separate)", other)
	}
}

// TestNotifyQueueOpenFails: when a stream cannot be set up, NotifyQueue
// closes what it opened and returns the error (it used to panic).
func TestNotifyQueueOpenFails(t *testing.T) {
	t.Parallel()
	c := open(t, Options{DataDir: t.TempDir()})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if q, err := c.NotifyQueue(ctx, NotifyOptions{}); err == nil {
		q.Close()
		t.Fatal("NotifyQueue with a cancelled context succeeded")
	}
}

var (
	errInFlight  = fmt.Errorf("%w: held elsewhere", notify.ErrInFlight)
	errStoreDown = errors.New("claim delivery: dial tcp 127.0.0.1:5432: connection refused")
)

// testQueueInFlight: a job whose handler fails with fail (a delivery
// another worker holds the claim of, notify.ErrInFlight; or a store that
// cannot be reached, as while PostgreSQL restarts) is tried again in
// place, not handed back, so the same user's next job runs only after it.
func testQueueInFlight(t *testing.T, c *Conn, fail error) {
	q := notifyQueue(t, c, NotifyOptions{})
	first := notify.Job{NotificationID: "n1", Channel: notify.SMS, UserID: "u1", Category: notify.Critical}
	second := notify.Job{NotificationID: "n2", Channel: notify.SMS, UserID: "u1", Category: notify.Critical}
	for _, j := range []notify.Job{first, second} {
		if err := q.Publish(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var handled []string
	claimed := 2 // the first job's claim is held for two asks
	done := make(chan struct{})
	handle := func(_ context.Context, j notify.Job) error {
		mu.Lock()
		defer mu.Unlock()
		if j.NotificationID == "n1" && claimed > 0 {
			claimed--
			return fail
		}
		handled = append(handled, j.NotificationID)
		if len(handled) == 2 {
			close(done)
		}
		return nil
	}
	runQueue(t, q, handle)
	waitClosed(t, done, "the jobs were not handled")
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(handled, []string{"n1", "n2"}) {
		t.Errorf("handled %v, want n1 (once its claim was given up) before n2", handled)
	}
}
