package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
)

// An owner's unsettled reservations (UsageOptions.Owner, an API key) are
// counted in a sorted set of their record keys scored by expiry, a key of
// its own in its own slot: a reservation's keys may be anywhere on a
// Cluster, so the owner is admitted by a call of its own before the
// reservation's script and released after it when it refused or after
// its settle. Between the two calls the owner counts a reservation not
// yet taken, never the other way round: the bound errs toward refusing.

// ownerScript admits member ARGV[2] into the owner set KEYS[1] unless it
// holds ARGV[3] unexpired members. ARGV[1] is the clock override in µs
// (” for the server's TIME), ARGV[4] the reservation's TTL in µs.
var ownerScript = rueidis.NewLuaScript(`
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[3]) then return n end
local ttl = tonumber(ARGV[4])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
local ms = math.max(1, math.ceil(ttl / 1000))
if redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], ms) end
return -1
`)

func (s *Store) ownerKey(owner string) string { return s.prefix + "{holds:o:" + digest(owner) + "}" }

// admitOwner counts reservation record in owner's set, or answers
// ErrTooManyHolds when it is at bound. An empty owner is not counted.
func (s *Store) admitOwner(ctx context.Context, owner, record string, bound int, ttl int64) error {
	if owner == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := ownerScript.Exec(ctx, s.client, []string{s.ownerKey(owner)},
		[]string{s.nowArg(), record, strconv.Itoa(bound), strconv.FormatInt(ttl, 10)}).AsInt64()
	switch {
	case err != nil:
		return classify(err)
	case n >= 0:
		return fmt.Errorf("%w: the owner has %d outstanding", ratelimit.ErrTooManyHolds, n)
	}
	return nil
}

// releaseOwner stops record counting in owner's set. On failure the entry
// stays until the reservation's expiry, counting toward the bound until
// then.
func (s *Store) releaseOwner(ctx context.Context, owner, record string) {
	if owner == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	_ = s.client.Do(ctx, s.client.B().Zrem().Key(s.ownerKey(owner)).Member(record).Build()).Error()
}
