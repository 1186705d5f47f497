package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
)

// runQueue runs q with handle until the test ends.
func runQueue(t *testing.T, q *NotifyQueue, handle Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, handle) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestReplicasReconcile: --nats-url with several seeds reaches a cluster;
// streams are created with Options.Replicas copies, and a queue opened
// later with another number updates the streams and their consumers.
func TestReplicasReconcile(t *testing.T) {
	t.Parallel()
	cluster := enginetest.StartNATSCluster(t, 3)
	prefix := "R" + strings.ToUpper(t.Name()[:4]) + "_"
	c1 := open(t, Options{URL: cluster.URL(), StreamPrefix: prefix, Replicas: 1})
	notifyQueue(t, c1, NotifyOptions{Partitions: 2})
	// placed reports whether every critical stream and its consumers are
	// on want servers; the cluster moves data after the update answers.
	placed := func(want int) (bool, string) {
		for _, ch := range notify.Channels {
			name := c1.Name("NOTIFY_" + strings.ToUpper(string(ch)) + "_CRITICAL")
			s, err := c1.JetStream().Stream(t.Context(), name)
			if err != nil {
				return false, err.Error()
			}
			info := s.CachedInfo()
			if got := info.Config.Replicas; got != want {
				return false, fmt.Sprintf("stream %s has %d replicas", name, got)
			}
			if info.Cluster == nil || 1+len(info.Cluster.Replicas) != want {
				return false, fmt.Sprintf("stream %s is on other servers: %+v", name, info.Cluster)
			}
			for p := range 2 {
				info, err := consumerInfo(t, s, fmt.Sprintf("workers_%d", p))
				if err != nil {
					return false, err.Error()
				}
				if info.Cluster == nil || 1+len(info.Cluster.Replicas) != want {
					return false, fmt.Sprintf("consumer %d of %s is on other servers: %+v", p, name, info.Cluster)
				}
			}
		}
		return true, ""
	}
	check := func(want int) {
		t.Helper()
		enginetest.EventuallyNil(t, 90*time.Second, fmt.Sprintf("every stream and consumer on %d servers", want), func() error {
			ok, why := placed(want)
			return enginetest.State(ok, "%s", why)
		})
	}
	check(1)
	c3 := open(t, Options{URL: cluster.URL(), StreamPrefix: prefix, Replicas: 3})
	q3, err := c3.NotifyQueue(t.Context(), NotifyOptions{Partitions: 2})
	if err != nil {
		t.Fatalf("NotifyQueue with 3 replicas: %v", err)
	}
	defer q3.Close()
	check(3)
	if _, err := Open(t.Context(), Options{DataDir: t.TempDir(), Replicas: 3}); err == nil {
		t.Error("Open of the embedded server with 3 replicas succeeded; want an error")
	}
}

// orderLog records, across several queues, the order in which each user's
// jobs were handled and whether two of one user's jobs ever overlapped.
type orderLog struct {
	mu       sync.Mutex
	inFlight map[string]string // user -> node handling one of their jobs
	got      map[string][]string
	byNode   map[string]int
	overlap  []string
	n        int
}

func (o *orderLog) handler(node string, work time.Duration) Handler {
	return func(_ context.Context, j notify.Job) error {
		o.mu.Lock()
		if other, ok := o.inFlight[j.UserID]; ok {
			o.overlap = append(o.overlap, fmt.Sprintf("%s on %s and %s", j.UserID, other, node))
		}
		o.inFlight[j.UserID] = node
		o.mu.Unlock()
		time.Sleep(work) // the provider call: holds the job so that overlaps would show
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.inFlight, j.UserID)
		o.got[j.UserID] = append(o.got[j.UserID], j.NotificationID)
		o.byNode[node]++
		o.n++
		return nil
	}
}

func newOrderLog() *orderLog {
	return &orderLog{inFlight: map[string]string{}, got: map[string][]string{}, byNode: map[string]int{}}
}

func (o *orderLog) count() int { o.mu.Lock(); defer o.mu.Unlock(); return o.n }

// check fails t unless each user's jobs were handled once each, in the
// order of want (user -> notification IDs in publish order), and never two
// of one user's at once.
func (o *orderLog) check(t *testing.T, want map[string][]string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	checkOrder(t, want, o.got, o.overlap)
}

// checkOrder fails t unless got (user -> notification IDs as handled)
// holds each user's IDs of want once each in order, and overlap (two of
// one user's jobs in flight at once) is empty.
func checkOrder(t *testing.T, want, got map[string][]string, overlap []string) {
	t.Helper()
	for user, ids := range want {
		if !slices.Equal(got[user], ids) {
			t.Errorf("user %s handled %v,\nwant %v (publish order, each once)", user, got[user], ids)
		}
	}
	if len(overlap) > 0 {
		t.Errorf("a user's jobs in flight at once: %v", overlap)
	}
}

// TestOrderAcrossNodes: two queues (two nodes) consume the same streams of
// a current server; one user's jobs are handled one at a time and in
// publish order even though both nodes pull, and when the node holding the
// partitions stops, the other takes them over at once (well before
// pinnedTTL) and carries on in order.
func TestOrderAcrossNodes(t *testing.T) {
	t.Parallel()
	srv := enginetest.StartNATSCluster(t, 1)
	prefix := "O" + strings.ToUpper(t.Name()[4:8]) + "_"
	o := NotifyOptions{Partitions: 4, Workers: map[notify.Category]int{notify.Orders: 8}}
	ca := open(t, Options{URL: srv.URL(), StreamPrefix: prefix})
	cb := open(t, Options{URL: srv.URL(), StreamPrefix: prefix})
	qa, qb := notifyQueue(t, ca, o), notifyQueue(t, cb, o)
	if !qa.pinned || !qb.pinned {
		t.Fatalf("pinned = %v, %v on nats-server %s; want true", qa.pinned, qb.pinned, ca.NATS().ConnectedServerVersion())
	}
	log := newOrderLog()
	stopA := runQueue(t, qa, log.handler("a", 2*time.Millisecond))
	runQueue(t, qb, log.handler("b", 2*time.Millisecond))

	const users, per = 5, 40
	want := map[string][]string{}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			for u := range users {
				user := fmt.Sprintf("u%d", u)
				j := notify.Job{NotificationID: fmt.Sprintf("n%03d-%s", i, user), Channel: notify.Webhook, UserID: user, Category: notify.Orders}
				want[user] = append(want[user], j.NotificationID)
				// Alternate the publishing node, as a load balancer would.
				// Each publish is acknowledged before the next, as each
				// request waits for its 202 before the next is sent.
				q := map[bool]*NotifyQueue{true: qa, false: qb}[(i+u)%2 == 0]
				if err := q.Publish(t.Context(), j); err != nil {
					t.Fatal(err)
				}
				if err := q.Flush(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	publish(0, per/2)
	enginetest.Eventually(t, 30*time.Second, "first half handled", func() bool { return log.count() == users*per/2 })
	stopped := time.Now()
	stopA()
	publish(per/2, per)
	enginetest.Eventually(t, pinnedTTL/2, "second half handled after node a stopped", func() bool { return log.count() == users*per })
	t.Logf("second half handled %s after node a stopped; jobs by node: %v", time.Since(stopped).Round(time.Millisecond), log.byNode)

	log.check(t, want)
}

// TestOlderServerFallsBack: on the shared NATS (2.9 on CI machines) the
// queue detects that priority groups are missing and keeps one shared
// consumer per stream.
func TestOlderServerFallsBack(t *testing.T) {
	t.Parallel()
	c := open(t, Options{URL: enginetest.NATSURL(t)})
	version := c.NATS().ConnectedServerVersion()
	q := notifyQueue(t, c, NotifyOptions{})
	if q.pinned != pinningSupported(version) {
		t.Errorf("pinned = %v on nats-server %s", q.pinned, version)
	}
	if !q.pinned {
		l := q.lanes[streamKey{notify.Email, notify.Critical}]
		if len(l.consumers) != 1 || l.consumers[0].Durable != consumerName {
			t.Errorf("consumers on %s = %+v, want the one shared consumer", version, l.consumers)
		}
	}
}

func TestPinningSupported(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		version string
		want    bool
	}{{"2.9.25", false}, {"2.10.22", false}, {"2.11.0", true}, {"2.15.2", true}, {"3.0.0", true}, {"", false}, {"garbage", false}} {
		if got := pinningSupported(tt.version); got != tt.want {
			t.Errorf("pinningSupported(%q) = %v, want %v", tt.version, got, tt.want)
		}
	}
}

// TestInProgressKeepsHeldJobs: with an ack wait of 600ms, jobs that take
// 2s, jobs waiting behind the same user's job and jobs waiting for the one
// worker are all handled exactly once: the queue keeps every held job
// alive, so none is delivered again while the node is up.
func TestInProgressKeepsHeldJobs(t *testing.T) {
	t.Parallel()
	eachServer(t, "pinned", "shared", func(t *testing.T, connect func(*testing.T) *Conn) {
		c := connect(t)
		q := notifyQueue(t, c, NotifyOptions{AckWait: 600 * time.Millisecond, Partitions: 2,
			Workers: map[notify.Category]int{notify.Critical: 1}})
		var mu sync.Mutex
		seen := map[string]int{}
		redelivered := 0
		runQueue(t, q, func(_ context.Context, j notify.Job) error {
			time.Sleep(700 * time.Millisecond) // longer than the ack wait
			mu.Lock()
			defer mu.Unlock()
			seen[j.NotificationID]++
			if j.Redelivered {
				redelivered++
			}
			return nil
		})
		const jobs = 4 // 2.8s of work on one worker: each waits up to 4 ack waits
		for i := range jobs {
			j := notify.Job{NotificationID: fmt.Sprint(i), Channel: notify.SMS, UserID: fmt.Sprintf("u%d", i%2), Category: notify.Critical}
			if err := q.Publish(t.Context(), j); err != nil {
				t.Fatal(err)
			}
		}
		enginetest.Eventually(t, 20*time.Second, "every job handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == jobs })
		// Every delivery, first or again, advances a consumer's delivered
		// sequence: the total is the number of jobs when none was
		// delivered twice.
		l := q.lanes[streamKey{notify.SMS, notify.Critical}]
		delivered := uint64(0)
		for _, cfg := range l.consumers {
			info, err := consumerInfo(t, l.str, cfg.Durable)
			if err != nil {
				t.Fatal(err)
			}
			delivered += info.Delivered.Consumer
		}
		if delivered != jobs {
			t.Errorf("%d deliveries of %d jobs, want one each", delivered, jobs)
		}
		mu.Lock()
		defer mu.Unlock()
		for id, n := range seen {
			if n != 1 {
				t.Errorf("job %s handled %d times, want once", id, n)
			}
		}
		if redelivered > 0 {
			t.Errorf("%d jobs were delivered again while held", redelivered)
		}
	})
}

// TestConsumerDeletedRecovers: when a stream's consumer is deleted under a
// running queue, the queue makes it again and deliveries resume.
func TestConsumerDeletedRecovers(t *testing.T) {
	t.Parallel()
	eachServer(t, "pinned", "shared", func(t *testing.T, connect func(*testing.T) *Conn) {
		c := connect(t)
		q := notifyQueue(t, c, NotifyOptions{Partitions: 1})
		var mu sync.Mutex
		seen := map[string]bool{}
		runQueue(t, q, func(_ context.Context, j notify.Job) error {
			mu.Lock()
			defer mu.Unlock()
			seen[j.NotificationID] = true
			return nil
		})
		send := func(id string) {
			t.Helper()
			if err := q.Publish(t.Context(), notify.Job{NotificationID: id, Channel: notify.Email, UserID: "u", Category: notify.Orders}); err != nil {
				t.Fatal(err)
			}
			enginetest.Eventually(t, 30*time.Second, "job "+id+" handled", func() bool { mu.Lock(); defer mu.Unlock(); return seen[id] })
		}
		send("before")
		l := q.lanes[streamKey{notify.Email, notify.Orders}]
		name := l.consumers[0].Durable
		if err := l.str.DeleteConsumer(t.Context(), name); err != nil {
			t.Fatalf("delete consumer %s: %v", name, err)
		}
		send("after")
		if _, err := l.str.Consumer(t.Context(), name); err != nil {
			t.Errorf("consumer %s after recovery: %v", name, err)
		}
	})
}

func consumerInfo(t *testing.T, s jetstream.Stream, name string) (*jetstream.ConsumerInfo, error) {
	t.Helper()
	c, err := s.Consumer(t.Context(), name)
	if err != nil {
		return nil, err
	}
	return c.Info(t.Context())
}

// TestConfirmedPublishSurvivesLeaderKill: PublishConfirmed while the
// server leading the job's R3 stream is dead returns only once a new
// leader has the job (publishing again under the same Nats-Msg-Id), so an
// answer given after it never precedes the job; the job runs once.
func TestConfirmedPublishSurvivesLeaderKill(t *testing.T) {
	t.Parallel()
	cluster := enginetest.StartNATSCluster(t, 3)
	prefix := "C" + strings.ToUpper(t.Name()[4:8]) + "_"
	c := open(t, Options{URL: cluster.URL(), StreamPrefix: prefix, Replicas: 3})
	q := notifyQueue(t, c, NotifyOptions{Partitions: 1})
	name := c.Name("NOTIFY_WEBHOOK_ORDERS")
	s, err := c.JetStream().Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	leader := -1
	if cl := s.CachedInfo().Cluster; cl != nil {
		for i := range cluster.Len() {
			if cluster.Server(i).Name() == cl.Leader {
				leader = i
			}
		}
	}
	if leader < 0 {
		t.Fatalf("no leader found for %s", name)
	}
	cluster.Kill(leader)
	j := notify.Job{NotificationID: "n1", Channel: notify.Webhook, UserID: "u1", Category: notify.Orders}
	if err := q.PublishConfirmed(t.Context(), []notify.Job{j}); err != nil {
		t.Fatalf("PublishConfirmed with the stream's leader dead: %v", err)
	}
	// The stream's info may be asked of the dead server (the meta leader
	// too, perhaps) until the cluster has moved on: ask until it answers.
	var info *jetstream.StreamInfo
	enginetest.Eventually(t, 30*time.Second, "the stream's info with its leader dead", func() bool {
		info, err = s.Info(t.Context())
		return err == nil
	})
	if info.State.Msgs != 1 {
		t.Fatalf("stream after the confirmed publish: %+v; want 1 message", info.State)
	}
	cluster.Restart(leader)
	var mu sync.Mutex
	var handled []string
	runQueue(t, q, func(_ context.Context, j notify.Job) error {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, j.NotificationID)
		return nil
	})
	enginetest.Eventually(t, 30*time.Second, "the confirmed job handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(handled) > 0 })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(handled, []string{"n1"}) {
		t.Errorf("handled %v, want n1 once", handled)
	}
}
