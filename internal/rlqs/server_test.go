package rlqs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/rlqs"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

const iv = 10 * time.Second // the Envoys' reporting_interval in these tests

// TestUnevenDemand: two Envoys on one bucket get shares that follow their
// demand and never add up to more than the limit, on one node (memory) and
// on two nodes sharing Redis.
func TestUnevenDemand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		nodes func(t *testing.T, clk *ratelimittest.Clock) (a, b *node)
	}{
		{"one node", func(t *testing.T, clk *ratelimittest.Clock) (*node, *node) {
			n := serve(t, parse(t, apiYAML), clk, rlqs.Options{})
			return n, n
		}},
		{"two nodes on one redis", func(t *testing.T, clk *ratelimittest.Clock) (*node, *node) {
			ds := redisDemand(t, 2)
			return serve(t, parse(t, apiYAML), clk, rlqs.Options{Demand: ds[0], Nodes: 2}),
				serve(t, parse(t, apiYAML), clk, rlqs.Options{Demand: ds[1], Nodes: 2})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			na, nb := tc.nodes(t, clk)
			a, b := na.envoy(t), nb.envoy(t)
			const bucket = "tenant=acme"
			if got, want := summary(a.report(u(bucket, 0, 0, 0))), "tenant=acme: rptu 100/MINUTE ttl=30s"; got != want {
				t.Fatalf("first client alone = %s, want %s", got, want)
			}
			// On one node, a client whose share another's report shrinks is
			// pushed the smaller share at once; on two nodes it gets it at
			// its next report.
			pushed := func(e *envoy, want uint64, why string) {
				t.Helper()
				if na != nb {
					return
				}
				if got := share(t, e.next()); got != want {
					t.Errorf("pushed when %s = %d, want %d", why, got, want)
				}
			}
			if got := share(t, b.report(u(bucket, 0, 0, 0))); got != 50 {
				t.Errorf("second client, both idle = %d, want 50", got)
			}
			pushed(a, 50, "b joined")
			clk.Advance(iv)
			// a used 90 in 10 s (540/min); b nothing yet: a gets all but b's floor.
			if got := share(t, a.report(u(bucket, 90, 0, iv))); got != 95 {
				t.Errorf("busy a = %d, want 95", got)
			}
			pushed(b, 5, "a grew")
			// b used 5 in 10 s (30/min): it gets its 30, a the other 70.
			sb := share(t, b.report(u(bucket, 5, 0, iv)))
			if sb != 30 {
				t.Errorf("light b = %d, want 30", sb)
			}
			pushed(a, 70, "b grew")
			clk.Advance(iv)
			sa := share(t, a.report(u(bucket, 50, 200, iv)))
			if sa != 70 {
				t.Errorf("busy a, after b's report = %d, want 70", sa)
			}
			if sa+sb > 100 {
				t.Errorf("shares %d + %d pass the limit of 100", sa, sb)
			}
			a.none(100 * time.Millisecond) // a steady table pushes nothing
			b.none(0)
			if na != nb {
				return
			}
			for _, m := range []struct {
				name   string
				labels []string
				want   float64
			}{
				{"sluice_rlqs_clients", []string{"domain", "api", "rule", "api.tenant"}, 2},
				{"sluice_rlqs_buckets", []string{"domain", "api", "rule", "api.tenant"}, 1},
				{"sluice_rlqs_assigned_share", []string{"domain", "api", "rule", "api.tenant"}, 100},
				{"sluice_rlqs_reported_requests_total", []string{"domain", "api", "rule", "api.tenant", "result", "allowed"}, 145},
				{"sluice_rlqs_reported_requests_total", []string{"domain", "api", "rule", "api.tenant", "result", "denied"}, 200},
				{"sluice_rlqs_streams", nil, 2},
			} {
				if got := na.metric(t, m.name, m.labels...); got != m.want {
					t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
				}
			}
			a.cancel()
			b.cancel()
			enginetest.Eventually(t, 5*time.Second, "both streams to end", func() bool {
				return na.metric(t, "sluice_rlqs_streams") == 0
			})
			for _, name := range []string{"sluice_rlqs_clients", "sluice_rlqs_buckets", "sluice_rlqs_assigned_share"} {
				if got := na.metric(t, name, "rule", "api.tenant"); got != 0 {
					t.Errorf("%s after every stream ended = %v, want 0", name, got)
				}
			}
		})
	}
}

// TestClientLeaves: a client that stops reporting frees its share after
// two report intervals; one whose stream ends frees it at once, and the
// others on the node are pushed their larger share.
func TestClientLeaves(t *testing.T) {
	t.Parallel()
	clk := newClock()
	n := serve(t, parse(t, apiYAML), clk, rlqs.Options{})
	a, b := n.envoy(t), n.envoy(t)
	const bucket = "tenant=acme"
	a.report(u(bucket, 0, 0, 0))
	b.report(u(bucket, 0, 0, 0))
	if got := share(t, a.next()); got != 50 {
		t.Fatalf("pushed to a when b joined = %d, want 50", got)
	}
	clk.Advance(iv)
	a.report(u(bucket, 50, 0, iv))
	if got := share(t, b.next()); got != 5 {
		t.Fatalf("pushed to b when a grew = %d, want 5", got)
	}
	if got := share(t, b.report(u(bucket, 50, 0, iv))); got != 50 {
		t.Fatalf("equal demand: b = %d, want 50", got)
	}
	if got := share(t, a.next()); got != 50 {
		t.Fatalf("pushed to a when b grew = %d, want 50", got)
	}
	clk.Advance(iv) // b falls silent; its demand lasts until two intervals after its last report
	if got := share(t, a.report(u(bucket, 50, 0, iv))); got != 50 {
		t.Errorf("one interval after b's last report: a = %d, want 50", got)
	}
	clk.Advance(iv)
	if got := share(t, a.report(u(bucket, 50, 0, iv))); got != 100 {
		t.Errorf("two intervals after b's last report: a = %d, want 100", got)
	}
	// b, connected but silent, is re-evaluated: its share went to a.
	if got := summary(b.next()); got != "tenant=acme: DENY_ALL ttl=30s" {
		t.Errorf("pushed to silent b = %s, want DENY_ALL", got)
	}

	c := n.envoy(t)
	if got := share(t, c.report(u(bucket, 0, 0, 0))); got != 5 {
		t.Fatalf("c joins beside a busy a: c = %d, want 5", got)
	}
	if got := share(t, a.next()); got != 95 {
		t.Errorf("pushed to a when c joined = %d, want 95", got)
	}
	c.cancel()
	if got := share(t, a.next()); got != 100 {
		t.Errorf("pushed to a when c's stream ended = %d, want 100", got)
	}
	enginetest.Eventually(t, 5*time.Second, "c's stream to end", func() bool {
		return n.metric(t, "sluice_rlqs_streams") == 2 // a, and b still open but silent
	})
	if got := n.metric(t, "sluice_rlqs_clients", "rule", "api.tenant"); got != 2 {
		t.Errorf("sluice_rlqs_clients = %v, want 2 (a and b; c left)", got)
	}
	a.none(100 * time.Millisecond)
}

// TestClientJoins: a new client gets a share on its first report, taken
// from the busy client's, which is pushed its smaller share at once.
func TestClientJoins(t *testing.T) {
	t.Parallel()
	clk := newClock()
	n := serve(t, parse(t, apiYAML), clk, rlqs.Options{})
	a := n.envoy(t)
	const bucket = "tenant=acme"
	a.report(u(bucket, 0, 0, 0))
	clk.Advance(iv)
	if got := share(t, a.report(u(bucket, 100, 100, iv))); got != 100 {
		t.Fatalf("alone and busy: a = %d, want 100", got)
	}
	c := n.envoy(t)
	sc := share(t, c.report(u(bucket, 0, 0, 0)))
	if sc != 5 {
		t.Errorf("new client's first assignment = %d, want 5 (its floor: 10%% of 100 over 2 clients)", sc)
	}
	if sa := share(t, a.next()); sa != 95 || sa+sc > 100 {
		t.Errorf("pushed to a when c joined = %d, want 95 (c has %d)", sa, sc)
	}
	clk.Advance(iv)
	if sa := share(t, a.report(u(bucket, 100, 100, iv))); sa != 95 {
		t.Errorf("a's next report = %d, want 95", sa)
	}
}

// TestStrategies: each kind of rule is assigned its strategy.
func TestStrategies(t *testing.T) {
	t.Parallel()
	clk := newClock()
	n := serve(t, parse(t, apiYAML), clk, rlqs.Options{})
	a := n.envoy(t)
	got := summary(a.report(u("tb=x", 0, 0, 0), u("weekly=x", 0, 0, 0), u("free=x", 0, 0, 0),
		u("closed=x", 0, 0, 0), u("app=x", 0, 0, 0), u("user=bob,app=x", 0, 0, 0), u("nope=1", 0, 0, 0)))
	want := "tb=x: tb max=20 fill=10/1s ttl=30s; " +
		"weekly=x: tb max=70 fill=70/168h0m0s ttl=30s; " +
		"free=x: ALLOW_ALL ttl=30s; closed=x: DENY_ALL ttl=30s; " +
		"app=x: ALLOW_ALL ttl=30s; app=x,user=bob: rptu 6/HOUR ttl=30s; nope=1: ALLOW_ALL ttl=30s"
	if got != want {
		t.Errorf("strategies:\n got %s\nwant %s", got, want)
	}
	b := n.envoy(t)
	if got, want := summary(b.report(u("tb=x", 0, 0, 0))), "tb=x: tb max=10 fill=5/1s ttl=30s"; got != want {
		t.Errorf("token bucket halved = %s, want %s", got, want)
	}
	// The report interval is learned from time_elapsed: the TTL follows.
	// a last reported a minute ago: its share is freed.
	clk.Advance(time.Minute)
	if got, want := summary(b.report(u("free=x", 0, 0, 0), u("tb=x", 0, 0, time.Minute))), "free=x: ALLOW_ALL ttl=30s; tb=x: tb max=20 fill=10/1s ttl=3m0s"; got != want {
		t.Errorf("after a one-minute report = %s, want %s", got, want)
	}
}

// TestUnmatched: buckets no rule matches, and buckets of unknown domains,
// get the configured blanket rule.
func TestUnmatched(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		deny bool
		want string
	}{{false, "ALLOW_ALL"}, {true, "DENY_ALL"}} {
		n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{DenyUnmatched: tc.deny})
		if got := summary(n.envoy(t).report(u("nope=1", 0, 0, 0))); got != "nope=1: "+tc.want+" ttl=30s" {
			t.Errorf("deny=%v, unmatched bucket = %s, want %s", tc.deny, got, tc.want)
		}
		e := n.envoy(t)
		e.domain = "web"
		if got := summary(e.report(u("tenant=acme", 3, 1, 0))); got != "tenant=acme: "+tc.want+" ttl=30s" {
			t.Errorf("deny=%v, unknown domain = %s, want %s", tc.deny, got, tc.want)
		}
		if got := n.metric(t, "sluice_rlqs_reported_requests_total", "domain", "", "rule", "", "result", "allowed"); got != 3 {
			t.Errorf("reported allowed of unknown domains = %v, want 3", got)
		}
	}
}

// TestShadow: a shadow-mode rule assigns ALLOW_ALL and counts what the
// client's share would have denied.
func TestShadow(t *testing.T) {
	t.Parallel()
	clk := newClock()
	n := serve(t, parse(t, apiYAML), clk, rlqs.Options{})
	a := n.envoy(t)
	if got := summary(a.report(u("shadow=x", 0, 0, 0))); got != "shadow=x: ALLOW_ALL ttl=30s" {
		t.Errorf("shadow rule = %s, want ALLOW_ALL", got)
	}
	clk.Advance(iv)
	a.report(u("shadow=x", 60, 0, iv)) // a share of 10/min allows 1.67 in 10 s
	if got := n.metric(t, "sluice_rlqs_shadow_would_deny_total", "rule", "shadowed"); got != 58 {
		t.Errorf("sluice_rlqs_shadow_would_deny_total = %v, want 58", got)
	}
}

// TestReload: a bucket whose rule is removed is abandoned at once, one
// whose rule changed gets its new assignment, and a reload that changes
// nothing for a bucket pushes nothing.
func TestReload(t *testing.T) {
	t.Parallel()
	clk := newClock()
	cfg := parse(t, apiYAML)
	n := serve(t, cfg, clk, rlqs.Options{})
	a := n.envoy(t)
	a.report(u("tenant=acme", 0, 0, 0), u("tb=x", 0, 0, 0), u("free=x", 0, 0, 0))

	n.srv.SetConfig(cfg)
	a.none(200 * time.Millisecond)

	n.srv.SetConfig(parse(t, `
domain: api
descriptors:
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 20}
  - key: free
    rate_limit: {unlimited: true}
`))
	if got, want := sorted(a.next()), "tb=x: tb max=20 fill=20/1s ttl=30s; tenant=acme: abandon"; got != want {
		t.Errorf("pushed after the reload = %s, want %s", got, want)
	}
	if got := n.metric(t, "sluice_rlqs_abandoned_total", "domain", "api"); got != 1 {
		t.Errorf("sluice_rlqs_abandoned_total = %v, want 1", got)
	}
	// Envoy forgets the bucket; its next request subscribes it afresh.
	if got := summary(a.report(u("tenant=acme", 1, 0, 0))); got != "tenant=acme: ALLOW_ALL ttl=30s" {
		t.Errorf("the abandoned bucket reported again = %s, want the unmatched ALLOW_ALL", got)
	}
	if got := n.metric(t, "sluice_rlqs_buckets", "rule", "api.tenant"); got != 0 {
		t.Errorf("sluice_rlqs_buckets{rule=api.tenant} = %v, want 0", got)
	}
}

// blocks is a Blocked func over a table of (domain, key, value) blocks.
type blocks struct {
	mu    sync.Mutex
	until map[[3]string]time.Time
}

func (b *blocks) set(domain, key, value string, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.until == nil {
		b.until = map[[3]string]time.Time{}
	}
	b.until[[3]string{domain, key, value}] = until
}

func (b *blocks) blocked(domain, key, value string, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.until[[3]string{domain, key, value}]
	return u, ok && u.After(now)
}

// TestBlock: an emergency block on a bucket's entry assigns DENY_ALL, on
// the report and pushed when the block starts on a subscribed bucket; the
// assignment comes back when it ends.
func TestBlock(t *testing.T) {
	t.Parallel()
	clk := newClock()
	var bl blocks
	n := serve(t, parse(t, apiYAML), clk, rlqs.Options{Blocked: bl.blocked, BlockCheck: 10 * time.Millisecond})
	a := n.envoy(t)
	bl.set("api", "tenant", "evil", clk.Now().Add(time.Hour))
	if got := summary(a.report(u("tenant=evil", 0, 0, 0), u("tenant=acme", 0, 0, 0))); got != "tenant=evil: DENY_ALL ttl=30s; tenant=acme: rptu 100/MINUTE ttl=30s" {
		t.Errorf("report with a blocked bucket = %s", got)
	}
	bl.set("api", "tenant", "acme", clk.Now().Add(time.Hour))
	if got := summary(a.next()); got != "tenant=acme: DENY_ALL ttl=30s" {
		t.Errorf("pushed when the block started = %s, want DENY_ALL", got)
	}
	bl.set("api", "tenant", "acme", clk.Now())
	if got := summary(a.next()); got != "tenant=acme: rptu 100/MINUTE ttl=30s" {
		t.Errorf("pushed when the block ended = %s, want the share back", got)
	}
	if got := n.metric(t, "sluice_rlqs_blocked_total", "domain", "api"); got != 2 {
		t.Errorf("sluice_rlqs_blocked_total = %v, want 2", got)
	}
}

// TestClose: Close ends open streams with UNAVAILABLE, so a stopping
// node's gRPC server drains instead of waiting on them.
func TestClose(t *testing.T) {
	t.Parallel()
	n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{})
	a := n.envoy(t)
	a.report(u("tenant=acme", 0, 0, 0))
	n.srv.Close()
	select {
	case _, ok := <-a.resps:
		if ok {
			t.Fatal("a response after Close, want the stream's end")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open 5 s after Close")
	}
	if _, err := a.stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("the stream ended with %v, want UNAVAILABLE", err)
	}
}

// failing is a DemandStore whose Redis is down.
type failing struct{}

func (failing) Report(context.Context, time.Time, []rlqs.Update) ([][]rlqs.Demand, error) {
	return nil, errors.New("redis: connection refused")
}
func (failing) Leave(context.Context, string, string) error {
	return errors.New("redis: connection refused")
}

// hanging is a DemandStore whose Redis does not answer.
type hanging struct{}

func (hanging) Report(ctx context.Context, _ time.Time, _ []rlqs.Update) ([][]rlqs.Demand, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (hanging) Leave(context.Context, string, string) error { return nil }

// TestDemandStoreDown: while the shared table fails, or does not answer
// within DemandTimeout, a node divides limit / nodes between its own
// clients.
func TestDemandStoreDown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store rlqs.DemandStore
	}{{"failing", failing{}}, {"hanging", hanging{}}} {
		n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{Demand: tc.store, Nodes: 4, DemandTimeout: 50 * time.Millisecond})
		if got := share(t, n.envoy(t).report(u("tenant=acme", 0, 0, 0))); got != 25 {
			t.Errorf("%s: alone on a node of 4 = %d, want 25", tc.name, got)
		}
		if got := n.metric(t, "sluice_rlqs_demand_errors_total"); got != 1 {
			t.Errorf("%s: sluice_rlqs_demand_errors_total = %v, want 1", tc.name, got)
		}
	}
}

// TestAuthorize: a stream that Options.Authorize refuses ends with its
// status before any report is answered.
func TestAuthorize(t *testing.T) {
	t.Parallel()
	n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{Authorize: func(context.Context) error {
		return status.Error(codes.Unauthenticated, "an API key is required")
	}})
	a := n.envoy(t)
	_ = a.stream.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "api"})
	select {
	case _, ok := <-a.resps:
		if ok {
			t.Fatal("a response to a refused stream")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the refused stream is still open after 5 s")
	}
	if _, err := a.stream.Recv(); status.Code(err) != codes.Unauthenticated {
		t.Errorf("the stream ended with %v, want UNAUTHENTICATED", err)
	}
}

// TestReauthorize: an open stream is authorized again every Reauthorize;
// a key store that cannot answer keeps it, a revoked key ends it.
func TestReauthorize(t *testing.T) {
	t.Parallel()
	clk := newClock()
	var state atomic.Int32 // 0 ok, 1 the store cannot answer, 2 revoked
	var asked atomic.Int32
	n := serve(t, parse(t, apiYAML), clk, rlqs.Options{BlockCheck: 10 * time.Millisecond, Reauthorize: 10 * time.Second,
		Authorize: func(context.Context) error {
			asked.Add(1)
			switch state.Load() {
			case 1:
				return status.Error(codes.Unavailable, "key store down")
			case 2:
				return status.Error(codes.PermissionDenied, "the key was revoked")
			}
			return nil
		}})
	a := n.envoy(t)
	a.report(u("tenant=acme", 0, 0, 0))
	state.Store(1)
	clk.Advance(11 * time.Second)
	enginetest.Eventually(t, 5*time.Second, "the stream authorized again", func() bool { return asked.Load() >= 3 })
	a.report(u("tenant=acme", 1, 0, 11*time.Second)) // still open: next fails the test if it ended
	state.Store(2)
	select {
	case r, ok := <-a.resps:
		for ok { // answers sent before the refusal
			select {
			case r, ok = <-a.resps:
			case <-time.After(5 * time.Second):
				t.Fatalf("the stream of a revoked key is still open (last: %s)", summary(r))
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream of a revoked key is still open after 5 s")
	}
	if _, err := a.stream.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the stream ended with %v, want PERMISSION_DENIED", err)
	}
}

// TestBucketReportedTwice: a bucket listed twice in one report is
// answered once, its counts added, and counted once in the metrics.
func TestBucketReportedTwice(t *testing.T) {
	t.Parallel()
	n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{})
	a := n.envoy(t)
	if got := summary(a.report(u("tenant=acme", 2, 0, 0), u("tenant=acme", 3, 1, 0))); got != "tenant=acme: rptu 100/MINUTE ttl=30s" {
		t.Errorf("answer = %s, want one action", got)
	}
	if got := n.metric(t, "sluice_rlqs_reported_requests_total", "rule", "api.tenant", "result", "allowed"); got != 5 {
		t.Errorf("reported allowed = %v, want 5", got)
	}
	a.cancel()
	enginetest.Eventually(t, 5*time.Second, "the stream to end", func() bool { return n.metric(t, "sluice_rlqs_streams") == 0 })
	if got := n.metric(t, "sluice_rlqs_buckets", "rule", "api.tenant"); got != 0 {
		t.Errorf("sluice_rlqs_buckets after the stream ended = %v, want 0", got)
	}
}

// countingDemand counts the demand tables a node reads.
type countingDemand struct {
	rlqs.MemoryDemand
	reads   atomic.Int64
	updates atomic.Int64 // every bucket update, read or write-only
}

func (c *countingDemand) Report(ctx context.Context, now time.Time, updates []rlqs.Update) ([][]rlqs.Demand, error) {
	c.updates.Add(int64(len(updates)))
	for _, u := range updates {
		if !u.WriteOnly {
			c.reads.Add(1)
		}
	}
	return c.MemoryDemand.Report(ctx, now, updates)
}

// TestDivisionReused: the Envoys of one bucket on a node are answered
// from one division of its table while it is fresh and their demand
// holds: steady rounds of three reports read far fewer tables than three
// a round (sharecache_test.go pins the rules exactly).
func TestDivisionReused(t *testing.T) {
	t.Parallel()
	clk := newClock()
	demand := &countingDemand{}
	n := serve(t, parse(t, apiYAML), clk, rlqs.Options{Demand: demand})
	const bucket = "tenant=acme"
	envoys := []*envoy{n.envoy(t), n.envoy(t), n.envoy(t)}
	for _, e := range envoys {
		e.report(u(bucket, 0, 0, 0))
	}
	// A round's three reports are all handled before the clock moves on:
	// the test waits for the demand store to see them, not for their
	// answers, since a share pushed to an Envoy (when another joins) sits
	// in its stream ahead of the answer to its next report.
	round := func() {
		clk.Advance(iv)
		want := demand.updates.Load() + int64(len(envoys))
		for _, e := range envoys {
			e.post(u(bucket, 1, 0, iv))
		}
		enginetest.EventuallyNil(t, 20*time.Second, "the round's reports handled", func() error {
			return enginetest.State(demand.updates.Load() >= want, "%d updates, want %d", demand.updates.Load(), want)
		})
		for _, e := range envoys { // the answers (and any push), so no stream's buffer fills
			for drained := false; !drained; {
				select {
				case <-e.resps:
				default:
					drained = true
				}
			}
		}
	}
	round() // the demand settles
	round()
	round()
	before := demand.reads.Load()
	const rounds = 20
	for range rounds {
		round()
	}
	// Without the reuse each round reads once per Envoy: three times this.
	if reads := demand.reads.Load() - before; reads > rounds+3 {
		t.Errorf("%d steady rounds of %d reports read %d tables, want about one a round (one division for all)", rounds, len(envoys), reads)
	}
}

// TestStreamsBounded: a node holds at most MaxStreams streams; the next
// is refused with RESOURCE_EXHAUSTED (so Envoy reconnects, through the
// load balancer, elsewhere), and a stream that ends frees its place.
func TestStreamsBounded(t *testing.T) {
	t.Parallel()
	clk := newClock()
	n := serve(t, parse(t, apiYAML), clk, rlqs.Options{MaxStreams: 2})
	a, b := n.envoy(t), n.envoy(t)
	a.report(u("tenant=a", 0, 0, 0))
	b.report(u("tenant=b", 0, 0, 0))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	third, err := rlqspb.NewRateLimitQuotaServiceClient(n.conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := third.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a third stream: %v, want RESOURCE_EXHAUSTED", err)
	}
	if got := n.metric(t, "sluice_rlqs_streams_refused_total"); got != 1 {
		t.Errorf("sluice_rlqs_streams_refused_total = %v, want 1", got)
	}
	a.cancel()
	enginetest.Eventually(t, 5*time.Second, "a's place freed", func() bool { return n.metric(t, "sluice_rlqs_streams") == 1 })
	c := n.envoy(t)
	if got := summary(c.report(u("tenant=c", 0, 0, 0))); !strings.HasPrefix(got, "tenant=c: ") {
		t.Errorf("a stream after one ended = %s, want an assignment", got)
	}
}
