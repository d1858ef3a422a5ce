package storage

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// TestReadAfterRepeatedSwaps simulates several cleaning rounds (random
// batches dropped, groups of segments merged) and checks that a read at
// every offset returns exactly the first surviving batch whose last offset
// reaches it, live and after clean and unclean restarts.
func TestReadAfterRepeatedSwaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fsys := vfs.NewCrashFS()
	dir := "/d/cr-0"
	cfg := testConfig()
	cfg.SegmentBytes = 700
	cfg.IndexIntervalBytes = 100
	l := openTest(t, fsys, dir, cfg, false)
	for i := 0; i < 120; i++ {
		mustAppend(t, l, mkBatch(t, 1+rng.IntN(3), "c", int64(i)))
	}
	survivors := readAll(t, l, 0)
	check := func(l *Log, what string) {
		t.Helper()
		leo := l.LogEndOffset()
		for off := l.LogStartOffset(); off < leo; off++ {
			var want record.Batch
			for _, b := range survivors {
				if b.LastOffset() >= off {
					want = b
					break
				}
			}
			res, err := l.Read(off, 1<<20, true)
			if err != nil {
				t.Fatalf("%s: read %d: %v", what, off, err)
			}
			if want == nil {
				if len(res.Chunks) != 0 {
					t.Fatalf("%s: read %d returned data past the last survivor", what, off)
				}
				continue
			}
			if len(res.Chunks) == 0 {
				t.Fatalf("%s: read %d returned nothing, want batch at %d", what, off, want.BaseOffset())
			}
			c := res.Chunks[0]
			buf := make([]byte, c.Len)
			c.File.File().ReadAt(buf, c.Pos)
			got, _, err := record.Next(buf)
			if err != nil || string(got) != string(want) {
				t.Fatalf("%s: read %d: got batch at %d, want %d", what, off, got.BaseOffset(), want.BaseOffset())
			}
			res.Release()
		}
	}
	for round := 0; round < 6; round++ {
		segs := l.Segments()
		closed := segs[:len(segs)-1]
		if len(closed) < 2 {
			break
		}
		// Merge a random run of closed segments, dropping batches at random
		// but keeping the last one of the run.
		from := rng.IntN(len(closed) - 1)
		to := from + 1 + rng.IntN(len(closed)-from-1)
		var old []int64
		for _, s := range closed[from : to+1] {
			old = append(old, s.BaseOffset)
		}
		end := closed[to].NextOffset
		w, err := l.NewCleanedSegment(closed[from].BaseOffset)
		if err != nil {
			t.Fatal(err)
		}
		var kept []record.Batch
		var inRun []record.Batch
		for _, b := range survivors {
			if b.BaseOffset() >= closed[from].BaseOffset && b.LastOffset() < end {
				inRun = append(inRun, b)
			}
		}
		for i, b := range inRun {
			if i == len(inRun)-1 || rng.IntN(3) != 0 {
				if err := w.Append(b); err != nil {
					t.Fatal(err)
				}
				kept = append(kept, b)
			}
		}
		if err := l.ReplaceSegments(old, []*SegmentWriter{w}); err != nil {
			t.Fatal(err)
		}
		var next []record.Batch
		for _, b := range survivors {
			if b.BaseOffset() >= closed[from].BaseOffset && b.LastOffset() < end {
				continue
			}
			next = append(next, b)
		}
		next = append(next, kept...)
		sortBatches(next)
		survivors = next
		check(l, "live")
		// Keep appending in between rounds.
		for i := 0; i < 15; i++ {
			b := mkBatch(t, 1+rng.IntN(3), "d", int64(i))
			mustAppend(t, l, b)
			survivors = append(survivors, b)
		}
	}
	check(l, "final")
	img := fsys.Crash()
	l.Close()
	l = openTest(t, fsys, dir, cfg, true)
	check(l, "clean restart")
	l.Close()
	l = openTest(t, img, dir, cfg, false)
	check(l, "power cut")
	l.Close()
}

func sortBatches(bs []record.Batch) {
	for i := 1; i < len(bs); i++ {
		for j := i; j > 0 && bs[j].BaseOffset() < bs[j-1].BaseOffset(); j-- {
			bs[j], bs[j-1] = bs[j-1], bs[j]
		}
	}
}
