package bench

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func TestBucketBounds(t *testing.T) {
	for _, v := range []int64{0, 1, 31, 32, 33, 63, 64, 1000, 123456789, 1 << 40, 1<<62 + 12345} {
		i := bucket(v)
		if lo, hi := lowerBound(i), lowerBound(i+1); v < lo || v >= hi {
			t.Errorf("v=%d bucket %d [%d,%d)", v, i, lo, hi)
		}
	}
}

func TestQuantilesWithinError(t *testing.T) {
	var h Histogram
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]int64, 100000)
	for i := range vals {
		vals[i] = int64(r.ExpFloat64() * 1e6)
		h.Record(time.Duration(vals[i]))
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.99, 0.999, 1} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := int64(h.Quantile(q))
		if diff := float64(got-exact) / float64(exact); diff < -0.01 || diff > 0.04 {
			t.Errorf("q=%v got %d exact %d", q, got, exact)
		}
	}
	if h.Max() != time.Duration(vals[len(vals)-1]) || h.Count() != uint64(len(vals)) {
		t.Error("max/count")
	}
	var empty Histogram
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 {
		t.Error("empty")
	}
	var m Histogram
	m.Merge(&h)
	if m.Quantile(0.99) != h.Quantile(0.99) {
		t.Error("merge")
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i&0xfffff) * time.Microsecond)
	}
}
