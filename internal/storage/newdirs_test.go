package storage

import (
	"strings"
	"sync"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// TestSyncNewDirs: a new, empty log whose leader epoch was assigned gets
// its directory made durable by one SyncFS (epoch file written in place),
// and its first durable append then fsyncs its segment only; a log with
// no epoch assigned, or one that changed between the epoch write and the
// SyncFS (an append), is left to its own first sync.
func TestSyncNewDirs(t *testing.T) {
	fsys := vfs.NewCrashFS()
	s := NewSyncer(quiet)
	defer s.Close()
	open := func(dir string) *Log {
		l, err := Open(dir, [16]byte{1, 2, 3}, testConfig(), false, Options{FS: fsys, Syncer: s, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	ready, noEpoch, raced := open("/d/ready-0"), open("/d/noepoch-0"), open("/d/raced-0")
	for i, err := range AssignEpochs([]*Log{ready, raced}, []int32{3, 3}) {
		if err != nil {
			t.Fatalf("assign %d: %v", i, err)
		}
	}
	// raced: its first append lands between the epoch write and the
	// SyncFS's end.
	st, ok := raced.prepareNewDir()
	if !ok {
		t.Fatal("raced not eligible")
	}
	rres, err := raced.Append(mkBatch(t, 1, "r", 1), AppendOptions{LeaderEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	if raced.commitNewDir(st) {
		t.Fatal("a log appended to between the epoch write and the SyncFS counted its directory as synced")
	}
	if err := raced.WaitDurable(t.Context(), rres.LastOffset+1); err != nil {
		t.Fatal(err)
	}

	// reassigned: a newer epoch between the epoch write and the SyncFS's
	// end (the file written is not the history any more).
	reassigned := open("/d/reassigned-0")
	AssignEpochs([]*Log{reassigned}, []int32{3})
	if st, ok = reassigned.prepareNewDir(); !ok {
		t.Fatal("reassigned not eligible")
	}
	if errs := AssignEpochs([]*Log{reassigned}, []int32{5}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if reassigned.commitNewDir(st) {
		t.Fatal("a log given a newer epoch between the epoch write and the SyncFS counted its directory as synced")
	}

	var mu sync.Mutex
	var ops []string
	fsys.SetHook(func(op, name string) error {
		if op == "sync" || op == "syncdir" || op == "syncfs" {
			mu.Lock()
			ops = append(ops, op+" "+name)
			mu.Unlock()
		}
		return nil
	})
	if n := SyncNewDirs([]*Log{ready, noEpoch}); n != 1 {
		t.Fatalf("SyncNewDirs made %d directories durable, want 1 (ready)", n)
	}
	if len(ops) != 1 || !strings.HasPrefix(ops[0], "syncfs ") {
		t.Fatalf("SyncNewDirs: %v, want one syncfs", ops)
	}
	mu.Lock()
	ops = nil
	mu.Unlock()
	res, err := ready.Append(mkBatch(t, 2, "a", 1), AppendOptions{LeaderEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := ready.WaitDurable(t.Context(), res.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := ops
	mu.Unlock()
	if len(got) != 1 || !strings.HasPrefix(got[0], "sync /d/ready-0/") || !strings.HasSuffix(got[0], LogSuffix) {
		t.Fatalf("first durable append after SyncNewDirs: %v, want its segment's fsync only", got)
	}
	fsys.SetHook(nil)
	// noEpoch syncs its directory with its first records (raced did):
	// a power cut after those are durable keeps them.
	for _, l := range []*Log{noEpoch, raced} {
		res, err := l.Append(mkBatch(t, 1, "b", 2), AppendOptions{LeaderEpoch: 3})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(t.Context(), res.LastOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	img := fsys.Crash()
	for dir, want := range map[string]int64{"/d/ready-0": 2, "/d/noepoch-0": 1, "/d/raced-0": 2} {
		r := openTest(t, img, dir, testConfig(), false)
		if got := r.LogEndOffset(); got != want {
			t.Fatalf("%s after a power cut: log end %d, want %d", dir, got, want)
		}
		if e := r.LeaderEpochs(); len(e) != 1 || e[0] != (EpochEntry{3, 0}) {
			t.Fatalf("%s after a power cut: epochs %v, want [{3 0}]", dir, e)
		}
		r.Close()
	}
}
