package storage

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// opCounter counts the mutating file system operations CrashFS reports.
type opCounter struct {
	mu  sync.Mutex
	ops map[string]int
}

func countOps(fsys *vfs.CrashFS) *opCounter {
	c := &opCounter{ops: map[string]int{}}
	fsys.SetHook(func(op, _ string) error {
		c.mu.Lock()
		c.ops[op]++
		c.mu.Unlock()
		return nil
	})
	return c
}

func (c *opCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.ops
	c.ops = map[string]int{}
	return out
}

// TestShutdownDeferSync: a log dir of many partitions closes with
// CloseDeferSync and Syncer.Close. Partitions that were only opened cost
// no write at all; the written ones write their snapshot and indexes
// without fsync; one SyncFS makes the dir durable and the recovery point
// checkpoint is written once, after it. A power cut before Syncer.Close
// recovers everything that was acknowledged; after it, a clean start
// needs no recovery and finds every partition at its end.
func TestShutdownDeferSync(t *testing.T) {
	const parts = 40
	cfg := testConfig()
	fsys := vfs.NewCrashFS()
	open := func(fsys vfs.FS, s *Syncer, i int, clean bool) *Log {
		l, err := Open(fmt.Sprintf("/d/t-%d", i), [16]byte{7}, cfg, clean, Options{FS: fsys, Syncer: s, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	s := NewSyncer(quiet)
	logs := make([]*Log, parts)
	for i := range logs {
		logs[i] = open(fsys, s, i, false)
	}
	for _, l := range logs {
		l.Close()
	}
	s.Close()

	// Reopen cleanly; write to every fourth partition (acks=all).
	s = NewSyncer(quiet)
	for i := range logs {
		logs[i] = open(fsys, s, i, true)
	}
	ends := map[int]int64{}
	for i := 0; i < parts; i += 4 {
		for range 3 {
			res := mustAppend(t, logs[i], mkBatch(t, 3, fmt.Sprint("p", i), 1))
			if err := logs[i].WaitDurable(t.Context(), res.LastOffset+1); err != nil {
				t.Fatal(err)
			}
			ends[i] = res.LastOffset + 1
		}
	}
	ops := countOps(fsys)
	for i, l := range logs {
		if i%4 != 0 {
			if err := l.CloseDeferSync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := ops.take(); len(got) != 0 {
		t.Fatalf("closing %d untouched partitions did %v, want nothing", parts-len(ends), got)
	}
	for i := 0; i < parts; i += 4 {
		if err := logs[i].CloseDeferSync(); err != nil {
			t.Fatal(err)
		}
	}
	if got := ops.take(); got["sync"] != 0 || got["syncdir"] != 0 || got["syncfs"] != 0 {
		t.Fatalf("closing written partitions fsynced: %v", got)
	}
	// A power cut now: no clean start, every acknowledged batch is back.
	img := fsys.Crash()
	s2 := NewSyncer(quiet)
	for i := 0; i < parts; i++ {
		l := open(img, s2, i, false)
		if l.LogEndOffset() != ends[i] {
			t.Fatalf("partition %d after a power cut during shutdown: end %d, want %d", i, l.LogEndOffset(), ends[i])
		}
		l.Close()
	}
	s2.Close()

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := ops.take()
	// Two syncfs: the written partitions' index files were written to
	// .tmp files, renamed after the first and made durable by the second
	// (closeActiveFiles); the 2 x 3 written partitions' .index and
	// .timeindex are the renames beyond the checkpoint files'.
	if got["syncfs"] != 2 || got["sync"] > 2 || got["rename"] > 2+2*len(ends) {
		t.Fatalf("Syncer.Close did %v, want two syncfs, %d index renames and the checkpoint files", got, 2*len(ends))
	}
	fsys.SetHook(nil)
	img = fsys.Crash()
	rp := map[string]int64{}
	ents, err := ReadCheckpoint(img, "/d/"+RecoveryPointFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		rp[fmt.Sprintf("%s-%d", e.Topic, e.Partition)] = e.Offset
	}
	s3 := NewSyncer(quiet)
	for i := 0; i < parts; i++ {
		if rp[fmt.Sprintf("t-%d", i)] != ends[i] {
			t.Fatalf("recovery point of t-%d is %d, want its end %d", i, rp[fmt.Sprintf("t-%d", i)], ends[i])
		}
		l := open(img, s3, i, true)
		batches := 0
		if i%4 == 0 {
			batches = 3
		}
		if l.LogEndOffset() != ends[i] || len(readAll(t, l, 0)) != batches {
			t.Fatalf("partition %d after a clean shutdown: end %d, want %d", i, l.LogEndOffset(), ends[i])
		}
		l.Close()
	}
	s3.Close()
}

// TestRecoveryPastRecoveryPointOnly: after a crash, a partition with
// nothing past its recovery point opens without a single write or fsync;
// one with acknowledged bytes past it gets them checked and fsynced, and
// keeps them.
func TestRecoveryPastRecoveryPointOnly(t *testing.T) {
	const parts = 20
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	fsys := vfs.NewCrashFS()
	s := NewSyncer(quiet)
	open := func(fsys vfs.FS, s *Syncer, i int) *Log {
		l, err := Open(fmt.Sprintf("/d/t-%d", i), [16]byte{7}, cfg, false, Options{FS: fsys, Syncer: s, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ack := func(l *Log, tag string) {
		res := mustAppend(t, l, mkBatch(t, 4, tag, 1))
		if err := l.WaitDurable(t.Context(), res.LastOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	logs := make([]*Log, parts)
	for i := range logs {
		logs[i] = open(fsys, s, i)
		for j := range 5 {
			ack(logs[i], fmt.Sprint("a", j))
		}
	}
	if err := s.WriteCheckpoints(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		ack(logs[i], "past")
	}
	img := fsys.Crash()

	var mu sync.Mutex
	ops := map[string]int{}
	img.SetHook(func(op, name string) error {
		mu.Lock()
		ops[op+" "+name]++
		mu.Unlock()
		return nil
	})
	s2 := NewSyncer(quiet)
	for i := range parts {
		l := open(img, s2, i)
		want := int64(20)
		if i < 5 {
			want = 24
		}
		if l.LogEndOffset() != want || l.HighWatermark() != want || len(readAll(t, l, 0)) != int(want/4) {
			t.Fatalf("partition %d after the crash: end %d, high watermark %d, want %d", i, l.LogEndOffset(), l.HighWatermark(), want)
		}
	}
	img.SetHook(nil)
	for op := range ops {
		var i int
		if _, err := fmt.Sscanf(op[strings.Index(op, "t-"):], "t-%d", &i); err != nil || i >= 5 {
			t.Errorf("partition without bytes past its recovery point: %s", op)
		}
	}
	for i := range 5 {
		if ops[fmt.Sprintf("sync /d/t-%d/%s", i, FileName(0, LogSuffix))] != 1 {
			t.Errorf("partition %d: its bytes past the recovery point were not fsynced once: %v", i, ops)
		}
	}
}
