package bench

import (
	"math/bits"
	"time"
)

// subBits sets the histogram's resolution: 2^(subBits-1) buckets per power
// of two, so a reported percentile is within 1/64 (1.6%) of the truth.
const subBits = 7

// buckets covers every non-negative int64 (nanoseconds).
const buckets = (64 - subBits + 1) << (subBits - 1)

// Histogram records latencies in log-linear buckets (HDR style): exact
// below 128 ns, then 64 buckets per power of two, so memory is fixed (about
// 30 KiB) whatever it records and percentiles keep two significant digits.
// Min, max, count and sum are exact.
//
// The zero value is an empty histogram ready to use. A Histogram is not
// safe for concurrent use: give each worker its own and Merge them.
type Histogram struct {
	counts   [buckets]uint64
	n        uint64
	sum      time.Duration
	min, max time.Duration
}

func bucketOf(v uint64) int {
	shift := max(0, bits.Len64(v)-subBits)
	return shift<<(subBits-1) + int(v>>shift)
}

// upperBound is the largest value bucket i holds.
func upperBound(i int) uint64 {
	if i < 1<<subBits {
		return uint64(i)
	}
	shift := i>>(subBits-1) - 1
	mantissa := uint64(i - shift<<(subBits-1))
	return (mantissa+1)<<shift - 1
}

// Record adds one latency; negative ones count as zero.
func (h *Histogram) Record(d time.Duration) {
	d = max(d, 0)
	h.counts[bucketOf(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += d
}

// Merge adds every latency recorded in o.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count is how many latencies were recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest latency recorded, zero when empty.
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the average latency, zero when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Quantile returns the latency that q (0 to 1) of the recordings do not
// exceed, rounded up to its bucket's bound and never above Max. It is zero
// when the histogram is empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.999999)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(upperBound(i)), h.max)
		}
	}
	return h.max
}
