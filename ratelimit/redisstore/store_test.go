package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// newClient connects to the test Redis, or skips (fails in CI) without one.
func newClient(t testing.TB) rueidis.Client {
	t.Helper()
	c := enginetest.RedisClient(t, enginetest.RedisURL(t))
	return c
}

// newStore opens a store with o on a new client, its keys under a
// testPrefix of their own.
func newStore(t testing.TB, o redisstore.Options) (*redisstore.Store, rueidis.Client) {
	t.Helper()
	client := newClient(t)
	o.Prefix = testPrefix(t, client)
	s, err := redisstore.New(client, o)
	if err != nil {
		t.Fatal(err)
	}
	return s, client
}

// testPrefix isolates a test's keys on the shared server, and deletes
// them when the test ends.
func testPrefix(t testing.TB, client rueidis.Client) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "sluicetest:rl:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		var cursor uint64
		for {
			e, err := client.Do(ctx, client.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Logf("cleaning up %s: %v", prefix, err)
				return
			}
			if len(e.Elements) > 0 {
				client.Do(ctx, client.B().Unlink().Key(e.Elements...).Build())
			}
			if cursor = e.Cursor; cursor == 0 {
				return
			}
		}
	})
	return prefix
}

func TestConformance(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	ratelimittest.Exercise(t, ratelimittest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) ratelimit.Store {
			s, err := redisstore.New(client, redisstore.Options{Prefix: testPrefix(t, client), Now: now})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		// The suite's clock is not the server's, so the key cannot be seen
		// to vanish; check that its expiry is at most twice the ResetAfter
		// of its last write (rounded up to the millisecond): the fast
		// section sets twice the time to full, so that later writes keep it.
		Idle: func(t *testing.T, store ratelimit.Store, clock *ratelimittest.Clock, p *ratelimit.Policy, key string, resetAfter time.Duration) {
			t.Helper()
			name := redisstore.KeyNameForTest(store.(*redisstore.Store), p, key)
			ttl, err := client.Do(t.Context(), client.B().Pttl().Key(name).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			// -2: gone already (the Peek emptied a log); else the expiry.
			if want := (2*resetAfter + time.Millisecond - 1).Milliseconds() + 1; ttl != -2 && (ttl <= 0 || ttl > want) {
				t.Errorf("PTTL %s = %d ms, want gone or in (0, %d]", name, ttl, want)
			}
		},
	})
}

// Without a clock override the store runs on the server's TIME.
func TestServerClock(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Options{})
	p := &ratelimit.Policy{Name: "hour", Algorithm: ratelimit.TokenBucket, Limit: 2, Period: time.Hour}
	for i, want := range []bool{true, true, false} {
		d, err := s.Allow(t.Context(), p, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want {
			t.Errorf("Allow %d = %+v, want allowed=%v", i, d, want)
		}
		if !want && (d.RetryAfter <= 29*time.Minute || d.RetryAfter > 30*time.Minute) {
			t.Errorf("RetryAfter = %v, want just under 30m", d.RetryAfter)
		}
	}
}

// Many concurrent callers are coalesced into few script calls and every
// check is still exact.
func TestConcurrentCallersAreExact(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Options{})
	p := &ratelimit.Policy{Name: "day", Algorithm: ratelimit.SlidingWindowLog, Limit: 1000, Period: 24 * time.Hour}
	q := &ratelimit.Policy{Name: "bucket", Algorithm: ratelimit.GCRA, Limit: 300, Period: 24 * time.Hour}
	var allowed, allowedQ atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for range 25 {
				d, err := s.Allow(t.Context(), p, "shared", 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				}
				ok, _, err := ratelimit.AllowAll(t.Context(), s, []ratelimit.Check{{Policy: q, Key: "a", Cost: 1}, {Policy: q, Key: "b" + string(rune('a'+g%2)), Cost: 1}})
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					allowedQ.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != 1000 {
		t.Errorf("1600 concurrent checks on a limit of 1000: %d allowed, want 1000", got)
	}
	if got := allowedQ.Load(); got != 300 {
		t.Errorf("1600 concurrent multi-key checks on a burst of 300: %d allowed, want 300", got)
	}
}

func TestNoScriptFallback(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Options{})
	redisstore.ForgetScriptForTest(s) // as after a server restart: EVALSHA answers NOSCRIPT
	p := &ratelimit.Policy{Name: "p", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: time.Minute}
	if d, err := s.Allow(t.Context(), p, "k", 1); err != nil || !d.Allowed {
		t.Errorf("Allow after NOSCRIPT = %+v, %v; want allowed", d, err)
	}
}

func TestCancelledWhileQueued(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Options{MaxInFlight: 1})
	p := &ratelimit.Policy{Name: "p", Algorithm: ratelimit.FixedWindow, Limit: 1 << 40, Period: time.Minute}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 20 {
				if _, err := s.Allow(ctx, p, "k", 1); err != nil && ctx.Err() == nil {
					t.Error(err)
				}
			}
		})
	}
	cancel()
	wg.Wait()
	// The store still works after callers left the queue.
	if d, err := s.Allow(t.Context(), p, "k", 1); err != nil || !d.Allowed {
		t.Errorf("Allow after cancellations = %+v, %v", d, err)
	}
}

func TestPrefixMustNotHaveBraces(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	if _, err := redisstore.New(client, redisstore.Options{Prefix: "a{b}"}); err == nil {
		t.Error("New with braces in the prefix: nil error, want one")
	}
}
