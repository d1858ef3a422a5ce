package bench

import (
	"math"
	"math/bits"
	"time"
)

// subBits is the number of mantissa bits kept per power of two: 2^5 = 32
// sub-buckets, so a bucket is at most ~3% wide.
const subBits = 5

// Histogram records durations (nanoseconds) in log-linear buckets with
// bounded relative error, in constant memory. Not safe for concurrent use.
type Histogram struct {
	counts [64 << subBits]uint64
	n      uint64
	max    int64
	sum    float64
}

// bucket maps a non-negative value to its bucket index.
func bucket(v int64) int {
	if v < 1<<subBits {
		return int(v)
	}
	exp := bits.Len64(uint64(v)) - 1 - subBits // >= 0
	mant := int(uint64(v)>>uint(exp)) & (1<<subBits - 1)
	return (exp+1)<<subBits | mant
}

// lowerBound is the smallest value of bucket i.
func lowerBound(i int) int64 {
	if i < 1<<subBits {
		return int64(i)
	}
	exp := i>>subBits - 1
	mant := int64(i & (1<<subBits - 1))
	return (1<<subBits | mant) << uint(exp)
}

// Record adds one duration (negative durations count as zero).
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucket(v)]++
	h.n++
	h.sum += float64(v)
	if v > h.max {
		h.max = v
	}
}

// Merge adds another histogram's counts.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	if o.max > h.max {
		h.max = o.max
	}
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest recorded value.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the average recorded value.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the value at quantile q in [0,1]: the upper end of the
// bucket holding it, capped at the maximum.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			hi := lowerBound(i+1) - 1
			if hi > h.max {
				hi = h.max
			}
			return time.Duration(hi)
		}
	}
	return time.Duration(h.max)
}
