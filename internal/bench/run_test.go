package bench

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunStopsAtTheRequestCount(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	seen := make([]atomic.Bool, 1000)
	res, err := Run(t.Context(), "count", "local", Options{Workers: 8, Requests: 1000}, func(int) Op {
		return func(_ context.Context, seq int64) error {
			calls.Add(1)
			if seen[seq].Swap(true) {
				t.Errorf("seq %d handed out twice", seq)
			}
			if seq%100 == 0 {
				return errors.New("boom")
			}
			return nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1000 || res.OK != 990 || res.Errors != 10 || res.FirstError != "boom" {
		t.Errorf("Run = %d calls, %+v; want 1000 calls, 990 OK, 10 errors, first error boom", calls.Load(), res)
	}
	if res.Latency.Count() != 990 || res.Workers != 8 {
		t.Errorf("latencies recorded %d, workers %d; want 990, 8", res.Latency.Count(), res.Workers)
	}
}

// TestRunStopsAtTheDuration: requests cut short by the end of the run are
// not errors.
func TestRunStopsAtTheDuration(t *testing.T) {
	t.Parallel()
	res, err := Run(t.Context(), "timed", "local", Options{Workers: 4, Duration: 50 * time.Millisecond}, func(int) Op {
		return func(ctx context.Context, _ int64) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
				return nil
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.OK == 0 || res.Elapsed > 5*time.Second {
		t.Errorf("Run = %+v; want some OK requests, no errors, done in about 50ms", res)
	}
	if _, err := Run(t.Context(), "unbounded", "local", Options{}, nil); err == nil {
		t.Error("Run without duration or count succeeded, want an error")
	}
}

func TestWriteTable(t *testing.T) {
	t.Parallel()
	h := &Histogram{}
	for _, d := range []time.Duration{100 * time.Microsecond, 200 * time.Microsecond, 3 * time.Millisecond} {
		h.Record(d)
	}
	var b strings.Builder
	err := WriteTable(&b, []Result{{Scenario: "check-http", Target: "sluice", Workers: 64, OK: 3, Errors: 1,
		Elapsed: time.Second, Latency: h, FirstError: "HTTP 500", Note: "refused 0"}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"scenario", "check-http", "sluice", "3.0", "201µs", "3.00ms", "refused 0", "first error: HTTP 500"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "-"},
		{1500, "1.50µs"},
		{999_900, "1000µs"},
		{12_340_000, "12.3ms"},
		{2 * time.Second, "2.00s"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.d); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
