package ratelimit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		p       ratelimit.Policy
		wantErr string // "" for valid
	}{
		{"free tier", ratelimit.Policy{Name: "free", Algorithm: ratelimit.TokenBucket, Limit: 60, Period: time.Minute, Burst: 60}, ""},
		{"burst defaults to limit", ratelimit.Policy{Name: "b", Algorithm: ratelimit.GCRA, Limit: 10, Period: time.Second}, ""},
		{"every algorithm name", ratelimit.Policy{Name: "c", Algorithm: "concurrency", Limit: 1, Period: time.Second}, ""},
		{"a month of requests per month", ratelimit.Policy{Name: "m", Algorithm: ratelimit.TokenBucket, Limit: 1_000_000, Period: 30 * 24 * time.Hour}, ""},
		{"no algorithm", ratelimit.Policy{Name: "x", Limit: 1, Period: time.Second}, "algorithm is required"},
		{"unknown algorithm", ratelimit.Policy{Name: "x", Algorithm: "leaky_bucket", Limit: 1, Period: time.Second}, `unknown algorithm "leaky_bucket"`},
		{"zero limit", ratelimit.Policy{Name: "x", Algorithm: ratelimit.FixedWindow, Period: time.Second}, "limit must be at least 1"},
		{"zero period", ratelimit.Policy{Name: "x", Algorithm: ratelimit.FixedWindow, Limit: 1}, "period must be"},
		{"sub-microsecond period", ratelimit.Policy{Name: "x", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: 1500 * time.Nanosecond}, "period must be"},
		{"negative burst", ratelimit.Policy{Name: "x", Algorithm: ratelimit.TokenBucket, Limit: 1, Period: time.Second, Burst: -1}, "burst must not be negative"},
		{"braces in name", ratelimit.Policy{Name: "{x}", Algorithm: ratelimit.TokenBucket, Limit: 1, Period: time.Second}, "braces"},
		{"bucket too fine", ratelimit.Policy{Name: "x", Algorithm: ratelimit.TokenBucket, Limit: 7, Period: 365 * 24 * time.Hour, Burst: 1 << 40}, "2^53"},
		{"every problem at once", ratelimit.Policy{}, "algorithm is required; limit must be at least 1; period must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.p.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ratelimit.ErrInvalidPolicy) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate() = %v, want ErrInvalidPolicy containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCombine(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name string
		in   []ratelimit.Decision
		want ratelimit.Decision
	}{
		{"none", nil, ratelimit.Decision{}},
		{"most constrained wins", []ratelimit.Decision{
			{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 100 * ms},
			{Allowed: true, Limit: 1000, Remaining: 3, ResetAfter: 9000 * ms},
		}, ratelimit.Decision{Allowed: true, Limit: 1000, Remaining: 3, ResetAfter: 9000 * ms}},
		{"one refusal refuses", []ratelimit.Decision{
			{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 100 * ms},
			{Allowed: false, Limit: 5, Remaining: 0, RetryAfter: 700 * ms, ResetAfter: 800 * ms},
		}, ratelimit.Decision{Allowed: false, Limit: 5, Remaining: 0, RetryAfter: 700 * ms, ResetAfter: 800 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ratelimit.Combine(tt.in); got != tt.want {
				t.Errorf("Combine(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSimulate(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	t.Run("fixed windows start at multiples of the period from 0", func(t *testing.T) {
		t.Parallel()
		p := ratelimit.Policy{Name: "s", Algorithm: ratelimit.FixedWindow, Limit: 5, Period: 10 * time.Second}
		var reqs []ratelimit.SimRequest
		for _, at := range []time.Duration{9900 * ms, 10100 * ms} {
			for range 5 {
				reqs = append(reqs, ratelimit.SimRequest{At: at, Key: "u1", Cost: 1})
			}
		}
		ds, err := ratelimit.Simulate(p, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range ds {
			if !d.Allowed {
				t.Errorf("decision %d = %+v, want allowed", i, d)
			}
		}
		if ds[4].ResetAfter != 100*ms || ds[9].ResetAfter != 9900*ms {
			t.Errorf("ResetAfter = %v and %v, want 100ms and 9.9s", ds[4].ResetAfter, ds[9].ResetAfter)
		}
	})
	t.Run("out of order requests are applied in time order", func(t *testing.T) {
		t.Parallel()
		p := ratelimit.Policy{Name: "s", Algorithm: ratelimit.SlidingWindowLog, Limit: 1, Period: time.Second}
		ds, err := ratelimit.Simulate(p, []ratelimit.SimRequest{{At: 500 * ms, Key: "k", Cost: 1}, {At: 0, Key: "k", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].Allowed || !ds[1].Allowed || ds[0].RetryAfter != 500*ms {
			t.Errorf("Simulate = %+v, want the request at 0 allowed and the one at 500ms refused for 500ms", ds)
		}
	})
	t.Run("errors name the request", func(t *testing.T) {
		t.Parallel()
		p := ratelimit.Policy{Name: "s", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: time.Second}
		_, err := ratelimit.Simulate(p, []ratelimit.SimRequest{{Key: "k", Cost: 1}, {Key: "k", Cost: 2}})
		if !errors.Is(err, ratelimit.ErrCostExceedsLimit) || !strings.Contains(err.Error(), "request 1") {
			t.Errorf("Simulate error = %v, want ErrCostExceedsLimit naming request 1", err)
		}
	})
}
