// Package redisdemand keeps the rate limit quota service's demand tables
// (rlqs.DemandStore) in Redis, so every node serving one bucket's Envoys
// divides the same table.
//
// Each bucket is one hash, <prefix>rlqs:<bucket>, with a field per client
// holding its demand and expiry ("<rate> <expires unix ms>"). A report runs
// one script per bucket, all of a report's buckets in one pipeline: it sets
// the client's field, drops expired fields, returns the rest and keeps the
// key alive until its last client expires. Nodes crossing traffic is thus
// one round trip per Envoy report, whatever the request rate.
package redisdemand

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/rlqs"
)

// Store is a rlqs.DemandStore on Redis. It is safe for concurrent use.
type Store struct {
	client rueidis.Client
	prefix string
}

var _ rlqs.DemandStore = (*Store)(nil)

// New returns a Store on client whose keys start with prefix (several
// deployments, or tests, can share one Redis).
func New(client rueidis.Client, prefix string) *Store {
	return &Store{client: client, prefix: prefix}
}

// reportScript sets client ARGV[2]'s demand ARGV[3] (expiring at ARGV[4],
// unix ms) in the hash KEYS[1], drops the fields expired at ARGV[1] and
// returns the others as field, value pairs.
var reportScript = rueidis.NewLuaScript(`
local now = tonumber(ARGV[1])
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local exp = tonumber(string.match(all[i + 1], ' (%d+)$'))
  if not exp or exp <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
local ttl = math.max(1, tonumber(ARGV[4]) - now)
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return out
`)

// writeScript is reportScript for a write-only update: it sets the field
// and keeps the key alive, and reads nothing.
var writeScript = rueidis.NewLuaScript(`
local now = tonumber(ARGV[1])
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
local ttl = math.max(1, tonumber(ARGV[4]) - now)
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 0
`)

func (s *Store) key(bucket string) string { return s.prefix + "rlqs:" + bucket }

// Report implements rlqs.DemandStore.
func (s *Store) Report(ctx context.Context, now time.Time, updates []rlqs.Update) ([][]rlqs.Demand, error) {
	if len(updates) == 0 {
		return nil, nil
	}
	// The write-only updates in one pipeline, then the reads in another
	// (one round trip when a report has only one kind).
	var reads, writes []rueidis.LuaExec
	var readIdx, writeIdx []int
	nowMs := strconv.FormatInt(now.UnixMilli(), 10)
	for i, u := range updates {
		exp := strconv.FormatInt(u.Demand.Expires.UnixMilli(), 10)
		e := rueidis.LuaExec{Keys: []string{s.key(u.Bucket)},
			Args: []string{nowMs, u.Demand.Client, strconv.FormatFloat(u.Demand.Rate, 'g', -1, 64) + " " + exp, exp}}
		if u.WriteOnly {
			writes, writeIdx = append(writes, e), append(writeIdx, i)
		} else {
			reads, readIdx = append(reads, e), append(readIdx, i)
		}
	}
	out := make([][]rlqs.Demand, len(updates))
	var written []rueidis.RedisResult
	if len(writes) > 0 {
		written = writeScript.ExecMulti(ctx, s.client, writes...)
	}
	for j, r := range written {
		if err := r.Error(); err != nil {
			return nil, fmt.Errorf("rlqs demand of %q: %w", updates[writeIdx[j]].Bucket, err)
		}
	}
	var read []rueidis.RedisResult
	if len(reads) > 0 {
		read = reportScript.ExecMulti(ctx, s.client, reads...)
	}
	for j, r := range read {
		i := readIdx[j]
		pairs, err := r.AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("rlqs demand of %q: %w", updates[i].Bucket, err)
		}
		ds := make([]rlqs.Demand, 0, len(pairs)/2)
		for k := 0; k+1 < len(pairs); k += 2 {
			d, ok := parse(pairs[k], pairs[k+1])
			if ok {
				ds = append(ds, d)
			}
		}
		out[i] = ds
	}
	return out, nil
}

// parse reads one field written by Report; a field it cannot read (of a
// newer version) is skipped.
func parse(client, value string) (rlqs.Demand, bool) {
	rate, exp, ok := strings.Cut(value, " ")
	if !ok {
		return rlqs.Demand{}, false
	}
	r, err1 := strconv.ParseFloat(rate, 64)
	ms, err2 := strconv.ParseInt(exp, 10, 64)
	if err1 != nil || err2 != nil {
		return rlqs.Demand{}, false
	}
	return rlqs.Demand{Client: client, Rate: r, Expires: time.UnixMilli(ms)}, true
}

// Leave implements rlqs.DemandStore.
func (s *Store) Leave(ctx context.Context, bucket, client string) error {
	return s.client.Do(ctx, s.client.B().Hdel().Key(s.key(bucket)).Field(client).Build()).Error()
}
