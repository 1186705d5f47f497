package topology

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"
)

// Timings of the faults.
const (
	killHold    = 3 * time.Second
	stopHold    = 2*ackWait + time.Second/2 // SIGSTOP for longer than the ack wait, twice over
	natsHold    = 4 * time.Second
	toxicHold   = 5 * time.Second
	pgHold      = 2 * time.Second
	redisLag    = 500 * time.Millisecond
	settle      = 6 * time.Second  // after a round's last heal, before the next round
	jitter      = 2 * time.Second  // a fault starts at a random moment this long into its round
	failoverMax = 60 * time.Second // a Redis replica promoted, a killed node back in the cluster
)

// fault is one kind of fault. inject starts it and returns its recorded
// name (naming what it struck); heal ends it, and returns once the
// thing struck is back (a node answers, a server has rejoined). Both run
// on the test's goroutine and fail the test when they cannot do their
// part.
type fault struct {
	kind     string // for choosing compatible overlaps
	target   string // the Sluice node struck, "" if none
	restarts int    // Sluice node processes it starts afresh (Fault.Restarts)
	hold     time.Duration
	inject   func(t *testing.T) string
	heal     func(t *testing.T)
}

// faults returns every fault the issue lists, once each, with its
// target chosen by rng.
func (tp *topology) faults(rng *rand.Rand) []fault {
	node := func() int { return rng.IntN(len(tp.nodes)) }
	ki, si, ni := node(), node(), rng.IntN(tp.nats.Len())
	var killedRedis int
	// Each toxic fault remembers its own proxy: paired, they may differ.
	var lagProxy, holeProxy *toxiproxy.Proxy
	return []fault{
		{kind: "kill-node", target: tp.nodes[ki].name, restarts: 1, hold: killHold,
			inject: func(*testing.T) string { tp.nodes[ki].kill(); return "kill -9 sluice " + tp.nodes[ki].name },
			heal: func(t *testing.T) {
				if err := tp.nodes[ki].restart(); err != nil {
					t.Fatal(err)
				}
			}},
		{kind: "stop-node", target: tp.nodes[si].name, hold: stopHold,
			inject: func(t *testing.T) string {
				if err := tp.nodes[si].signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("SIGSTOP sluice %s %s", tp.nodes[si].name, stopHold)
			},
			heal: func(t *testing.T) {
				if err := tp.nodes[si].signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			}},
		{kind: "kill-redis", hold: time.Second,
			inject: func(t *testing.T) string {
				killedRedis = tp.redisMaster(t, rng)
				tp.redis.Nodes[killedRedis].Kill()
				return fmt.Sprintf("kill -9 redis master %d", killedRedis)
			},
			heal: func(t *testing.T) {
				// Wait for the replica's promotion (three masters again
				// without the killed one), then bring the killed node back
				// (it rejoins as a replica) and wait until it has.
				tp.waitPromoted(t, killedRedis)
				tp.redis.Nodes[killedRedis].Start()
				tp.waitRedisOK(t, killedRedis)
			}},
		{kind: "kill-nats", hold: natsHold,
			inject: func(*testing.T) string { tp.nats.Kill(ni); return fmt.Sprintf("kill nats server %d", ni) },
			heal:   func(*testing.T) { tp.nats.Restart(ni) }},
		{kind: "redis-latency", hold: toxicHold,
			inject: func(t *testing.T) string {
				i := tp.redisMaster(t, rng)
				lagProxy = tp.redisProxies[i]
				addToxic(t, lagProxy, fmt.Sprintf(`{"name":"lag","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, redisLag.Milliseconds()))
				return fmt.Sprintf("redis latency %s redis master %d", redisLag, i)
			},
			heal: func(t *testing.T) { removeToxics(t, lagProxy, false, "lag") }},
		{kind: "redis-blackhole", hold: toxicHold,
			inject: func(t *testing.T) string {
				i := tp.redisMaster(t, rng)
				holeProxy = tp.redisProxies[i]
				addToxic(t, holeProxy, `{"name":"hole_up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
				addToxic(t, holeProxy, `{"name":"hole_down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
				return fmt.Sprintf("redis black hole redis master %d", i)
			},
			heal: func(t *testing.T) { removeToxics(t, holeProxy, true, "hole_up", "hole_down") }},
		{kind: "restart-postgres", hold: pgHold,
			inject: func(*testing.T) string { tp.pg.Stop(); return "restart postgres" },
			heal:   func(*testing.T) { tp.pg.Start() }},
	}
}

// compatible reports whether a and b may be in force together: of
// different kinds, not on the same Sluice node, and not a Sluice node
// restarting while PostgreSQL is down (a node needs its database at
// start; that is a deployment's order, not a fault of its own).
func compatible(a, b fault) bool {
	if a.kind == b.kind || (a.target != "" && a.target == b.target) {
		return false
	}
	kinds := []string{a.kind, b.kind}
	return !(slices.Contains(kinds, "kill-node") && slices.Contains(kinds, "restart-postgres"))
}

// round is faults started together: each at its offset from the round's
// start, healed hold after its injection.
type round []struct {
	f      fault
	offset time.Duration
}

// runRound injects and heals the faults of r in time order on the test's
// goroutine, records each as a Fault, and returns after the last heal
// and the settling time.
func (tp *topology) runRound(t *testing.T, h *History, r round) {
	t.Helper()
	type event struct {
		at   time.Time
		i    int
		heal bool
	}
	start := time.Now()
	var events []event
	for i, x := range r {
		events = append(events, event{at: start.Add(x.offset), i: i})
	}
	names := make([]string, len(r))
	began := make([]time.Time, len(r))
	for len(events) > 0 {
		slices.SortStableFunc(events, func(a, b event) int { return a.at.Compare(b.at) })
		e := events[0]
		events = events[1:]
		if d := time.Until(e.at); d > 0 {
			time.Sleep(d) // the fault schedule: wait for the event's moment
		}
		f := r[e.i].f
		if !e.heal {
			began[e.i] = time.Now()
			names[e.i] = f.inject(t)
			t.Logf("%s: fault %q", began[e.i].Format("15:04:05.000"), names[e.i])
			events = append(events, event{at: time.Now().Add(f.hold), i: e.i, heal: true})
			continue
		}
		f.heal(t)
		end := time.Now()
		h.AddFault(Fault{Name: names[e.i], Start: began[e.i], End: end, Restarts: f.restarts})
		t.Logf("%s: healed %q after %s", end.Format("15:04:05.000"), names[e.i], end.Sub(began[e.i]).Round(time.Millisecond))
	}
	time.Sleep(settle) // the fault schedule: a quiet gap between rounds
}

// schedule is the run's rounds: every fault once alone, in an order rng
// picks, then overlapping pairs, until at least dur has passed since
// start (at least one pair).
func (tp *topology) schedule(t *testing.T, h *History, rng *rand.Rand, dur time.Duration) {
	t.Helper()
	start := time.Now()
	fs := tp.faults(rng)
	for _, i := range rng.Perm(len(fs)) {
		tp.runRound(t, h, round{{fs[i], time.Duration(rng.Int64N(int64(jitter)))}})
	}
	for pairs := 0; pairs < 1000 && (pairs == 0 || time.Since(start) < dur); pairs++ {
		fs := tp.faults(rng)
		a := fs[rng.IntN(len(fs))]
		var others []fault
		for _, f := range fs {
			if compatible(a, f) {
				others = append(others, f)
			}
		}
		b := others[rng.IntN(len(others))]
		first := time.Duration(rng.Int64N(int64(jitter)))
		second := first + time.Duration(rng.Int64N(int64(a.hold)))
		tp.runRound(t, h, round{{a, first}, {b, second}})
	}
}

// redisMaster returns the index of a Redis node that is a master now,
// chosen by rng among the masters.
func (tp *topology) redisMaster(t *testing.T, rng *rand.Rand) int {
	t.Helper()
	var masters []int
	for i, n := range tp.redis.Nodes {
		if role, err := redisCmd(n.Addr(), "ROLE"); err == nil && strings.HasPrefix(role, "[master") {
			masters = append(masters, i)
		}
	}
	if len(masters) == 0 {
		t.Fatalf("no Redis master answers in %s", tp.redis)
	}
	slices.Sort(masters)
	return masters[rng.IntN(len(masters))]
}

// waitPromoted polls until three Redis nodes other than killed answer as
// masters and every one of them reports cluster_state:ok.
func (tp *topology) waitPromoted(t *testing.T, killed int) {
	t.Helper()
	deadline := time.Now().Add(failoverMax)
	for {
		var masters []int
		for i, n := range tp.redis.Nodes {
			if role, err := redisCmd(n.Addr(), "ROLE"); i != killed && err == nil && strings.HasPrefix(role, "[master") {
				masters = append(masters, i)
			}
		}
		if len(masters) == 3 {
			for _, i := range masters {
				tp.waitRedisOK(t, i)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis: no replica of killed node %d promoted within %s (masters %v)", killed, failoverMax, masters)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
}

// waitRedisOK polls Redis node i until it reports cluster_state:ok.
func (tp *topology) waitRedisOK(t *testing.T, i int) {
	t.Helper()
	deadline := time.Now().Add(failoverMax)
	for {
		info, err := redisCmd(tp.redis.Nodes[i].Addr(), "CLUSTER", "INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis node %d: no cluster_state:ok within %s: %v %s", i, failoverMax, err, info)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
}

// redisCmd sends one command to the Redis node at addr, directly (not
// through its proxy), and returns the answer as text.
func redisCmd(addr string, args ...any) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := c.Do(ctx, args...).Result()
	return fmt.Sprint(v), err
}

func addToxic(t *testing.T, p *toxiproxy.Proxy, spec string) {
	t.Helper()
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
		t.Fatalf("toxiproxy %s: add %s: %v", p.Name, spec, err)
	}
}

// removeToxics removes the named toxics from p and, if cut, closes every
// connection through it: a timeout toxic drops the bytes it held, so the
// connections it black-holed cannot carry on (a real black hole would
// have kept them, retransmitted); clients reconnect.
func removeToxics(t *testing.T, p *toxiproxy.Proxy, cut bool, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := p.Toxics.RemoveToxic(context.Background(), n); err != nil {
			t.Fatalf("toxiproxy %s: remove %s: %v", p.Name, n, err)
		}
	}
	if cut {
		p.Stop()
		if err := p.Start(); err != nil {
			t.Fatalf("toxiproxy %s: restart on %s: %v", p.Name, p.Listen, err)
		}
	}
}
