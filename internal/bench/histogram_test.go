package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsAreContiguous(t *testing.T) {
	t.Parallel()
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1 << 20, 1<<20 + 1, 1<<63 - 1} {
		i := bucketOf(v)
		if i < prev || i >= buckets {
			t.Errorf("bucketOf(%d) = %d after %d (of %d buckets)", v, i, prev, buckets)
		}
		if ub := upperBound(i); ub < v {
			t.Errorf("upperBound(bucketOf(%d)) = %d, below the value", v, ub)
		}
		prev = i
	}
	for i := 1; i < buckets; i++ {
		if upperBound(i) <= upperBound(i-1) {
			t.Fatalf("upperBound(%d) = %d not above upperBound(%d) = %d", i, upperBound(i), i-1, upperBound(i-1))
		}
		if bucketOf(upperBound(i-1)+1) != i {
			t.Fatalf("bucketOf(upperBound(%d)+1) = %d, want %d", i-1, bucketOf(upperBound(i-1)+1), i)
		}
	}
}

// TestQuantilesWithinResolution compares the histogram with exact
// percentiles of random latencies.
func TestQuantilesWithinResolution(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var h, a, b Histogram
	exact := make([]time.Duration, 0, 100_000)
	for i := range 100_000 {
		d := time.Duration(r.ExpFloat64() * float64(300*time.Microsecond))
		exact = append(exact, d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	h.Merge(&a)
	h.Merge(&b)
	slices.Sort(exact)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		want := exact[max(0, int(q*float64(len(exact))+0.999999)-1)]
		got := h.Quantile(q)
		if got < want || float64(got-want) > float64(want)/60 {
			t.Errorf("Quantile(%v) = %v, want %v within 1/64", q, got, want)
		}
	}
	if h.Count() != 100_000 || h.Max() != exact[len(exact)-1] {
		t.Errorf("Count, Max = %d, %v; want 100000, %v", h.Count(), h.Max(), exact[len(exact)-1])
	}
	var empty Histogram
	if empty.Quantile(0.99) != 0 || empty.Mean() != 0 {
		t.Error("an empty histogram reports a latency")
	}
}
