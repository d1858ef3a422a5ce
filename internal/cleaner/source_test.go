package cleaner

import (
	"testing"
)

// TestCompactedWalksTheSource checks that finding the compacted
// partitions among many costs no allocation per partition: the cleaner's
// loop and the console's status do it every few seconds, and a copy of a
// 10,100-partition broker's partitions per walk was 2.8 MB of garbage
// (issue 18). The source yields 10,000 partitions without a log here
// (skipped like those of other policies).
func TestCompactedWalksTheSource(t *testing.T) {
	const n = 10_000
	walked := 0
	src := func(yield func(Partition) bool) {
		for i := range n {
			walked++
			if !yield(Partition{Topic: "t", Partition: int32(i)}) {
				return
			}
		}
	}
	c, err := New(testCleanerCfg(), t.TempDir(), src, discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.compacted(""); len(got) != 0 || walked != n {
		t.Fatalf("compacted %d, walked %d of %d", len(got), walked, n)
	}
	// A few for the sort, none per partition.
	if a := testing.AllocsPerRun(5, func() { c.compacted("") }); a > 8 {
		t.Fatalf("%.0f allocations per walk of %d partitions", a, n)
	}
}
