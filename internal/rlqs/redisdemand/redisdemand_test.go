package redisdemand_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/rlqs"
	"github.com/sluicehq/sluice/internal/rlqs/redisdemand"
)

// TestStore runs the demand table's contract on Redis and in memory: a
// report returns every live client's row, expired rows are dropped, Leave
// removes a row, buckets are apart, a write-only update writes and reads
// nothing.
func TestStore(t *testing.T) {
	t.Parallel()
	var tag [6]byte
	_, _ = rand.Read(tag[:])
	rc := enginetest.RedisClient(t, enginetest.RedisURL(t), enginetest.NoClientCache)
	prefix := "sluicetest:rlqsdemand:" + hex.EncodeToString(tag[:]) + ":"
	for _, tc := range []struct {
		name  string
		store rlqs.DemandStore
	}{{"redis", redisdemand.New(rc, prefix)}, {"memory", &rlqs.MemoryDemand{}}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			now := time.UnixMilli(1_800_000_000_000)
			rows := func(bucket string, d rlqs.Demand) []string {
				t.Helper()
				out, err := tc.store.Report(ctx, now, []rlqs.Update{{Bucket: bucket, Demand: d}})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, d := range out[0] {
					got = append(got, d.Client+":"+time.Duration(d.Rate).String())
				}
				slices.Sort(got)
				return got
			}
			d := func(client string, rate float64, life time.Duration) rlqs.Demand {
				return rlqs.Demand{Client: client, Rate: rate, Expires: now.Add(life)}
			}
			rows("b1", d("a", 10, 20*time.Second))
			rows("b1", d("b", 20, 5*time.Second))
			if got := rows("b2", d("c", 1, time.Minute)); !slices.Equal(got, []string{"c:1ns"}) {
				t.Errorf("b2 = %v, want only c", got)
			}
			if got := rows("b1", d("a", 30, 20*time.Second)); !slices.Equal(got, []string{"a:30ns", "b:20ns"}) {
				t.Errorf("b1 = %v, want a (updated) and b", got)
			}
			now = now.Add(10 * time.Second) // b expired
			if got := rows("b1", d("a", 30, 20*time.Second)); !slices.Equal(got, []string{"a:30ns"}) {
				t.Errorf("b1 after b expired = %v, want a", got)
			}
			rows("b1", d("e", 5, 20*time.Second))
			if err := tc.store.Leave(ctx, "b1", "a"); err != nil {
				t.Fatal(err)
			}
			if got := rows("b1", d("e", 5, 20*time.Second)); !slices.Equal(got, []string{"e:5ns"}) {
				t.Errorf("b1 after a left = %v, want e", got)
			}
			// A write-only update, beside a read in the same report: no
			// table for it, and its row is there at the next read.
			out, err := tc.store.Report(ctx, now, []rlqs.Update{
				{Bucket: "b1", Demand: d("f", 7, 20*time.Second), WriteOnly: true},
				{Bucket: "b2", Demand: d("c", 2, time.Minute)},
			})
			if err != nil || len(out) != 2 || out[0] != nil || len(out[1]) != 1 {
				t.Errorf("write-only b1 and read b2 = %v, %v; want no table, then b2's one row", out, err)
			}
			if got := rows("b1", d("e", 6, 20*time.Second)); !slices.Equal(got, []string{"e:6ns", "f:7ns"}) {
				t.Errorf("b1 after f's write-only update = %v, want e and f", got)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ttl, err := rc.Do(ctx, rc.B().Pttl().Key(prefix+"rlqs:b1").Build()).AsInt64()
	if err != nil || ttl <= 0 || ttl > 20_000 {
		t.Errorf("PTTL of b1 = %d, %v; want until its last client expires (at most 20 s)", ttl, err)
	}
}
