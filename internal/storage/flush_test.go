package storage

import (
	"context"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/vfs"
)

// TestFlushKnobs: with Durable=false the high watermark follows the log
// end at once, and flush.messages bounds what a power cut can lose.
func TestFlushKnobs(t *testing.T) {
	fsys := vfs.NewCrashFS()
	cfg := testConfig()
	cfg.Durable = false
	cfg.FlushMessages = 10
	l := openTest(t, fsys, "/d/fl-0", cfg, false)
	for i := 0; i < 7; i++ { // 7 batches of 3 = 21 messages
		res, err := l.Append(mkBatch(t, 3, "f", 1), AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.HighWatermark() != res.LastOffset+1 {
			t.Fatalf("hw %d does not follow leo %d in non-durable mode", l.HighWatermark(), res.LastOffset+1)
		}
		if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	img := fsys.Crash()
	l.Close()
	l = openTest(t, img, "/d/fl-0", cfg, false)
	defer l.Close()
	// Flushes happened at 12 and 21 messages (>= 10 since the last).
	if got := l.LogEndOffset(); got < 12 {
		t.Fatalf("after power cut leo %d: flush.messages=10 not honoured", got)
	}
}

func TestFlushMsViaMaybeRoll(t *testing.T) {
	fsys := vfs.NewCrashFS()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	cfg := testConfig()
	cfg.Durable = false
	cfg.FlushMs = 1000
	l, err := Open("/d/fms-0", [16]byte{}, cfg, false, Options{FS: fsys, Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Append(mkBatch(t, 2, "x", 1), AppendOptions{})
	if l.RecoveryPoint() != 0 {
		t.Fatalf("flushed too early: %d", l.RecoveryPoint())
	}
	clk.Advance(2 * time.Second)
	if _, err := l.MaybeRoll(clk.Now()); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != 2 {
		t.Fatalf("flush.ms not honoured by MaybeRoll: recovery point %d", l.RecoveryPoint())
	}
}

func TestIdleRollCompactedUsesMaxCompactionLag(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	cfg := testConfig()
	cfg.SegmentMs = 7 * 24 * time.Hour
	cfg.Compact = true
	cfg.MaxCompactionLagMs = 60_000
	l, err := Open("/d/idle-0", [16]byte{}, cfg, false, Options{FS: vfs.NewCrashFS(), Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, mkBatch(t, 1, "i", clk.Now().UnixMilli()))
	clk.Advance(30 * time.Second)
	if rolled, _ := l.MaybeRoll(clk.Now()); rolled {
		t.Fatal("rolled before max.compaction.lag.ms")
	}
	clk.Advance(31 * time.Second)
	if rolled, err := l.MaybeRoll(clk.Now()); !rolled || err != nil {
		t.Fatalf("idle compacted segment not rolled: %v", err)
	}
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("%d segments", n)
	}
	// An empty active segment is never rolled.
	clk.Advance(time.Hour)
	if rolled, _ := l.MaybeRoll(clk.Now()); rolled {
		t.Fatal("rolled an empty segment")
	}
}
