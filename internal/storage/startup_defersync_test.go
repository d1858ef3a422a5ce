package storage

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// killedJournalDir returns the file system of a log dir of parts
// partitions with a journal, as a kill -9 left it (Clone: the page cache
// survives) after rounds of acknowledged appends that went through the
// journal: every partition is past its recovery point and the journal
// holds their records. It also returns what was acknowledged.
func killedJournalDir(t *testing.T, parts, rounds int) (*vfs.CrashFS, map[int][]ackedBatch) {
	t.Helper()
	fsys := vfs.NewCrashFS()
	s, logs := openJournalDir(t, fsys, parts, testConfig(), 1<<20, false)
	acked := map[int][]ackedBatch{}
	for r := range rounds {
		s.roundMu.Lock()
		ress := make([]AppendResult, parts)
		bs := make([][]byte, parts)
		for p, l := range logs {
			bs[p] = mkBatch(t, 2, fmt.Sprint("r", r), 1)
			res, err := l.Append(bs[p], AppendOptions{LeaderEpoch: 1})
			if err != nil {
				t.Fatal(err)
			}
			ress[p] = res
		}
		s.roundMu.Unlock()
		for p, l := range logs {
			if err := l.WaitDurable(context.Background(), ress[p].LastOffset+1); err != nil {
				t.Fatal(err)
			}
			acked[p] = append(acked[p], ackedBatch{ress[p].BaseOffset, bs[p]})
		}
	}
	if s.JournalStats().Rounds == 0 {
		t.Fatalf("the rounds did not use the journal: %+v", s.JournalStats())
	}
	img := fsys.Clone()
	s.roundMu.Lock() // the killed process's syncer does nothing more
	t.Cleanup(s.roundMu.Unlock)
	return img, acked
}

// openDeferred opens the log dir the way the broker starts (Options.
// DeferSync on every log, then StartJournal), stopping at the first error
// (a step failed by a power cut).
func openDeferred(fsys vfs.FS, parts int) (*Syncer, []*Log, error) {
	s := NewSyncer(quiet)
	if err := fsys.MkdirAll("/data", 0o755); err != nil {
		return s, nil, err
	}
	if err := s.OpenJournal(fsys, "/data", 1<<20); err != nil {
		return s, nil, err
	}
	logs := make([]*Log, 0, parts)
	for i := range parts {
		l, err := Open(fmt.Sprintf("/data/j-%d", i), [16]byte{9, byte(i)}, testConfig(), false,
			Options{FS: fsys, Syncer: s, Logger: quiet, DeferSync: true})
		if err != nil {
			return s, logs, err
		}
		logs = append(logs, l)
	}
	return s, logs, s.StartJournal()
}

// TestStartupDeferSyncCrashAtEveryStep: a broker restarting after kill -9
// (and, second case, after a power cut, where the journal replays into the
// segments) opens its logs with DeferSync, makes the dir durable with one
// SyncFS and voids the journal, then runs a first new round of acked
// appends. A power cut before each mutating step of all that loses
// nothing acknowledged, before the kill or in the new round: the recovered
// bytes are durable before the journal that could replay them is voided.
func TestStartupDeferSyncCrashAtEveryStep(t *testing.T) {
	const parts = 6
	base, acked0 := killedJournalDir(t, parts, 3)
	for _, c := range []struct {
		name string
		img  func() *vfs.CrashFS
	}{
		{"kill-9", func() *vfs.CrashFS { return base.Clone() }},
		{"power-cut", func() *vfs.CrashFS { return base.Crash() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(crashAt int) (img *vfs.CrashFS, acked map[int][]ackedBatch, steps int) {
				fsys := c.img()
				acked = snapshotAcked(acked0)
				cut := cutPowerAt(fsys, crashAt, (*vfs.CrashFS).Crash)
				s, logs, err := openDeferred(fsys, parts)
				if err == nil {
					// The first new round.
					appendRound(t, s, logs, "new", epoch1, cut, acked)
				}
				fsys.SetHook(nil)
				if crashAt < 0 && err != nil {
					t.Fatalf("start without a power cut: %v", err)
				}
				for _, l := range logs {
					l.Close()
				}
				if s != nil {
					s.Close()
				}
				return cut.img, acked, cut.n
			}
			_, _, steps := run(-1)
			for k := range steps {
				img, acked, _ := run(k)
				if img == nil {
					continue
				}
				s2, logs2, err := openDeferred(img, parts)
				if err != nil {
					t.Fatalf("start after a power cut before step %d: %v", k, err)
				}
				checkAcked(t, fmt.Sprintf("power cut before step %d", k), logs2, acked)
				closeAll(t, s2, logs2)
			}
			t.Logf("%d steps", steps)
		})
	}
}

// TestStartupDeferSyncOps: after kill -9 with every partition past its
// recovery point, opening with DeferSync fsyncs nothing per partition
// (no segment fsync, no directory fsync, no SyncFS); StartJournal does one
// SyncFS, writes the recovery-point checkpoint and then voids the
// journal. Without DeferSync (a log opened at
// runtime) each recovered partition still fsyncs its own segment.
func TestStartupDeferSyncOps(t *testing.T) {
	const parts = 20
	base, acked := killedJournalDir(t, parts, 2)

	fsys := base.Clone()
	var mu sync.Mutex
	ops := map[string]int{}
	journalOps := map[string]int{}
	fsys.SetHook(func(op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(name, "journal") {
			journalOps[op]++
		} else {
			ops[op]++
		}
		return nil
	})
	take := func() (map[string]int, map[string]int) {
		mu.Lock()
		defer mu.Unlock()
		o, j := ops, journalOps
		ops, journalOps = map[string]int{}, map[string]int{}
		return o, j
	}
	s := NewSyncer(quiet)
	if err := s.OpenJournal(fsys, "/data", 1<<20); err != nil {
		t.Fatal(err)
	}
	logs := make([]*Log, parts)
	for i := range logs {
		l, err := Open(fmt.Sprintf("/data/j-%d", i), [16]byte{9, byte(i)}, testConfig(), false,
			Options{FS: fsys, Syncer: s, Logger: quiet, DeferSync: true})
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	got, _ := take()
	if got["sync"] != 0 || got["syncdir"] != 0 || got["syncfs"] != 0 {
		t.Fatalf("opening %d recovered partitions with DeferSync fsynced: %v", parts, got)
	}
	if err := s.StartJournal(); err != nil {
		t.Fatal(err)
	}
	got, jgot := take()
	// One syncfs, and one fdatasync: the recovery-point checkpoint file
	// written with the recovered points (none per partition).
	if got["syncfs"] != 1 || got["sync"] > 1 {
		t.Fatalf("StartJournal did %v (journal %v), want one syncfs before the journal's void and the checkpoint file's fsync", got, jgot)
	}
	t.Logf("open: deferred; StartJournal: %v, journal %v", got, jgot)
	checkAcked(t, "after a deferred start", logs, acked)
	closeAll(t, s, logs)

	// The same open without DeferSync: one segment fsync per partition.
	fsys = base.Clone()
	n, err := fsys.Steps(func() error {
		s := NewSyncer(quiet)
		if err := s.OpenJournal(fsys, "/data", 1<<20); err != nil {
			return err
		}
		syncs := 0
		fsys.SetHook(func(op, _ string) error {
			if op == "sync" {
				syncs++
			}
			return nil
		})
		for i := range parts {
			l, err := Open(fmt.Sprintf("/data/j-%d", i), [16]byte{9, byte(i)}, testConfig(), false,
				Options{FS: fsys, Syncer: s, Logger: quiet})
			if err != nil {
				return err
			}
			defer l.Close()
		}
		if syncs < parts {
			return fmt.Errorf("opening %d recovered partitions at runtime did %d segment fsyncs, want one each", parts, syncs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = n
}

// TestStartupWritesRecoveredPoints: the start after a kill -9 writes the
// recovery points its recovery moved to the recovery-point checkpoint
// file (StartJournal), so a second kill -9 soon after (a crash loop,
// before any periodic checkpoint) leaves nothing past the recovery
// points: the next open recovers no byte and fsyncs no segment, even
// without DeferSync.
func TestStartupWritesRecoveredPoints(t *testing.T) {
	const parts = 8
	base, acked := killedJournalDir(t, parts, 3)
	fsys := base.Clone()
	s, logs, err := openDeferred(fsys, parts)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := ReadCheckpoint(fsys, "/data/"+RecoveryPointFile)
	if err != nil {
		t.Fatal(err)
	}
	rps := map[string]int64{}
	for _, e := range ents {
		rps[fmt.Sprintf("%s-%d", e.Topic, e.Partition)] = e.Offset
	}
	for i, l := range logs {
		if rp, ok := rps[fmt.Sprintf("j-%d", i)]; !ok || rp != l.LogEndOffset() {
			t.Fatalf("partition %d: recovery point on disk %d (listed %v) after the recovering start, want its end %d", i, rp, ok, l.LogEndOffset())
		}
	}
	killed := fsys.Clone() // the second kill -9, before any periodic checkpoint
	for _, l := range logs {
		l.Close()
	}
	s.Close()

	syncs := 0
	var mu sync.Mutex
	killed.SetHook(func(op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		if op == "sync" && strings.HasSuffix(name, LogSuffix) {
			syncs++
		}
		return nil
	})
	s2, logs2 := openJournalDir(t, killed, parts, testConfig(), 1<<20, false)
	killed.SetHook(nil)
	if syncs != 0 {
		t.Fatalf("the open after a second kill -9 fsynced %d segments: it found bytes past the recovery points the first start recovered", syncs)
	}
	checkAcked(t, "after the second kill -9", logs2, acked)
	closeAll(t, s2, logs2)
}
