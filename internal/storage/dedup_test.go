package storage

import (
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// TestDedupWindowAcrossRollAndCrash: five in-flight batches of one producer
// straddle segment rolls (each roll takes a producer snapshot holding only
// the producer's last batch); after a power cut, a clean restart and a
// restart without the newest snapshot, resending any of the five is a
// Duplicate with the original offsets.
func TestDedupWindowAcrossRollAndCrash(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rolls []int // roll before these batch numbers
	}{
		{"one roll", []int{3}},
		{"roll before last", []int{4}},
		{"roll after every batch", []int{1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewCrashFS()
			dir := "/d/dedup-0"
			cfg := testConfig()
			l := openTest(t, fsys, dir, cfg, false)
			// Other data first, so the producer's batches are not at the start.
			for i := 0; i < 3; i++ {
				mustAppend(t, l, mkBatch(t, 2, "x", 1))
			}
			l.Roll()
			var orig []AppendResult
			for i := 0; i < 5; i++ {
				for _, r := range tc.rolls {
					if r == i {
						if err := l.Roll(); err != nil {
							t.Fatal(err)
						}
					}
				}
				orig = append(orig, mustAppend(t, l, mkBatchP(t, 2, "p", 1, 42, 3, int32(2*i))))
				mustAppend(t, l, mkBatch(t, 1, "other", 1))
			}
			check := func(l *Log, what string) {
				t.Helper()
				leo := l.LogEndOffset()
				for i := 4; i >= 0; i-- {
					res, err := l.Append(mkBatchP(t, 2, "p", 1, 42, 3, int32(2*i)), AppendOptions{})
					if err != nil || !res.Duplicate || res.BaseOffset != orig[i].BaseOffset || res.LastOffset != orig[i].LastOffset {
						t.Fatalf("%s: resend of batch %d: %+v %v (want offsets %d-%d)", what, i, res, err, orig[i].BaseOffset, orig[i].LastOffset)
					}
				}
				if l.LogEndOffset() != leo {
					t.Fatalf("%s: duplicate wrote data", what)
				}
			}
			check(l, "live")
			img := fsys.Crash()
			l.Close()
			l2 := openTest(t, img, dir, cfg, false)
			check(l2, "power cut")
			l2.Close()
			l3 := openTest(t, img, dir, cfg, true)
			check(l3, "clean restart")
			l3.Close()
			// The newest snapshot lost: an older one plus the scan.
			snaps := []string{}
			for _, f := range img.Files() {
				if hasSuffix(f, SnapshotSuffix) {
					snaps = append(snaps, f)
				}
			}
			if len(snaps) > 1 {
				img.Remove(snaps[len(snaps)-1])
			}
			l4 := openTest(t, img, dir, cfg, false)
			check(l4, "older snapshot")
			l4.Close()
		})
	}
}

// BenchmarkOpenIdleProducer is the worst case of the dedup-window rebuild:
// the snapshot's only producer wrote one batch long ago, followed by 8 MiB
// of small batches of other clients, so opening reads batch headers back
// up to the bound (dedupScanBytes).
func BenchmarkOpenIdleProducer(b *testing.B) {
	dir := b.TempDir() + "/idle-0"
	cfg := DefaultConfig()
	cfg.Durable = false
	l, err := Open(dir, [16]byte{}, cfg, false, Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Append(mkBatchP(b, 1, "p", 1, 42, 0, 0), AppendOptions{}); err != nil {
		b.Fatal(err)
	}
	small := mkBatch(b, 1, "other-client-value-of-some-length-0123456789", 1)
	for n := 0; n < 8<<20; n += len(small) {
		record.Batch(small).SetBaseOffset(0)
		if _, err := l.Append(small, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := Open(dir, [16]byte{}, cfg, true, Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		l.Close()
		b.StartTimer()
	}
}
