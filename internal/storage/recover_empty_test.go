package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// TestRecoveredEmptySegmentIgnoresStaleIndexes: a power cut can leave
// index files naming batches the .log lost (found by a random-life soak of
// recovery on CrashFS: an index rebuilt from the page cache of a .log not
// yet fsynced, then cut with entries first). When recovery leaves that
// segment empty, its index files are stale: the open must not load them
// later (an idle log drops its in-memory indexes and reloads them from
// disk, idleWriter), or a time lookup answers an offset the log does not
// hold, and the index entries of the batches appended next would follow
// entries of offsets they reuse. Kafka's LogSegment.recover resets the
// indexes of the segments it recovers.
func TestRecoveredEmptySegmentIgnoresStaleIndexes(t *testing.T) {
	cfg := testConfig()
	// No offset index entry for so few bytes; the close writes the time
	// index's final entry.
	cfg.IndexIntervalBytes = 1 << 20
	fsys := vfs.NewCrashFS()
	dir := "/d/empty-0"
	l, err := Open(dir, [16]byte{3}, cfg, false, Options{FS: fsys, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := l.Append(mkBatch(t, 3, fmt.Sprint("lost", i), int64(5000+100*i)), AppendOptions{LeaderEpoch: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The crash image: the index files name the four batches, the .log
	// lost them.
	img := fsys.Crash()
	seg := dir + "/" + fmt.Sprintf("%020d", 0)
	if data, err := vfs.ReadFile(img, seg+TimeIndexSuffix); err != nil || len(data) == 0 {
		t.Fatalf("the time index should name the lost batches: %d bytes, %v", len(data), err)
	}
	f, err := img.OpenFile(seg+LogSuffix, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := img.Remove(filepath.Join(filepath.Dir(dir), RecoveryPointFile)); err != nil {
		t.Fatal(err)
	}

	l, err = Open(dir, [16]byte{3}, cfg, false, Options{FS: img, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.Close() }()
	if l.LogEndOffset() != 0 {
		t.Fatalf("log end %d, want 0 (nothing was fsynced)", l.LogEndOffset())
	}
	if off, ts, found, err := l.OffsetForTimestamp(5000); found || err != nil {
		t.Fatalf("offset for timestamp 5000 in an empty log: %d (timestamp %d), found %v, %v", off, ts, found, err)
	}
	// New batches, smaller and at other timestamps: every index entry
	// names one of them, and every offset reads from its batch.
	for i := range 6 {
		if _, err := l.Append(mkBatch(t, 1, fmt.Sprint("new", i), int64(1000+10*i)), AppendOptions{LeaderEpoch: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	checkSegmentIndexes(t, l)
	for o := int64(0); o < 6; o++ {
		res, err := l.Read(o, 1, true)
		if err != nil || len(res.Chunks) == 0 {
			t.Fatalf("read %d: %v", o, err)
		}
		res.Release()
	}
	if off, ts, found, err := l.OffsetForTimestamp(1025); !found || err != nil || off != 3 || ts != 1030 {
		t.Fatalf("offset for timestamp 1025: %d (timestamp %d), found %v, %v; want 3 (1030)", off, ts, found, err)
	}
	if off, ts, err := l.MaxTimestamp(); err != nil || off != 5 || ts != 1050 {
		t.Fatalf("max timestamp at %d: %d, %v; want 1050 at 5", off, ts, err)
	}
}
