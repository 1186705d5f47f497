package ratelimit_test

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// TestMemoryStoreHoldsBound: a MemoryStore keeps at most MaxHolds
// reservations over every key and owner. Past it, while every one is
// unsettled, Hold answers ErrTooManyHolds and takes nothing; settled ones
// (remembered a minute) make room for new ones, oldest first.
func TestMemoryStoreHoldsBound(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now, MaxHolds: 10})
	p := &ratelimit.Policy{Name: "tpm", Algorithm: ratelimit.TokenBucket, Limit: 1_000_000, Period: time.Hour}
	ctx := t.Context()
	hold := func(i int) (ratelimit.Hold, error) {
		return store.Hold(ctx, fmt.Sprintf("id%d", i), []ratelimit.Check{{Policy: p, Key: fmt.Sprintf("k%d", i), Cost: 1}},
			ratelimit.UsageOptions{})
	}
	for i := range 10 {
		if h, err := hold(i); err != nil || !h.Allowed {
			t.Fatalf("hold %d = %+v, %v", i, h, err)
		}
	}
	if h, err := hold(10); !errors.Is(err, ratelimit.ErrTooManyHolds) || h.Allowed {
		t.Fatalf("an 11th hold on a new key = %+v, %v; want ErrTooManyHolds", h, err)
	}
	if d, _ := store.Peek(ctx, p, "k10"); d.Remaining != d.Limit {
		t.Errorf("the refused hold charged: %+v", d)
	}
	for i := range 2 {
		if _, err := store.Settle(ctx, fmt.Sprintf("id%d", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	for i := 10; i < 12; i++ {
		if h, err := hold(i); err != nil || !h.Allowed {
			t.Fatalf("hold %d once two were settled = %+v, %v", i, h, err)
		}
	}
	// id0's tombstone made room: a second settle no longer knows it.
	if _, err := store.Settle(ctx, "id0", 1); !errors.Is(err, ratelimit.ErrReservationNotFound) {
		t.Errorf("settle of a tombstone dropped for room: %v, want ErrReservationNotFound", err)
	}
	if _, err := hold(12); !errors.Is(err, ratelimit.ErrTooManyHolds) {
		t.Errorf("a hold with ten unsettled: %v, want ErrTooManyHolds", err)
	}
}

// TestMemoryStoreBytesPerHold measures what an unsettled reservation of
// one check costs a MemoryStore (docs/security.md, "Bounds"), on keys
// of 32 bytes under an owner, and checks it stays under 1 KiB.
func TestMemoryStoreBytesPerHold(t *testing.T) {
	// Not parallel: the memory measured is this test's alone.
	const n = 50_000
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{MaxHolds: n})
	p := &ratelimit.Policy{Name: "tpm", Algorithm: ratelimit.TokenBucket, Limit: 1_000_000, Period: time.Hour}
	ctx := t.Context()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%025d", i)
	}
	// The counters first, so that what is measured is the holds alone.
	for _, k := range keys {
		if _, err := store.Charge(ctx, []ratelimit.Check{{Policy: p, Key: k, Cost: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	before := liveBytes()
	for i, k := range keys {
		// Ids of the length the limits service issues (rand.Text: 26).
		h, err := store.Hold(ctx, fmt.Sprintf("%026d", i), []ratelimit.Check{{Policy: p, Key: k, Cost: 1}},
			ratelimit.UsageOptions{Owner: "api-key-1", MaxOwnerHolds: n})
		if err != nil || !h.Allowed {
			t.Fatalf("hold %d = %+v, %v", i, h, err)
		}
	}
	per := (float64(liveBytes()) - float64(before)) / n
	t.Logf("an unsettled reservation of one check: %.0f bytes each (%d)", per, n)
	if per > 1024 {
		t.Errorf("%.0f bytes a reservation, past the documented bound's margin of 1 KiB", per)
	}
	runtime.KeepAlive(store)
}

func liveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
