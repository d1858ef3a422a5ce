package storage

import (
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

func rootEntries(t *testing.T, fsys vfs.FS, name string) map[string]int64 {
	t.Helper()
	ents, err := ReadCheckpoint(fsys, "/d/"+name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range ents {
		out[e.Topic+"-"+string(rune('0'+e.Partition))] = e.Offset
	}
	return out
}

// TestLogDirCheckpoints: the recovery point and log start offset of every
// partition of a log dir live in one Kafka checkpoint file each at the
// root of the dir; the log start survives a power cut right after
// DeleteRecords; nothing is left inside partition directories.
func TestLogDirCheckpoints(t *testing.T) {
	fsys := vfs.NewCrashFS()
	syncer := NewSyncer(quiet)
	cfg := testConfig()
	open := func(fsys vfs.FS, s *Syncer, dir string, clean bool) *Log {
		l, err := Open(dir, [16]byte{1}, cfg, clean, Options{FS: fsys, Syncer: s, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := open(fsys, syncer, "/d/a-0", false), open(fsys, syncer, "/d/b-3", false)
	for i := 0; i < 120; i++ {
		mustAppend(t, a, mkBatch(t, 2, "a", 1))
		if i%2 == 0 {
			mustAppend(t, b, mkBatch(t, 2, "b", 1))
		}
	}
	if _, err := a.DeleteRecords(31); err != nil {
		t.Fatal(err)
	}
	img := fsys.Crash()
	if got := rootEntries(t, img, LogStartOffsetFile); got["a-0"] != 31 {
		t.Fatalf("log start not at the root after DeleteRecords: %v", got)
	}
	rp := rootEntries(t, img, RecoveryPointFile)
	if rp["a-0"] <= 0 || rp["b-3"] <= 0 {
		t.Fatalf("recovery points after rolls: %v", rp)
	}
	s2 := NewSyncer(quiet)
	a2 := open(img, s2, "/d/a-0", false)
	if a2.LogStartOffset() != 31 {
		t.Fatalf("log start %d after power cut, want 31", a2.LogStartOffset())
	}
	a2.Close()
	s2.Close()

	aLEO, bLEO := a.LogEndOffset(), b.LogEndOffset()
	a.Close()
	b.Close()
	if err := syncer.Close(); err != nil {
		t.Fatal(err)
	}
	rp = rootEntries(t, fsys, RecoveryPointFile)
	if rp["a-0"] != aLEO || rp["b-3"] != bLEO || len(rp) != 2 {
		t.Fatalf("recovery points after clean close: %v, want a-0 %d b-3 %d", rp, aLEO, bLEO)
	}
	for _, f := range fsys.Files() {
		if f != "/d/"+RecoveryPointFile && f != "/d/"+LogStartOffsetFile && (hasSuffix(f, RecoveryPointFile) || hasSuffix(f, LogStartOffsetFile) || hasSuffix(f, TmpSuffix)) {
			t.Fatalf("unexpected file %s", f)
		}
	}
	// Deleting a partition drops its entries.
	s3 := NewSyncer(quiet)
	b3 := open(fsys, s3, "/d/b-3", true)
	if err := b3.Delete(); err != nil {
		t.Fatal(err)
	}
	s3.Close()
	if _, ok := rootEntries(t, fsys, RecoveryPointFile)["b-3"]; ok {
		t.Fatal("entry of a deleted partition kept")
	}
	// Stale entries never apply to a new partition directory.
	WriteCheckpoint(fsys, "/d/"+LogStartOffsetFile, []CheckpointEntry{{Topic: "n", Partition: 0, Offset: 500}, {Topic: "a", Partition: 0, Offset: 31}})
	s4 := NewSyncer(quiet)
	n := open(fsys, s4, "/d/n-0", false)
	if n.LogStartOffset() != 0 || n.LogEndOffset() != 0 {
		t.Fatalf("new partition took a stale entry: start %d end %d", n.LogStartOffset(), n.LogEndOffset())
	}
	n.Close()
	s4.Close()
}

// TestLegacyPartitionCheckpoints: checkpoint files inside a partition
// directory (older Strata) are read once, moved to the root and deleted.
func TestLegacyPartitionCheckpoints(t *testing.T) {
	fsys := vfs.NewCrashFS()
	cfg := testConfig()
	l := openTest(t, fsys, "/d/c-0", cfg, false)
	for i := 0; i < 60; i++ {
		mustAppend(t, l, mkBatch(t, 2, "c", 1))
	}
	l.Close()
	fsys.Remove("/d/" + RecoveryPointFile)
	fsys.Remove("/d/" + LogStartOffsetFile)
	WriteCheckpoint(fsys, "/d/c-0/"+RecoveryPointFile, []CheckpointEntry{{Topic: "c", Partition: 0, Offset: 0}})
	WriteCheckpoint(fsys, "/d/c-0/"+LogStartOffsetFile, []CheckpointEntry{{Topic: "c", Partition: 0, Offset: 12}})
	l = openTest(t, fsys, "/d/c-0", cfg, false)
	if l.LogStartOffset() != 12 || l.LogEndOffset() != 120 {
		t.Fatalf("start %d end %d, want 12 120", l.LogStartOffset(), l.LogEndOffset())
	}
	for _, name := range []string{RecoveryPointFile, LogStartOffsetFile} {
		if _, err := fsys.Stat("/d/c-0/" + name); err == nil {
			t.Fatalf("old %s not removed", name)
		}
	}
	if got := rootEntries(t, fsys, LogStartOffsetFile); got["c-0"] != 12 {
		t.Fatalf("root log start %v", got)
	}
	l.Close()
	l = openTest(t, fsys.Crash(), "/d/c-0", cfg, false)
	if l.LogStartOffset() != 12 {
		t.Fatalf("start %d after power cut", l.LogStartOffset())
	}
	l.Close()
}
