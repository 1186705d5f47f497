package ratelimit_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestCallgrindDriver is the fixed workload behind `make bench-callgrind`
// (.ci/bench-callgrind): instructions per allowed check, counted by
// callgrind, a figure the machine's load does not move. It runs only when
// SLUICE_CALLGRIND is set to "impl keys checks", impl one of sluice,
// sluice-gcra or xrate-sharded (BenchmarkMemory's implementations and
// policies). It makes every key exist first, then makes the given number
// of checks on keys picked in BenchmarkMemory's pseudo-random order, each
// through measuredCheck: callgrind collects inside that function only
// (--toggle-collect), so the setup and the choice of key are left out and
// the total divided by the checks is the cost of one check.
func TestCallgrindDriver(t *testing.T) {
	spec := strings.Fields(os.Getenv("SLUICE_CALLGRIND"))
	if len(spec) == 0 {
		t.Skip("SLUICE_CALLGRIND is not set (see make bench-callgrind)")
	}
	if len(spec) != 3 {
		t.Fatalf("SLUICE_CALLGRIND = %q, want \"impl keys checks\"", spec)
	}
	nkeys, err1 := strconv.Atoi(spec[1])
	checks, err2 := strconv.Atoi(spec[2])
	if err1 != nil || err2 != nil || nkeys < 1 || checks < 1 {
		t.Fatalf("SLUICE_CALLGRIND = %q: keys and checks must be positive integers", spec)
	}
	keys := benchKeys(nkeys)
	var check func(string) bool
	switch spec[0] {
	case "sluice", "sluice-gcra":
		store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
		p := &ratelimit.Policy{Name: "bench", Algorithm: ratelimit.TokenBucket, Limit: 1, Period: time.Minute, Burst: 1e8}
		if spec[0] == "sluice-gcra" {
			p.Algorithm = ratelimit.GCRA
		}
		ctx := context.Background()
		check = func(k string) bool {
			d, err := store.Allow(ctx, p, k, 1)
			return err == nil && d.Allowed
		}
	case "xrate-sharded":
		check = newShardedRate(256).allow
	default:
		t.Fatalf("SLUICE_CALLGRIND: unknown impl %q", spec[0])
	}
	warm(keys, check)
	runtime.GC()
	// On one thread: a goroutine that moves between threads has the
	// runtime's scheduling work (its locks, the hand-off) counted inside
	// measuredCheck, which moved the figure by up to 30 instructions per
	// check from run to run.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	refused := 0
	x, n := uint64(0x9E3779B97F4A7C15), uint64(len(keys))
	for range checks {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if !measuredCheck(check, keys[x%n]) {
			refused++
		}
	}
	if refused > 0 {
		t.Errorf("%d of %d checks refused: every check must be allowed", refused, checks)
	}
}

// measuredCheck is the function callgrind counts inside.
//
//go:noinline
func measuredCheck(check func(string) bool, key string) bool { return check(key) }
