package redisstore_test

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// A reservation is state in Redis: another process settles it, and a
// client that crashed between reserve and settle leaves its estimate
// charged when the reservation expires, and no reservation key behind.
func TestReservationAcrossProcessesAndCrash(t *testing.T) {
	t.Parallel()
	admin := newClient(t)
	prefix := testPrefix(t, admin)
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
	node := func(c rueidis.Client) *redisstore.Store {
		s, err := redisstore.New(c, redisstore.Options{Prefix: prefix, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	crashing := enginetest.RedisClient(t, enginetest.RedisURL(t))
	a, b := node(crashing), node(admin)
	ctx := t.Context()
	p := &ratelimit.Policy{Name: "tpm", Algorithm: ratelimit.TokenBucket, Limit: 1000, Period: time.Hour}
	checks := []ratelimit.Check{{Policy: p, Key: "key1", Cost: 600}}

	h, err := a.Hold(ctx, rand.Text(), checks, ratelimit.UsageOptions{TTL: time.Minute})
	if err != nil || !h.Allowed {
		t.Fatalf("Hold = %+v, %v", h, err)
	}
	if _, err := b.Settle(ctx, h.ID, 100); err != nil {
		t.Fatalf("Settle on another node: %v", err)
	}
	if d, _ := b.Peek(ctx, p, "key1"); d.Remaining != 900 {
		t.Errorf("after settling 600 as 100 on another node: remaining %d, want 900", d.Remaining)
	}

	h, err = a.Hold(ctx, rand.Text(), checks, ratelimit.UsageOptions{TTL: time.Minute})
	if err != nil || !h.Allowed {
		t.Fatalf("second Hold = %+v, %v", h, err)
	}
	crashing.Close() // the holder dies before settling
	ttl, err := admin.Do(ctx, admin.B().Pttl().Key(prefix+"{res:"+h.ID+"}").Build()).AsInt64()
	if err != nil || ttl <= 0 || ttl > time.Minute.Milliseconds() {
		t.Errorf("reservation key PTTL = %d ms, %v; want it to expire within the reservation TTL", ttl, err)
	}
	clock.Advance(time.Minute)
	if _, err := b.Settle(ctx, h.ID, 0); !errors.Is(err, ratelimit.ErrReservationNotFound) {
		t.Errorf("Settle after the TTL: %v, want ErrReservationNotFound", err)
	}
	if d, _ := b.Peek(ctx, p, "key1"); d.Remaining != 316 {
		t.Errorf("after the crashed reservation expired: remaining %d, want 316 (900 - 600 kept + 16 refilled in a minute)", d.Remaining)
	}
	if _, err := b.Settle(ctx, "nope", 1); !errors.Is(err, ratelimit.ErrReservationNotFound) || strings.Contains(err.Error(), "unreadable") {
		t.Errorf("Settle of an unknown id: %v", err)
	}
}
