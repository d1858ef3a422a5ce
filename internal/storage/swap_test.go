package storage

import (
	"fmt"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// swapFixture is a log with several closed segments and a prepared
// cleaner output for the first three (every other batch dropped, the last
// batch of the range kept as Kafka's cleaner does).
type swapFixture struct {
	fs       *vfs.CrashFS
	l        *Log
	old      []int64
	w        *SegmentWriter
	oldData  []record.Batch
	newData  []record.Batch
	dir      string
	cfg      Config
	rangeEnd int64
}

func newSwapFixture(t *testing.T) *swapFixture {
	t.Helper()
	f := &swapFixture{fs: vfs.NewCrashFS(), dir: "/d/swap-0", cfg: testConfig()}
	f.cfg.SegmentBytes = 900
	f.l = openTest(t, f.fs, f.dir, f.cfg, false)
	for i := 0; i < 80; i++ {
		mustAppend(t, f.l, mkBatch(t, 1+i%3, "s", int64(i)))
	}
	segs := f.l.Segments()
	if len(segs) < 5 {
		t.Fatalf("only %d segments", len(segs))
	}
	f.oldData = readAll(t, f.l, 0)
	f.rangeEnd = segs[3].BaseOffset
	for _, s := range segs[:3] {
		f.old = append(f.old, s.BaseOffset)
	}
	w, err := f.l.NewCleanedSegment(segs[0].BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	var inRange []record.Batch
	for _, b := range f.oldData {
		if b.LastOffset() < f.rangeEnd {
			inRange = append(inRange, b)
		}
	}
	for i, b := range inRange {
		if i%2 == 0 || i == len(inRange)-1 {
			if err := w.Append(b); err != nil {
				t.Fatal(err)
			}
			f.newData = append(f.newData, b)
		}
	}
	for _, b := range f.oldData {
		if b.LastOffset() >= f.rangeEnd {
			f.newData = append(f.newData, b)
		}
	}
	f.w = w
	return f
}

// classify reports whether the log serves exactly the old or the new data.
func classify(t *testing.T, l *Log, f *swapFixture) string {
	t.Helper()
	got := readAll(t, l, l.LogStartOffset())
	eq := func(want []record.Batch) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if string(got[i]) != string(want[i]) {
				return false
			}
		}
		return true
	}
	switch {
	case eq(f.oldData):
		return "old"
	case eq(f.newData):
		return "new"
	}
	return fmt.Sprintf("neither (%d batches)", len(got))
}

func TestReplaceSegments(t *testing.T) {
	f := newSwapFixture(t)
	// A reader holding the old first segment keeps reading after the swap.
	res, err := f.l.Read(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.l.ReplaceSegments(f.old, []*SegmentWriter{f.w}); err != nil {
		t.Fatal(err)
	}
	c := res.Chunks[0]
	buf := make([]byte, c.Len)
	if _, err := c.File.File().ReadAt(buf, c.Pos); err != nil {
		t.Fatalf("old reader lost its file: %v", err)
	}
	res.Release()
	if got := classify(t, f.l, f); got != "new" {
		t.Fatalf("after swap: %s", got)
	}
	// A fetch at a compacted-away offset returns the next surviving batch.
	gap := f.oldData[1].BaseOffset()
	bs := readAll(t, f.l, gap)
	if bs[0].BaseOffset() <= gap {
		t.Fatalf("read at compacted offset %d returned batch at %d", gap, bs[0].BaseOffset())
	}
	f.l.Close()
	l := openTest(t, f.fs, f.dir, f.cfg, false)
	if got := classify(t, l, f); got != "new" {
		t.Fatalf("after reopen: %s", got)
	}
	l.Close()
}

// TestReplaceSegmentsCrashAtEveryStep cuts power before, and injects a
// failure into, each file-system operation of ReplaceSegments: the log
// must then show the old or the new segments, never both, never neither.
func TestReplaceSegmentsCrashAtEveryStep(t *testing.T) {
	// Count the operations of an undisturbed swap.
	f := newSwapFixture(t)
	ops := 0
	f.fs.SetHook(func(op, name string) error { ops++; return nil })
	if err := f.l.ReplaceSegments(f.old, []*SegmentWriter{f.w}); err != nil {
		t.Fatal(err)
	}
	f.fs.SetHook(nil)
	f.l.Close()
	if ops < 10 {
		t.Fatalf("only %d operations", ops)
	}
	seen := map[string]int{}
	for k := 0; k < ops; k++ {
		// Power cut just before operation k.
		f := newSwapFixture(t)
		var img *vfs.CrashFS
		n := 0
		f.fs.SetHook(func(op, name string) error {
			if n == k {
				img = f.fs.Crash()
			}
			n++
			return nil
		})
		f.l.ReplaceSegments(f.old, []*SegmentWriter{f.w})
		f.fs.SetHook(nil)
		f.l.Close()
		if img == nil {
			t.Fatalf("step %d never reached", k)
		}
		l := openTest(t, img, f.dir, f.cfg, false)
		got := classify(t, l, f)
		l.Close()
		if got != "old" && got != "new" {
			t.Fatalf("power cut before op %d: %s\n%s", k, got, img)
		}
		seen["cut-"+got]++

		// Injected failure at operation k, then restart.
		f = newSwapFixture(t)
		n = 0
		f.fs.SetHook(func(op, name string) error {
			n++
			if n-1 == k {
				return vfs.ErrInjected
			}
			return nil
		})
		err := f.l.ReplaceSegments(f.old, []*SegmentWriter{f.w})
		f.fs.SetHook(nil)
		if live := classify(t, f.l, f); live != "old" && live != "new" {
			t.Fatalf("failure at op %d (%v): live log serves %s", k, err, live)
		}
		if err != nil {
			f.w.Abort()
		}
		f.l.Close()
		l = openTest(t, f.fs, f.dir, f.cfg, false)
		got = classify(t, l, f)
		l.Close()
		if got != "old" && got != "new" {
			t.Fatalf("failure at op %d (%v), after restart: %s\n%s", k, err, got, f.fs)
		}
		seen["fail-"+got]++
	}
	t.Logf("outcomes over %d steps: %v", ops, seen)
}
