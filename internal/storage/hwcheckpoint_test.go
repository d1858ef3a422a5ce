package storage

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// replicatedLog opens /d/t-0 on fsys with its own shared-style syncer, lets
// replication decide its high watermark, appends n records in batches of
// 3 (fsynced) and sets the high watermark to hw: the records from hw on
// are an uncommitted tail (the ISR does not hold them yet).
func replicatedLog(t *testing.T, fsys vfs.FS, n int, hw int64) (*Log, *Syncer) {
	t.Helper()
	s := NewSyncer(quiet)
	l, err := Open("/d/t-0", [16]byte{1}, testConfig(), false, Options{FS: fsys, Syncer: s, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(0, nil)
	for i := 0; i < n/3; i++ {
		if _, err := l.Append(mkBatch(t, 3, fmt.Sprint(i), 1), AppendOptions{LeaderEpoch: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(hw, nil)
	return l, s
}

func reopen(t *testing.T, fsys vfs.FS) *Log {
	t.Helper()
	s := NewSyncer(quiet)
	l, err := Open("/d/t-0", [16]byte{1}, testConfig(), false, Options{FS: fsys, Syncer: s, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); s.Close() })
	return l
}

// TestReopenReplicatedKeepsCheckpointedHighWatermark: a replicated log
// reopened after a crash takes the high watermark of the log dir's
// replication-offset-checkpoint (capped by its recovered end), not its own
// log end: the records past it were never committed and a restarted
// replica must not expose them (Kafka's Partition.createLog reads
// replication-offset-checkpoint; UnifiedLog.updateHighWatermark caps it).
// After a clean shutdown the checkpoint holds the high watermark at close.
func TestReopenReplicatedKeepsCheckpointedHighWatermark(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l, s := replicatedLog(t, fsys, 90, 30)
	if err := s.WriteCheckpoints(); err != nil { // a periodic write
		t.Fatal(err)
	}
	l.SetHighWatermark(45, nil) // not yet checkpointed
	img := fsys.Crash()         // kill -9 / power cut now

	l2 := reopen(t, img)
	if l2.LogEndOffset() != 90 {
		t.Fatalf("recovered end %d, want 90", l2.LogEndOffset())
	}
	if hw := l2.HighWatermark(); hw != 30 {
		t.Fatalf("reopened high watermark %d, want the checkpointed 30 (the log end 90 holds an uncommitted tail)", hw)
	}
	if got := readAll(t, l2, 0); len(got) != 10 {
		t.Fatalf("read %d batches after reopen, want the 10 below the high watermark", len(got))
	}

	// Clean shutdown: the checkpoint is written last, at the high
	// watermark of the close.
	if err := l.CloseDeferSync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	l3 := reopen(t, fsys)
	if hw := l3.HighWatermark(); hw != 45 {
		t.Fatalf("high watermark after a clean shutdown %d, want 45", hw)
	}
	data, err := vfs.ReadFile(fsys, "/d/replication-offset-checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "0\n1\nt 0 45\n" {
		t.Fatalf("replication-offset-checkpoint is %q", data)
	}
}

// TestReopenReplicatedWithoutCheckpoint: a replicated log whose log dir has
// no high watermark for it (killed before the first checkpoint, or written
// by a release without the file) starts replication at its log start:
// nothing is exposed until the leader (or the ISR) says it is committed.
func TestReopenReplicatedWithoutCheckpoint(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l, _ := replicatedLog(t, fsys, 90, 30)
	img := fsys.Crash()
	_ = l
	l2 := reopen(t, img)
	hw := l2.StartReplication(nil)
	if hw != 0 || l2.HighWatermark() != 0 {
		t.Fatalf("replication started at %d (published %d), want the log start 0", hw, l2.HighWatermark())
	}
	// From there the replica layer moves it as usual.
	l2.SetHighWatermark(60, nil)
	if l2.HighWatermark() != 60 {
		t.Fatalf("high watermark %d after SetHighWatermark(60)", l2.HighWatermark())
	}
}

// TestUnreplicatedLogUnchanged: a log replication never touched reopens
// with its high watermark at its fsynced end, as before, and writes no
// replication-offset-checkpoint.
func TestUnreplicatedLogUnchanged(t *testing.T) {
	fsys := vfs.NewCrashFS()
	s := NewSyncer(quiet)
	l, err := Open("/d/t-0", [16]byte{1}, testConfig(), false, Options{FS: fsys, Syncer: s, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := l.Append(mkBatch(t, 3, fmt.Sprint(i), 1), AppendOptions{LeaderEpoch: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	img := fsys.Crash()
	l.Close()
	s.Close()
	for _, f := range []vfs.FS{img, fsys} {
		l2 := reopen(t, f)
		if l2.HighWatermark() != 30 {
			t.Fatalf("unreplicated log reopened at high watermark %d, want its fsynced end 30", l2.HighWatermark())
		}
		if _, err := f.Stat(filepath.Join("/d", ReplicationOffsetFile)); err == nil {
			t.Fatal("an unreplicated log dir got a replication-offset-checkpoint")
		}
	}
}

// TestHighWatermarkCheckpointPowerCut: a power cut at every step of a
// checkpoint write (torn or not) never leaves a high watermark above the
// one written before: the file is replaced whole (tmp, fsync, rename, dir
// fsync), so a reopen finds the old value or the new one.
func TestHighWatermarkCheckpointPowerCut(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l, s := replicatedLog(t, fsys, 90, 30)
	if err := s.WriteHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(60, nil)
	write := func() error { return s.WriteHighWatermarks() }
	// Steps of one write.
	steps, err := fsys.Steps(write)
	if err != nil || steps == 0 {
		t.Fatalf("write: %d steps, %v", steps, err)
	}
	for k := 0; k <= steps; k++ {
		for _, torn := range []bool{false, true} {
			l.SetHighWatermark(l.HighWatermark()+1, nil) // a new value for this write
			var img *vfs.CrashFS
			n := 0
			fsys.SetHook(func(string, string) error {
				defer func() { n++ }()
				if n == k {
					if torn {
						img = fsys.CrashTorn(func(u int) int { return u / 2 })
					} else {
						img = fsys.Crash()
					}
					return vfs.ErrInjected
				}
				return nil
			})
			write()
			fsys.SetHook(nil)
			if img == nil {
				img = fsys.Crash()
			}
			l2, s2 := openOn(t, img)
			hw := l2.HighWatermark()
			if hw > l.HighWatermark() || hw < 30 {
				t.Fatalf("step %d (torn %v): reopened high watermark %d outside [30, %d]", k, torn, hw, l.HighWatermark())
			}
			l2.Close()
			s2.Close()
		}
	}
	l.Close()
	s.Close()
}

func openOn(t *testing.T, fsys vfs.FS) (*Log, *Syncer) {
	t.Helper()
	s := NewSyncer(quiet)
	l, err := Open("/d/t-0", [16]byte{1}, testConfig(), false, Options{FS: fsys, Syncer: s, Logger: quiet})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	return l, s
}

// TestReopenedReplicatedLogAloneAgain: a log the checkpoint lists whose
// partition has this replica only now (reassigned while the broker was
// down) returns to its own fsynced end with UnsetReplicated (the broker
// does it for a single-replica partition), and leaves the file at the next
// write; StartReplication after that keeps the high watermark it had.
func TestReopenedReplicatedLogAloneAgain(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l, s := replicatedLog(t, fsys, 90, 30)
	if err := s.WriteHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	img := fsys.Crash()
	l.Close()
	s.Close()
	l2, s2 := openOn(t, img)
	defer func() { l2.Close(); s2.Close() }()
	if !l2.Replicated() || l2.HighWatermark() != 30 {
		t.Fatalf("reopened: replicated %v, high watermark %d", l2.Replicated(), l2.HighWatermark())
	}
	l2.UnsetReplicated()
	if l2.Replicated() || l2.HighWatermark() != 90 {
		t.Fatalf("alone: replicated %v, high watermark %d, want 90", l2.Replicated(), l2.HighWatermark())
	}
	if err := s2.WriteHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	data, err := vfs.ReadFile(img, "/d/"+ReplicationOffsetFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "0\n0\n" {
		t.Fatalf("replication-offset-checkpoint still %q", data)
	}
	if hw := l2.StartReplication(nil); hw != 90 {
		t.Fatalf("replicated again from %d, want the 90 it decided alone", hw)
	}
}
