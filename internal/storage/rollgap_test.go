package storage

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// TestRollPowerCutLeavesNoGap takes a power-cut image before every
// mutating file operation of a log that rolls several segments, with the
// durable mode off (the rolled segment's tail is fsynced later, by the
// syncer) and on, and checks that each image recovers to a log without
// holes: every offset below the log end reads a record, and the log end
// is the last record + 1. Without the durable mode a roll makes the new
// segment's file durable (the producer snapshot's directory fsync) before
// the rolled segment's tail: recovery used to end the log at the new
// segment's base, past offsets that held nothing (found by test/sim with
// 16 KiB segments, issue 14).
func TestRollPowerCutLeavesNoGap(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			fsys := vfs.NewCrashFS()
			dir := "/data/gap-0"
			cfg := testConfig()
			cfg.Durable = durable
			cfg.SegmentBytes = 1024
			l := openSynced(t, fsys, dir, cfg)
			var images []*vfs.CrashFS
			fsys.SetHook(func(op, name string) error {
				images = append(images, fsys.Crash())
				return nil
			})
			for i := 0; i < 40; i++ {
				if _, err := l.Append(mkBatch(t, 1+i%3, fmt.Sprintf("b%d", i), int64(i)), AppendOptions{LeaderEpoch: 1}); err != nil {
					t.Fatal(err)
				}
				if i%7 == 3 {
					if err := l.Flush(); err != nil { // part of a segment fsynced, the rest not
						t.Fatal(err)
					}
				}
			}
			fsys.SetHook(nil)
			images = append(images, fsys.Crash())
			rolled := len(l.Segments())
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if rolled < 4 {
				t.Fatalf("only %d segments: the test needs rolls", rolled)
			}
			for i, img := range images {
				checkNoHoles(t, fmt.Sprintf("image %d of %d", i, len(images)), img, dir, cfg)
			}
		})
	}
}

// checkNoHoles opens dir on fsys after a crash and checks that the
// batches from the log start are contiguous and end at the log end.
func checkNoHoles(t *testing.T, what string, fsys *vfs.CrashFS, dir string, cfg Config) {
	t.Helper()
	l := openSynced(t, fsys, dir, cfg)
	defer l.Close()
	next := l.LogStartOffset()
	for _, b := range readAllUpToEnd(t, what, l) {
		if b.BaseOffset() != next {
			t.Fatalf("%s: batch at %d where %d was expected (log end %d)", what, b.BaseOffset(), next, l.LogEndOffset())
		}
		next = b.LastOffset() + 1
	}
	if next != l.LogEndOffset() {
		t.Fatalf("%s: records end at %d, log end %d", what, next, l.LogEndOffset())
	}
}

// openSynced opens dir on fsys (recovering it) with a Syncer of its own,
// which t's cleanup closes; the caller closes the log.
func openSynced(t *testing.T, fsys vfs.FS, dir string, cfg Config) *Log {
	t.Helper()
	syncer := NewSyncer(quiet)
	t.Cleanup(func() { syncer.Close() })
	l, err := Open(dir, [16]byte{}, cfg, false, Options{FS: fsys, Syncer: syncer, Logger: quiet})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return l
}

// logFiles is the .log lines of fsys's listing (a CrashFS lists its files
// with their synced and unsynced sizes).
func logFiles(fsys vfs.FS) string {
	s := fmt.Sprint(fsys)
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, ".log") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestCleanerGapSurvivesPowerCut: the cleaner leaves a gap between
// segments (the last batch of the replaced range dropped); a power cut
// right after the swap must not read it as a lost tail (ReplaceSegments
// persists a recovery point past the range first), with the durable mode
// off and on.
func TestCleanerGapSurvivesPowerCut(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			fsys := vfs.NewCrashFS()
			dir := "/data/cgap-0"
			cfg := testConfig()
			cfg.Durable = durable
			cfg.SegmentBytes = 900
			l := openSynced(t, fsys, dir, cfg)
			defer l.Close()
			for i := 0; i < 80; i++ {
				if _, err := l.Append(mkBatch(t, 1+i%3, "s", int64(i)), AppendOptions{LeaderEpoch: 1}); err != nil {
					t.Fatal(err)
				}
			}
			segs := l.Segments()
			if len(segs) < 5 {
				t.Fatalf("only %d segments", len(segs))
			}
			all := readAllUpToEnd(t, "before the swap", l)
			rangeEnd := segs[3].BaseOffset
			w, err := l.NewCleanedSegment(segs[0].BaseOffset)
			if err != nil {
				t.Fatal(err)
			}
			var kept []record.Batch
			for _, b := range all {
				if b.LastOffset() < rangeEnd && b.LastOffset()+1 != rangeEnd { // the range's last batch goes: a gap
					if err := w.Append(b); err != nil {
						t.Fatal(err)
					}
					kept = append(kept, b)
				} else if b.LastOffset() >= rangeEnd {
					kept = append(kept, b)
				}
			}
			old := []int64{segs[0].BaseOffset, segs[1].BaseOffset, segs[2].BaseOffset}
			if err := l.ReplaceSegments(old, []*SegmentWriter{w}); err != nil {
				t.Fatal(err)
			}
			leo := l.LogEndOffset()
			img := fsys.Crash()
			r := openSynced(t, img, dir, cfg)
			defer r.Close()
			got := readAllUpToEnd(t, "after the power cut", r)
			if r.LogEndOffset() != leo || len(got) != len(kept) {
				t.Fatalf("after the power cut: log end %d (was %d), %d batches (want %d)", r.LogEndOffset(), leo, len(got), len(kept))
			}
			for i := range got {
				if !sameBatch(got[i], kept[i]) {
					t.Fatalf("batch %d at %d differs", i, got[i].BaseOffset())
				}
			}
		})
	}
}

// readAllUpToEnd reads every batch of l from its log start up to its log
// end; an offset below the log end that reads nothing fails t (what names
// the log in the message).
func readAllUpToEnd(t *testing.T, what string, l *Log) []record.Batch {
	t.Helper()
	var out []record.Batch
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		res, err := l.ReadUpToEnd(off, 1<<20, true)
		if err != nil {
			t.Fatalf("%s: read at %d: %v", what, off, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			t.Fatalf("%s: offset %d below the log end %d reads nothing (segments %+v)\nfiles:\n%s",
				what, off, l.LogEndOffset(), l.Segments(), logFiles(l.fsys))
		}
		for _, c := range res.Chunks {
			buf := make([]byte, c.Len)
			if _, err := c.File.File().ReadAt(buf, c.Pos); err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			for len(buf) > 0 {
				b, rest, err := record.Next(buf)
				if err != nil {
					t.Fatalf("%s: batch at %d: %v", what, off, err)
				}
				out = append(out, append(record.Batch(nil), b...))
				off = b.LastOffset() + 1
				buf = rest
			}
		}
		res.Release()
	}
	return out
}
