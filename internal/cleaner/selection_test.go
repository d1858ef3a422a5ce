package cleaner

import (
	"math"
	"testing"

	"github.com/strata-io/strata/internal/storage"
)

func testCfg() storage.Config {
	return storage.Config{MinCleanableDirtyRatio: 0.5, MaxCompactionLagMs: math.MaxInt64, SegmentBytes: 1 << 30,
		SegmentIndexBytes: 10 << 20, IndexIntervalBytes: 4096, Compact: true}
}

// four segments of 100 bytes: [0,10) [10,20) [20,30) active [30,35)
func testSegs() []storage.SegmentInfo {
	return []storage.SegmentInfo{
		{BaseOffset: 0, NextOffset: 10, Size: 100, LargestTimestamp: 1000, FirstTimestamp: 100},
		{BaseOffset: 10, NextOffset: 20, Size: 100, LargestTimestamp: 2000, FirstTimestamp: 1100},
		{BaseOffset: 20, NextOffset: 30, Size: 100, LargestTimestamp: 3000, FirstTimestamp: 2100},
		{BaseOffset: 30, NextOffset: 35, Size: 100, LargestTimestamp: 4000, FirstTimestamp: 3100, Active: true},
	}
}

func TestCleanableNoCheckpoint(t *testing.T) {
	c := computeCleanable(testSegs(), 0, 35, 35, -1, testCfg(), 5000)
	if c.FirstDirty != 0 || c.FirstUncleanable != 30 || c.DirtyBytes != 300 || c.CleanBytes != 0 || c.Ratio != 1 {
		t.Fatalf("%+v", c)
	}
	if !c.eligible(0.5) || c.OldestDirtyTs != 100 {
		t.Fatalf("%+v", c)
	}
}

func TestCleanableHighWatermarkAndCheckpoint(t *testing.T) {
	// HW inside segment 2 -> rounded down to 20.
	c := computeCleanable(testSegs(), 0, 35, 25, 10, testCfg(), 5000)
	if c.FirstDirty != 10 || c.FirstUncleanable != 20 || c.DirtyBytes != 100 || c.CleanBytes != 100 || c.Ratio != 0.5 {
		t.Fatalf("%+v", c)
	}
	if c.eligible(0.5) { // strict >
		t.Fatal("ratio 0.5 must not pass 0.5")
	}
	// Mid-segment checkpoint: the segment counts as clean and dirty (Kafka).
	c = computeCleanable(testSegs(), 0, 35, 35, 15, testCfg(), 5000)
	if c.FirstDirty != 15 || c.CleanBytes != 200 || c.DirtyBytes != 200 {
		t.Fatalf("%+v", c)
	}
	// Checkpoint out of range resets to log start.
	for _, ck := range []int64{3, 99} {
		c = computeCleanable(testSegs(), 5, 35, 35, ck, testCfg(), 5000)
		if c.FirstDirty != 5 {
			t.Fatalf("ckpt %d: %+v", ck, c)
		}
	}
	// Everything clean: nothing to do.
	c = computeCleanable(testSegs(), 0, 35, 35, 30, testCfg(), 5000)
	if c.eligible(0) || c.DirtyBytes != 0 {
		t.Fatalf("%+v", c)
	}
}

func TestCleanableMinCompactionLag(t *testing.T) {
	cfg := testCfg()
	cfg.MinCompactionLagMs = 2500 // now 5000: segments with largest ts > 2500 are held back
	c := computeCleanable(testSegs(), 0, 35, 35, -1, cfg, 5000)
	if c.FirstUncleanable != 20 || c.DirtyBytes != 200 {
		t.Fatalf("%+v", c)
	}
}

func TestCleanableMaxCompactionLag(t *testing.T) {
	cfg := testCfg()
	cfg.MaxCompactionLagMs = 3800 // oldest dirty first ts 1100 < 5000-3800
	c := computeCleanable(testSegs(), 0, 35, 35, 10, cfg, 5000)
	if c.Ratio != float64(200)/300 || !c.MaxLagDue || !c.eligible(0.99) {
		t.Fatalf("%+v", c)
	}
	cfg.MaxCompactionLagMs = 4500
	c = computeCleanable(testSegs(), 0, 35, 35, 10, cfg, 5000)
	if c.MaxLagDue || c.eligible(0.99) {
		t.Fatalf("%+v", c)
	}
}

func TestGroupSegments(t *testing.T) {
	cfg := testCfg()
	cfg.SegmentBytes = 250
	g := groupSegments(testSegs(), 30, cfg)
	if len(g) != 2 || len(g[0]) != 2 || len(g[1]) != 1 || g[1][0].BaseOffset != 20 {
		t.Fatalf("%+v", g)
	}
	g = groupSegments(testSegs(), 15, cfg)
	if len(g) != 1 || len(g[0]) != 2 {
		t.Fatalf("end 15: %+v", g)
	}
	segs := []storage.SegmentInfo{{BaseOffset: 0, NextOffset: 10, Size: 1}, {BaseOffset: math.MaxInt32, NextOffset: math.MaxInt32 + 10, Size: 1}}
	if g = groupSegments(segs, 1<<40, cfg); len(g) != 2 {
		t.Fatalf("int32 span: %+v", g)
	}
}
