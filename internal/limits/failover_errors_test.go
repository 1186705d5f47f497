package limits_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// failingStore answers every Allow with err.
type failingStore struct {
	ratelimit.Store
	err error
}

func (s failingStore) Allow(context.Context, *ratelimit.Policy, string, int64) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, s.err
}

// A request-level error is the caller's answer: it never trips the node
// onto local limiters. Only an unreachable store does.
func TestFailoverRequestErrorsAreNotOutages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		down bool
	}{
		{"duplicate check", fmt.Errorf("check 1: %w", ratelimit.ErrDuplicateCheck), false},
		{"invalid cost", ratelimit.ErrInvalidCost, false},
		{"cost over the limit", ratelimit.ErrCostExceedsLimit, false},
		{"context cancelled inside the store", fmt.Errorf("redisstore: %w", context.Canceled), false},
		{"an error the store does not call an outage", errors.New("redisstore: script replied 3 numbers, want 6"), false},
		{"store unavailable", fmt.Errorf("redisstore: %w: dial tcp: connection refused", ratelimit.ErrUnavailable), true},
		{"timeout", fmt.Errorf("redisstore: %w", context.DeadlineExceeded), true},
	}
	p := &ratelimit.Policy{Name: "p", Algorithm: ratelimit.FixedWindow, Limit: 10, Period: time.Minute}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := limits.NewFailover(limits.FailoverOptions{Primary: failingStore{ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), tt.err}})
			_, err := f.Allow(t.Context(), p, "k", 1)
			if f.Up() == tt.down {
				t.Errorf("after Allow failed with %q: Up() = %v, want %v", tt.err, f.Up(), !tt.down)
			}
			if tt.down && err != nil {
				t.Errorf("Allow with the store down = %v, want a local decision", err)
			}
			if !tt.down && !errors.Is(err, tt.err) {
				t.Errorf("Allow = %v, want the store's error %q", err, tt.err)
			}
		})
	}
}

// A Redis error reply (here WRONGTYPE, from a fixed window's key holding a
// sorted set) is about the request, not an outage.
func TestFailoverRedisErrorReplyIsNotAnOutage(t *testing.T) {
	t.Parallel()
	client := enginetest.RedisClient(t, enginetest.RedisURL(t))
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "sluicetest:failover:" + hex.EncodeToString(b[:]) + ":"
	name := prefix + "{k}:p:f" // prefix{key}:policy:algorithm
	t.Cleanup(func() { client.Do(context.Background(), client.B().Del().Key(name).Build()) })
	if err := client.Do(t.Context(), client.B().Zadd().Key(name).ScoreMember().ScoreMember(1, "not a window").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	primary, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	f := limits.NewFailover(limits.FailoverOptions{Primary: primary})
	p := &ratelimit.Policy{Name: "p", Algorithm: ratelimit.FixedWindow, Limit: 10, Period: time.Minute}
	_, err = f.Allow(t.Context(), p, "k", 1)
	if _, ok := rueidis.IsRedisErr(errors.Unwrap(err)); !ok || !f.Up() {
		t.Errorf("Allow on a WRONGTYPE key = %v (up %v), want the Redis error reply and the store still up", err, f.Up())
	}
}
