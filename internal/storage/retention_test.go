package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/vfs"
)

func TestRetentionKeepsHeldFilesReadable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ret-0")
	cfg := testConfig()
	cfg.FileDeleteDelay = time.Hour
	cfg.RetentionMs = 1000
	l := openTest(t, vfs.Default(), dir, cfg, false)
	for i := 0; i < 60; i++ {
		mustAppend(t, l, mkBatch(t, 2, "r", 1000+int64(i))) // timestamps long ago
	}
	res, err := l.Read(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	n, err := l.ApplyRetention(time.Now())
	if err != nil || n == 0 {
		t.Fatalf("retention deleted %d: %v", n, err)
	}
	if l.LogStartOffset() != l.LogEndOffset() {
		t.Fatalf("log start %d, want everything gone (leo %d)", l.LogStartOffset(), l.LogEndOffset())
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.log.deleted")); len(m) == 0 {
		t.Fatal("no .deleted files during the delay")
	}
	c := res.Chunks[0]
	buf := make([]byte, c.Len)
	if _, err := c.File.File().ReadAt(buf, c.Pos); err != nil {
		t.Fatalf("held file unreadable after deletion: %v", err)
	}
	res.Release()
	if _, err := l.Read(0, 100, true); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("read below new log start: %v", err)
	}
	// The log keeps accepting writes at the same offsets.
	leo := l.LogEndOffset()
	if r := mustAppend(t, l, mkBatch(t, 1, "after", time.Now().UnixMilli())); r.BaseOffset != leo {
		t.Fatalf("append after retention at %d, want %d", r.BaseOffset, leo)
	}
	l.Close() // pending deletions happen now
	if m, _ := filepath.Glob(filepath.Join(dir, "*.deleted")); len(m) != 0 {
		t.Fatalf("deleted files left after close: %v", m)
	}
	l = openTest(t, vfs.Default(), dir, cfg, false)
	defer l.Close()
	if l.LogStartOffset() != leo || l.LogEndOffset() != leo+1 {
		t.Fatalf("after restart: start %d end %d, want %d %d", l.LogStartOffset(), l.LogEndOffset(), leo, leo+1)
	}
}

func TestRetentionBytesAndDeleteRecordsPersist(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rb-0")
	cfg := testConfig()
	cfg.RetentionBytes = 5000
	l := openTest(t, vfs.Default(), dir, cfg, false)
	for i := 0; i < 200; i++ {
		mustAppend(t, l, mkBatch(t, 2, "b", time.Now().UnixMilli()))
	}
	if _, err := l.ApplyRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if l.Size() > 5000+cfg.SegmentBytes {
		t.Fatalf("size %d after retention.bytes 5000", l.Size())
	}
	ls, err := l.DeleteRecords(l.LogStartOffset() + 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecords(l.HighWatermark() + 1); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete past hw: %v", err)
	}
	// A crash right after: the new log start survives (checkpoint).
	l.Close()
	os.Remove(filepath.Join(filepath.Dir(dir), RecoveryPointFile))
	l = openTest(t, vfs.Default(), dir, cfg, false)
	defer l.Close()
	if l.LogStartOffset() != ls {
		t.Fatalf("log start %d after restart, want %d", l.LogStartOffset(), ls)
	}
}
