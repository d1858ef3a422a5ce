package storage

import (
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// idleIndexes reports whether l's active segment holds its indexes and
// index builder in memory.
func idleIndexes(l *Log) (loaded bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.active
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.oi != nil || s.ti != nil || s.bld != nil
}

// checkOffsets reads every offset of [from, to) and checks that the first
// batch read holds it (the offset index of every segment, the active one
// included, leads each read to the right batch), then runs the invariant
// checks of every segment.
func checkOffsets(t *testing.T, l *Log, from, to int64) {
	t.Helper()
	for off := from; off < to; off++ {
		bs := readAll(t, l, off)
		if len(bs) == 0 || bs[0].BaseOffset() > off || bs[0].LastOffset() < off {
			t.Fatalf("read at %d: first batch does not hold it (%d batches)", off, len(bs))
		}
	}
	l.mu.Lock()
	err := l.invariantErr(true)
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}

// TestIdleLogDropsActiveIndexes: a log opened after a clean shutdown,
// with nothing written since, holds no in-memory indexes for its active
// segment
// (issue 18: ten thousand idle partitions); reads load them on demand,
// and the next append, roll, truncation or close loads the writer's
// state again, so every offset stays readable through the indexes and
// the files written at close are whole.
func TestIdleLogDropsActiveIndexes(t *testing.T) {
	fsys := vfs.Default()
	for _, step := range []string{"append", "roll", "truncate", "read-then-append", "close"} {
		t.Run(step, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "idle-0")
			cfg := testConfig()
			cfg.SegmentBytes = 64 << 10 // one segment; index entries every 256 bytes
			l := openTest(t, fsys, dir, cfg, false)
			var end int64
			for i := 0; i < 40; i++ {
				end = mustAppend(t, l, mkBatch(t, 3, "a", int64(1000+i))).LastOffset + 1
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			for _, clean := range []bool{true, false} {
				l = openTest(t, fsys, dir, cfg, clean)
				// A recovery keeps them: its scan may have added
				// entries the files lack.
				if got := idleIndexes(l); got == clean {
					t.Fatalf("clean=%v: an idle log holds its active segment's indexes: %v", clean, got)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			l = openTest(t, fsys, dir, cfg, true)
			switch step {
			case "append":
			case "roll":
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			case "truncate":
				if _, err := l.TruncateTo(end - 10); err != nil {
					t.Fatal(err)
				}
				end -= 10
			case "read-then-append":
				checkOffsets(t, l, 0, end)
			case "close":
				l.mu.Lock()
				l.changed = true // as after a write: Close rewrites the active segment's files
				l.mu.Unlock()
			}
			if step != "close" {
				for i := 0; i < 40; i++ {
					end = mustAppend(t, l, mkBatch(t, 3, "b", int64(2000+i))).LastOffset + 1
				}
			}
			checkOffsets(t, l, 0, end)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTest(t, fsys, dir, cfg, true)
			defer l.Close()
			if got := l.LogEndOffset(); got != end {
				t.Fatalf("log end after a clean reopen = %d, want %d", got, end)
			}
			checkOffsets(t, l, 0, end)
		})
	}
}
