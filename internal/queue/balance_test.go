package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
)

// TestOwnerShares: for any number of nodes, every partition of every
// stream has exactly one owner, each node holds floor(partitions/nodes)
// or one more of each stream, and across the streams no node gets every
// extra one; a node alone holds everything.
func TestOwnerShares(t *testing.T) {
	t.Parallel()
	lanes := len(notify.Channels) * len(notify.Categories)
	for _, tt := range []struct {
		name              string
		nodes, partitions int
	}{
		{"alone", 1, 8}, {"two", 2, 8}, {"three", 3, 8}, {"four", 4, 8},
		{"more nodes than partitions", 5, 4}, {"one partition", 3, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			view := make([]string, tt.nodes)
			for i := range view {
				view[i] = fmt.Sprintf("n%d", i)
			}
			lo, hi := tt.partitions/tt.nodes, (tt.partitions+tt.nodes-1)/tt.nodes
			total := make([]int, tt.nodes)
			for lane := range lanes {
				held := make([]int, tt.nodes)
				for p := range tt.partitions {
					held[owner(view, lane, p)]++
				}
				for n, h := range held {
					if h < lo || h > hi {
						t.Errorf("lane %d: node %d holds %d of %d partitions, want %d to %d", lane, n, h, tt.partitions, lo, hi)
					}
					total[n] += h
				}
			}
			if spread := slices.Max(total) - slices.Min(total); spread > lanes/tt.nodes+1 {
				t.Errorf("partitions held over all %d streams by node: %v; the extra ones are not spread", lanes, total)
			}
		})
	}
}

// TestMembers: a node knows itself, learns peers when it hears them,
// forgets one at its goodbye or presenceTimeout after it was last heard,
// and signals each change of the view.
func TestMembers(t *testing.T) {
	t.Parallel()
	m := newMembers("b")
	t0 := time.Now()
	view, changed := m.current()
	if !slices.Equal(view, []string{"b"}) {
		t.Fatalf("view at start = %v, want only itself", view)
	}
	m.heard("c", t0)
	m.heard("a", t0)
	select {
	case <-changed:
	default:
		t.Error("no change signalled when peers joined")
	}
	if view, changed = m.current(); !slices.Equal(view, []string{"a", "b", "c"}) {
		t.Fatalf("view = %v, want a b c", view)
	}
	m.heard("a", t0.Add(presenceTimeout)) // a stays, c falls silent
	m.expire(t0.Add(presenceTimeout))
	select {
	case <-changed:
		t.Error("a change signalled before any peer timed out")
	default:
	}
	m.expire(t0.Add(presenceTimeout + time.Millisecond))
	if view, _ = m.current(); !slices.Equal(view, []string{"a", "b"}) {
		t.Errorf("view once c timed out = %v, want a b", view)
	}
	m.left("a")
	if view, _ = m.current(); !slices.Equal(view, []string{"b"}) {
		t.Errorf("view after a's goodbye = %v, want only itself", view)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if m.wait(ctx, func(v []string) bool { return len(v) == 2 }) {
		t.Error("wait reported a view of two nodes after its context ended")
	}
}

// A node frozen past presenceTimeout (SIGSTOP, or starved of CPU) must
// not wake up presuming every peer dead: their announcements of that
// time are still unread, and it would take (and unpin) their partitions.
func TestMembersPauseDoesNotCountAgainstPeers(t *testing.T) {
	t.Parallel()
	m := newMembers("b")
	t0 := time.Now()
	m.heard("a", t0)
	m.heard("c", t0)
	m.expire(t0.Add(presenceInterval))
	wakeUp := m.woken()
	m.expire(t0.Add(2 * presenceInterval)) // on time
	select {
	case <-wakeUp:
		t.Fatal("a check on time signalled a wake-up")
	default:
	}
	woke := t0.Add(2*presenceInterval + 4500*time.Millisecond) // frozen 4.5 s
	m.expire(woke)
	if view, _ := m.current(); !slices.Equal(view, []string{"a", "b", "c"}) {
		t.Fatalf("view after waking from a pause = %v, want a b c", view)
	}
	select {
	case <-wakeUp:
	default:
		t.Error("no wake-up signalled after a pause: the node's pulls would wait for missed heartbeats")
	}
	m.heard("a", woke)
	for at := woke; at.Before(woke.Add(presenceTimeout + presenceInterval)); at = at.Add(presenceInterval) {
		m.expire(at) // on time again: c, silent, times out
	}
	if view, _ := m.current(); !slices.Equal(view, []string{"a", "b"}) {
		t.Errorf("view once c stayed silent after the pause = %v, want a b", view)
	}
	if !m.presumedDead("c") {
		t.Error("c, silent after the pause, is not presumed dead")
	}
}

// tally counts, for each node, the jobs handled from each partition.
type tally struct {
	mu     sync.Mutex
	byNode map[string]map[string]int // node -> subject -> jobs
}

// wrap records each job handle takes on node, under its subject in q.
func (tl *tally) wrap(q *NotifyQueue, node string, handle Handler) Handler {
	return func(ctx context.Context, j notify.Job) error {
		err := handle(ctx, j)
		tl.mu.Lock()
		defer tl.mu.Unlock()
		if tl.byNode[node] == nil {
			tl.byNode[node] = map[string]int{}
		}
		tl.byNode[node][q.Subject(j)]++
		return err
	}
}

// take returns the counts so far and starts afresh.
func (tl *tally) take() map[string]map[string]int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	got := tl.byNode
	tl.byNode = map[string]map[string]int{}
	return got
}

// shared reports whether qs hold the partitions of k between them as
// owner assigns them: each partition held by exactly one queue, each
// queue holding between floor and ceil(partitions/len(qs)).
func shared(qs []*NotifyQueue, k streamKey) (bool, string) {
	partitions := len(qs[0].lanes[k].consumers)
	lo, hi := partitions/len(qs), (partitions+len(qs)-1)/len(qs)
	holders := make([]int, partitions)
	var held []string
	for _, q := range qs {
		n := 0
		for p := range q.lanes[k].holds {
			if q.lanes[k].holds[p].Load() {
				holders[p]++
				n++
			}
		}
		held = append(held, fmt.Sprint(n))
		if n < lo || n > hi {
			return false, fmt.Sprintf("partitions held by each queue: %v", held)
		}
	}
	for p, n := range holders {
		if n != 1 {
			return false, fmt.Sprintf("partition %d held by %d queues", p, n)
		}
	}
	return true, ""
}

// waitShared polls shared until it holds or within passes.
func waitShared(t *testing.T, within time.Duration, qs []*NotifyQueue, k streamKey) {
	t.Helper()
	enginetest.EventuallyNil(t, within, fmt.Sprintf("%d queues sharing the partitions", len(qs)), func() error {
		ok, why := shared(qs, k)
		return enginetest.State(ok, "%s", why)
	})
}

// TestPartitionsSpread: queues consuming one stream of 8 partitions share
// them out: two queues hold 4 each and each handles the jobs of its own;
// a third queue that joins takes a share (while jobs keep coming), and a
// queue that stops hands its share to the others at once. Through every
// change each user's jobs run one at a time, in publish order, each once.
func TestPartitionsSpread(t *testing.T) {
	t.Parallel()
	srv := enginetest.StartNATSCluster(t, 1)
	prefix := "B" + strings.ToUpper(t.Name()[4:8]) + "_"
	o := NotifyOptions{Partitions: 8, Workers: map[notify.Category]int{notify.Orders: 4}}
	k := streamKey{notify.Webhook, notify.Orders}
	qs := map[string]*NotifyQueue{}
	for _, node := range []string{"a", "b", "c"} {
		qs[node] = notifyQueue(t, open(t, Options{URL: srv.URL(), StreamPrefix: prefix}), o)
	}
	log := newOrderLog()
	tl := &tally{byNode: map[string]map[string]int{}}
	run := func(node string) func() {
		return runQueue(t, qs[node], tl.wrap(qs[node], node, log.handler(node, time.Millisecond)))
	}

	const users = 32 // every partition gets some
	want := map[string][]string{}
	sent := 0
	publish := func(round int) {
		t.Helper()
		for u := range users {
			user := fmt.Sprintf("u%02d", u)
			j := notify.Job{NotificationID: fmt.Sprintf("n%03d-%s", round, user), Channel: k.ch, UserID: user, Category: k.cat}
			want[user] = append(want[user], j.NotificationID)
			if err := qs["a"].Publish(t.Context(), j); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		if err := qs["a"].Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	rounds := 0
	publishRounds := func(n int) {
		t.Helper()
		for range n {
			publish(rounds)
			rounds++
		}
	}
	handled := func(within time.Duration, what string) {
		t.Helper()
		enginetest.Eventually(t, within, what, func() bool { return log.count() == sent })
	}
	// checkShares: each running node handled the jobs of as many
	// partitions as it holds, and no partition's jobs went to two nodes.
	checkShares := func(phase string, nodes ...string) {
		t.Helper()
		got := tl.take()
		seen := map[string]string{}
		for _, node := range nodes {
			if n := len(got[node]); n < 8/len(nodes) || n > (8+len(nodes)-1)/len(nodes) {
				t.Errorf("%s: node %s handled jobs of %d partitions: %v", phase, node, n, got)
			}
			for subject := range got[node] {
				if other, ok := seen[subject]; ok {
					t.Errorf("%s: jobs of %s handled on %s and %s", phase, subject, other, node)
				}
				seen[subject] = node
			}
		}
	}

	run("a")
	stopB := run("b")
	two := []*NotifyQueue{qs["a"], qs["b"]}
	waitShared(t, 10*time.Second, two, k)
	publishRounds(4)
	handled(30*time.Second, "jobs handled by two nodes")
	checkShares("two nodes", "a", "b")

	// c joins while jobs keep coming.
	publishRounds(2)
	run("c")
	publishRounds(2)
	three := []*NotifyQueue{qs["a"], qs["b"], qs["c"]}
	waitShared(t, 10*time.Second, three, k)
	handled(30*time.Second, "jobs handled while c joined")
	tl.take()
	publishRounds(4)
	handled(30*time.Second, "jobs handled by three nodes")
	checkShares("three nodes", "a", "b", "c")

	// b stops while jobs keep coming; a and c take its share at once.
	publishRounds(2)
	stopped := time.Now()
	stopB()
	publishRounds(2)
	waitShared(t, pinnedTTL/2, []*NotifyQueue{qs["a"], qs["c"]}, k)
	handled(pinnedTTL/2, "jobs handled after b stopped")
	t.Logf("b's share handed over and its jobs handled %s after it stopped; jobs by node: %v",
		time.Since(stopped).Round(time.Millisecond), log.byNode)
	tl.take()
	publishRounds(4)
	handled(30*time.Second, "jobs handled by a and c")
	checkShares("after b stopped", "a", "c")

	log.check(t, want)
}

// TestDeadNodeShareTakenOver: when a node dies (its connections drop
// without a goodbye), the other takes its partitions over once it has not
// heard from it for presenceTimeout, and unpins the dead node's pins at
// once rather than after pinnedTTL: no job is lost, none waits out the
// pin.
func TestDeadNodeShareTakenOver(t *testing.T) {
	t.Parallel()
	srv := enginetest.StartNATSCluster(t, 1)
	prefix := "D" + strings.ToUpper(t.Name()[4:8]) + "_"
	o := NotifyOptions{Partitions: 4, Workers: map[notify.Category]int{notify.Critical: 4}}
	k := streamKey{notify.Webhook, notify.Critical}
	qa := notifyQueue(t, open(t, Options{URL: srv.URL(), StreamPrefix: prefix}), o)
	// b is closed by hand: its streams are a's, and deleted with them.
	cb, err := Open(t.Context(), Options{URL: srv.URL(), StreamPrefix: prefix, Logger: testLogger(nil, t)})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := cb.NotifyQueue(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = qb.Close(); _ = cb.Close() })
	var mu sync.Mutex
	byNode := map[string]map[string]int{}
	handler := func(node string) Handler {
		return func(_ context.Context, j notify.Job) error {
			mu.Lock()
			defer mu.Unlock()
			if byNode[node] == nil {
				byNode[node] = map[string]int{}
			}
			byNode[node][j.NotificationID]++
			return nil
		}
	}
	runQueue(t, qa, handler("a"))
	runQueue(t, qb, handler("b"))
	waitShared(t, 10*time.Second, []*NotifyQueue{qa, qb}, k)
	send := func(round string) []string {
		t.Helper()
		var ids []string
		for u := range 16 {
			j := notify.Job{NotificationID: fmt.Sprintf("%s-u%02d", round, u), Channel: k.ch, UserID: fmt.Sprintf("u%02d", u), Category: k.cat}
			if err := qa.Publish(t.Context(), j); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.NotificationID)
		}
		if err := qa.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	handledBy := func(ids []string, nodes ...string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			n := 0
			for _, node := range nodes {
				n += byNode[node][id]
			}
			if n == 0 {
				return false
			}
		}
		return true
	}
	before := send("before")
	enginetest.Eventually(t, 10*time.Second, "jobs handled by a and b", func() bool { return handledBy(before, "a", "b") })
	mu.Lock()
	if len(byNode["b"]) == 0 {
		t.Error("b handled no job while both nodes ran")
	}
	mu.Unlock()

	// b dies: its connections drop, it sends no goodbye.
	for _, l := range qb.lanes {
		l.pub.Close()
		l.sub.Close()
	}
	cb.NATS().Close()
	died := time.Now()
	after := send("after")
	waitShared(t, 2*presenceTimeout, []*NotifyQueue{qa}, k)
	enginetest.Eventually(t, 2*pinnedTTL+10*time.Second, "every job handled by a after b died", func() bool { return handledBy(after, "a") })
	took := time.Since(died)
	t.Logf("b's jobs handled by a %s after b died", took.Round(time.Millisecond))
	if took >= pinnedTTL {
		t.Errorf("b's partitions served to a %s after b died: the dead node's pins waited out pinnedTTL (%s)", took, pinnedTTL)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range append(before, after...) {
		if n := byNode["a"][id] + byNode["b"][id]; n != 1 {
			t.Errorf("job %s handled %d times, want once", id, n)
		}
	}
}
