package rlqs

import (
	"maps"
	"strings"
	"testing"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
)

// FuzzBucketKey: bucket ids are client input. Two different ids never
// share a key, the entries come back in key order, and oversized ids are
// refused rather than tracked.
func FuzzBucketKey(f *testing.F) {
	f.Add("api", "tenant", "acme", "plan", "paid")
	f.Add("a?b", "k&=", "v=&%", "k", "")
	f.Add("", "x", strings.Repeat("v", maxEntryLen+1), "y", "z")
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string) {
		a := &rlqspb.BucketId{Bucket: map[string]string{k1: v1}}
		b := &rlqspb.BucketId{Bucket: map[string]string{k1: v1, k2: v2}}
		ka, oka := bucketKey(domain, a)
		kb, okb := bucketKey(domain, b)
		ea, eb := entriesOf(a), entriesOf(b)
		if !oka || !okb {
			if len(k1) <= maxEntryLen && len(v1) <= maxEntryLen && k1 != "" && !oka {
				t.Fatalf("id %v refused", a.Bucket)
			}
			return
		}
		if len(ea) != len(a.Bucket) || len(eb) != len(b.Bucket) {
			t.Fatalf("entries %v, %v for %v, %v", ea, eb, a.Bucket, b.Bucket)
		}
		for i := 1; i < len(eb); i++ {
			if eb[i-1].Key >= eb[i].Key {
				t.Fatalf("entries out of key order: %v", eb)
			}
		}
		if (ka == kb) != maps.Equal(a.Bucket, b.Bucket) {
			t.Fatalf("ids %v and %v: keys %q and %q", a.Bucket, b.Bucket, ka, kb)
		}
		if ko, _ := bucketKey(domain+"x", a); ko == ka {
			t.Fatalf("domains %q and %q share key %q", domain, domain+"x", ka)
		}
	})
}
