package redisstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// malformedIDs are reservation ids no store issues: hash tag braces, key
// separators, glob characters, control characters, a record's separator,
// 10 kB.
var malformedIDs = []string{"", "a}b", "{x}", "x:y", "*", "res:*", "a\nb", "a\r\nGET k", "a|b", "a b", "~", "a~", "a~e30",
	strings.Repeat("a", 10_000), strings.Repeat("f", 65)}

// A reservation id names a Redis key, so a malformed one must not reach
// Redis: one shaped to name a key planted by an attacker (here a record
// already "settled") is not found, not read.
func TestSettleRejectsMalformedIDs(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	prefix := testPrefix(t, client)
	s, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, k := range []string{prefix + "{res:a}b}", prefix + "{res:*}", prefix + "{res:x:y}"} {
		if err := client.Do(ctx, client.B().Set().Key(k).Value("settled").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range malformedIDs {
		st, err := s.Settle(ctx, id, 1)
		if !errors.Is(err, ratelimit.ErrReservationNotFound) || st.Already {
			t.Errorf("Settle(%.40q) = %+v, %v; want ErrReservationNotFound", id, st, err)
		}
	}
	p := &ratelimit.Policy{Name: "p", Algorithm: ratelimit.TokenBucket, Limit: 10, Period: 1e9}
	for _, id := range malformedIDs {
		if _, err := s.Hold(ctx, id, []ratelimit.Check{{Policy: p, Key: "k", Cost: 1}}, ratelimit.UsageOptions{}); !errors.Is(err, ratelimit.ErrInvalidUsage) {
			t.Errorf("Hold(%.40q): %v, want ErrInvalidUsage", id, err)
		}
	}
}
