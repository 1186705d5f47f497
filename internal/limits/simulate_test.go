package limits_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// TestSimulateAgreesWithLive replays one sequence of requests through
// Simulate and through a live Service whose clock starts at 0, for every
// algorithm and mode, and wants identical decisions.
func TestSimulateAgreesWithLive(t *testing.T) {
	t.Parallel()
	var policies []limits.NamedPolicy
	for _, alg := range ratelimit.Algorithms() {
		for _, mode := range []limits.Mode{limits.Hard, limits.Soft, limits.Shadow} {
			p := limits.NamedPolicy{Name: fmt.Sprintf("%s_%s", alg, mode), Algorithm: alg, Limit: 5,
				Period: limits.Period(10 * time.Second), Mode: mode}
			if alg == ratelimit.TokenBucket || alg == ratelimit.GCRA {
				p.Burst = 3
			}
			if mode == limits.Soft {
				p.BurstOver = 2
			}
			policies = append(policies, p)
		}
	}
	rng := rand.New(rand.NewPCG(4, 2))
	var reqs []ratelimit.SimRequest
	at := time.Duration(0)
	for range 300 {
		at += time.Duration(rng.IntN(1500)) * time.Millisecond
		reqs = append(reqs, ratelimit.SimRequest{At: at, Key: fmt.Sprintf("u%d", rng.IntN(3)), Cost: 1 + int64(rng.IntN(3))})
	}
	for _, p := range policies {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			sim, err := limits.Simulate(p, reqs)
			if err != nil {
				t.Fatalf("Simulate: %v", err)
			}
			clock := ratelimittest.NewClock(time.Unix(0, 0))
			b := setup(t, setupOpts{counters: func(*ratelimittest.Clock) ratelimit.Store {
				return ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now})
			}})
			b.put(t, p)
			for i, r := range reqs {
				clock.Set(time.Unix(0, 0).Add(r.At))
				ok, rs, err := b.svc.Check(t.Context(), []limits.CheckRequest{{Policy: p.Name, Key: r.Key, Cost: r.Cost}})
				if err != nil {
					t.Fatalf("request %d: Check: %v", i, err)
				}
				if rs[0].Verdict != sim[i] || ok != sim[i].Allowed {
					t.Fatalf("request %d (%+v): live %+v, simulated %+v", i, r, rs[0].Verdict, sim[i])
				}
			}
		})
	}
}

func TestSimulateRejectsBadRequests(t *testing.T) {
	t.Parallel()
	p := perMinute("p", ratelimit.TokenBucket, 5)
	tests := []struct {
		name  string
		req   ratelimit.SimRequest
		field string
	}{
		{"no key", ratelimit.SimRequest{Cost: 1}, "requests[0].key"},
		{"zero cost", ratelimit.SimRequest{Key: "k"}, "requests[0].cost"},
		{"cost above the burst", ratelimit.SimRequest{Key: "k", Cost: 6}, "requests[0].cost"},
		{"negative time", ratelimit.SimRequest{Key: "k", Cost: 1, At: -time.Millisecond}, "requests[0].at_ms"},
	}
	for _, tt := range tests {
		_, err := limits.Simulate(p, []ratelimit.SimRequest{tt.req})
		ae, ok := err.(*apperr.Error)
		if !ok || ae.Code != apperr.Invalid || len(ae.Fields) != 1 || ae.Fields[0].Field != tt.field {
			t.Errorf("%s: Simulate = %v, want Invalid naming %s", tt.name, err, tt.field)
		}
	}
}

func TestPolicyValidation(t *testing.T) {
	t.Parallel()
	ok := perMinute("ok", ratelimit.TokenBucket, 60)
	tests := []struct {
		name   string
		edit   func(p *limits.NamedPolicy)
		fields []string
	}{
		{"valid", func(*limits.NamedPolicy) {}, nil},
		{"everything wrong", func(p *limits.NamedPolicy) {
			*p = limits.NamedPolicy{Name: "bad name", Algorithm: "leaky", Limit: 0, Period: 0, Burst: -1, Mode: "loud", OnStoreFailure: "maybe"}
		}, []string{"name", "algorithm", "limit", "period", "burst", "mode", "on_store_failure"}},
		{"burst on a window", func(p *limits.NamedPolicy) { p.Algorithm, p.Burst = ratelimit.FixedWindow, 10 }, []string{"burst"}},
		{"soft without burst_over", func(p *limits.NamedPolicy) { p.Mode = limits.Soft }, []string{"burst_over"}},
		{"burst_over on hard", func(p *limits.NamedPolicy) { p.BurstOver = 3 }, []string{"burst_over"}},
		{"sub-millisecond period", func(p *limits.NamedPolicy) { p.Period = limits.Period(1500 * time.Microsecond) }, []string{"period"}},
		{"sync local", func(p *limits.NamedPolicy) {
			p.Sync, p.SyncInterval = limits.SyncLocal, limits.Period(50*time.Millisecond)
		}, nil},
		{"sync local, default interval", func(p *limits.NamedPolicy) { p.Sync = limits.SyncLocal }, nil},
		{"sync unknown", func(p *limits.NamedPolicy) { p.Sync = "eventual" }, []string{"sync"}},
		{"sync_interval without sync local", func(p *limits.NamedPolicy) { p.SyncInterval = limits.Period(time.Second) }, []string{"sync_interval"}},
		{"sync_interval too long", func(p *limits.NamedPolicy) { p.Sync, p.SyncInterval = limits.SyncLocal, limits.Period(2*time.Minute) }, []string{"sync_interval"}},
		{"sync local on concurrency", func(p *limits.NamedPolicy) { p.Algorithm, p.Sync = ratelimit.Concurrency, limits.SyncLocal }, []string{"sync"}},
		{"huge burst over a long period", func(p *limits.NamedPolicy) {
			p.Limit, p.Burst, p.Period = 7, 1<<40, limits.Period(3000*24*time.Hour)
		}, []string{"burst"}},
	}
	for _, tt := range tests {
		p := ok
		tt.edit(&p)
		var got []string
		for _, f := range p.FieldErrors("") {
			got = append(got, f.Field)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.fields) {
			t.Errorf("%s: FieldErrors fields = %q, want %q", tt.name, got, tt.fields)
		}
	}
}

func TestPeriod(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		out  string
	}{
		{"1m", time.Minute, "1m"},
		{"90s", 90 * time.Second, "1m30s"},
		{"1h", time.Hour, "1h"},
		{"2d", 48 * time.Hour, "2d"},
		{"24h", 24 * time.Hour, "1d"},
		{"250ms", 250 * time.Millisecond, "250ms"},
		{"1h30m", 90 * time.Minute, "1h30m"},
	}
	for _, tt := range tests {
		p, err := limits.ParsePeriod(tt.in)
		if err != nil || time.Duration(p) != tt.want || p.String() != tt.out {
			t.Errorf("ParsePeriod(%q) = %v (%s), %v; want %v (%s)", tt.in, time.Duration(p), p, err, tt.want, tt.out)
		}
	}
	for _, bad := range []string{"", "1x", "0d", "-1d", "1.5d"} {
		if _, err := limits.ParsePeriod(bad); err == nil {
			t.Errorf("ParsePeriod(%q) succeeded, want an error", bad)
		}
	}
}
