package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// buildLog writes n batches into a fresh multi-segment log on disk, closes
// it cleanly and returns the directory and the batches (offsets assigned).
func buildLog(t *testing.T, n int) (string, []record.Batch) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "c-0")
	l := openTest(t, vfs.Default(), dir, testConfig(), false)
	var bs []record.Batch
	for i := 0; i < n; i++ {
		b := mkBatch(t, 1+i%3, "x", int64(100+i))
		mustAppend(t, l, b)
		bs = append(bs, b)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, bs
}

func segFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if len(m) == 0 {
		t.Fatalf("no %s files", suffix)
	}
	return m
}

// expectPrefix checks the log serves exactly a prefix of want, at least
// minLen batches, every byte identical.
func expectPrefix(t *testing.T, l *Log, want []record.Batch, minLen int) {
	t.Helper()
	got := readAll(t, l, l.LogStartOffset())
	if len(got) < minLen || len(got) > len(want) {
		t.Fatalf("got %d batches, want between %d and %d", len(got), minLen, len(want))
	}
	for i := range got {
		if string(got[i]) != string(want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	if l.LogEndOffset() != func() int64 {
		if len(got) == 0 {
			return 0
		}
		return got[len(got)-1].LastOffset() + 1
	}() {
		t.Fatalf("leo %d does not match data", l.LogEndOffset())
	}
}

func TestRecoverFlippedByteInActiveSegment(t *testing.T) {
	dir, want := buildLog(t, 60)
	logs := segFiles(t, dir, LogSuffix)
	last := logs[len(logs)-1]
	data, _ := os.ReadFile(last)
	if len(data) < 100 {
		t.Skip("last segment too small")
	}
	data[len(data)/2] ^= 0xff
	os.WriteFile(last, data, 0o644)
	// The recovery point at the segment's base: its bytes are checked in
	// full. (Below the recovery point they were fsynced and are trusted:
	// headers are read only from the last offset index entry on.)
	base, _ := parseBase(filepath.Base(last))
	if err := WriteCheckpoint(vfs.Default(), filepath.Join(filepath.Dir(dir), RecoveryPointFile),
		[]CheckpointEntry{{Topic: "c", Partition: 0, Offset: base}}); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, vfs.Default(), dir, testConfig(), false)
	defer l.Close()
	expectPrefix(t, l, want, 1)
	if l.LogEndOffset() == want[len(want)-1].LastOffset()+1 {
		t.Fatal("corrupt batch was not truncated")
	}
}

func TestRecoverFlippedByteOlderSegmentFullScan(t *testing.T) {
	dir, want := buildLog(t, 60)
	logs := segFiles(t, dir, LogSuffix)
	data, _ := os.ReadFile(logs[1])
	data[30] ^= 0x01
	os.WriteFile(logs[1], data, 0o644)
	// Without a recovery point every segment is scanned.
	os.Remove(filepath.Join(filepath.Dir(dir), RecoveryPointFile))
	l := openTest(t, vfs.Default(), dir, testConfig(), false)
	defer l.Close()
	expectPrefix(t, l, want, 1)
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("later segments not removed: %d segments", n)
	}
}

func TestRecoverTruncatedTail(t *testing.T) {
	for _, cut := range []int64{1, 11, 30, 61, 70} {
		dir, want := buildLog(t, 40)
		logs := segFiles(t, dir, LogSuffix)
		last := logs[len(logs)-1]
		st, _ := os.Stat(last)
		if st.Size() <= cut {
			continue
		}
		os.Truncate(last, st.Size()-cut)
		l := openTest(t, vfs.Default(), dir, testConfig(), false)
		expectPrefix(t, l, want, len(want)-1)
		if l.LogEndOffset() != want[len(want)-2].LastOffset()+1 {
			t.Fatalf("cut %d: leo %d", cut, l.LogEndOffset())
		}
		// The log keeps working after the repair.
		mustAppend(t, l, mkBatch(t, 2, "after", 1))
		l.Close()
	}
}

func TestRecoverMissingAndZeroedIndexes(t *testing.T) {
	for _, mode := range []string{"deleted", "zeroed", "garbage"} {
		for _, clean := range []bool{true, false} {
			dir, want := buildLog(t, 60)
			for _, f := range append(segFiles(t, dir, IndexSuffix), segFiles(t, dir, TimeIndexSuffix)...) {
				switch mode {
				case "deleted":
					os.Remove(f)
				case "zeroed":
					st, _ := os.Stat(f)
					os.WriteFile(f, make([]byte, st.Size()), 0o644)
				case "garbage":
					os.WriteFile(f, []byte(strings.Repeat("\x7f\x01\x02\x03garbage!", 20)), 0o644)
				}
			}
			l := openTest(t, vfs.Default(), dir, testConfig(), clean)
			expectPrefix(t, l, want, len(want))
			for off := int64(0); off < l.LogEndOffset(); off += 5 {
				res, err := l.Read(off, 1, true)
				if err != nil || len(res.Chunks) != 1 {
					t.Fatalf("%s clean=%v read %d: %v", mode, clean, off, err)
				}
				buf := make([]byte, res.Chunks[0].Len)
				res.Chunks[0].File.File().ReadAt(buf, res.Chunks[0].Pos)
				b := record.Batch(buf)
				if b.BaseOffset() > off || b.LastOffset() < off {
					t.Fatalf("%s clean=%v: read %d got batch [%d,%d]", mode, clean, off, b.BaseOffset(), b.LastOffset())
				}
				res.Release()
			}
			l.Close()
		}
	}
}

func TestRecoverLeftoverFiles(t *testing.T) {
	dir, want := buildLog(t, 60)
	logs := segFiles(t, dir, LogSuffix)
	// A .deleted leftover, a stray .cleaned and a .swap at/above it (an
	// interrupted cleaning: must be rolled back).
	os.WriteFile(filepath.Join(dir, FileName(0, LogSuffix+DeletedSuffix)), []byte("old"), 0o644)
	data, _ := os.ReadFile(logs[0])
	os.WriteFile(logs[0]+CleanedSuffix, data[:len(data)/2], 0o644)
	os.WriteFile(logs[1]+SwapSuffix, []byte("junk swap"), 0o644)
	l := openTest(t, vfs.Default(), dir, testConfig(), true)
	expectPrefix(t, l, want, len(want))
	l.Close()
	for _, suf := range []string{DeletedSuffix, CleanedSuffix, SwapSuffix} {
		if m, _ := filepath.Glob(filepath.Join(dir, "*"+suf)); len(m) > 0 {
			t.Fatalf("leftover %v", m)
		}
	}
}

func TestRecoverCompletesSwap(t *testing.T) {
	dir, want := buildLog(t, 60)
	logs := segFiles(t, dir, LogSuffix)
	// A finished swap of segment 1 whose replacement holds the same data:
	// the original must be replaced, not duplicated.
	data, _ := os.ReadFile(logs[1])
	os.WriteFile(logs[1]+SwapSuffix, data, 0o644)
	l := openTest(t, vfs.Default(), dir, testConfig(), false)
	expectPrefix(t, l, want, len(want))
	l.Close()
	if m, _ := filepath.Glob(filepath.Join(dir, "*"+SwapSuffix)); len(m) > 0 {
		t.Fatalf("leftover %v", m)
	}
}

func TestRefuseMalformedCheckpoint(t *testing.T) {
	for _, where := range []string{"root", "partition (old layout)"} {
		dir, _ := buildLog(t, 5)
		at := filepath.Dir(dir)
		if where != "root" {
			at = dir
		}
		os.WriteFile(filepath.Join(at, RecoveryPointFile), []byte("0\n1\nnot a line\n"), 0o644)
		_, err := Open(dir, [16]byte{1, 2, 3}, testConfig(), false, Options{})
		if !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("%s: want ErrBadCheckpoint, got %v", where, err)
		}
	}
}

func TestRefuseOtherTopicID(t *testing.T) {
	dir, _ := buildLog(t, 2)
	_, err := Open(dir, [16]byte{9, 9}, testConfig(), true, Options{Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "topic id") {
		t.Fatalf("opened a partition of another topic id: %v", err)
	}
}
