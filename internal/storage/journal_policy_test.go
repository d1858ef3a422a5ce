package storage

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/vfs"
)

// journalFiles lists the journal files present under /data.
func journalFiles(t testing.TB, fsys vfs.FS) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for i := range 2 {
		if st, err := fsys.Stat(journalPath("/data", i)); err == nil {
			out[st.Name()] = st.Size()
		}
	}
	return out
}

// journalRound appends one batch to every log while rounds are held back,
// so the next round spans all of them, and waits until each is durable.
func journalRound(t *testing.T, s *Syncer, logs []*Log, tag string, acked map[int][]ackedBatch) {
	t.Helper()
	s.roundMu.Lock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, l := range logs {
		b := mkBatch(t, 2, fmt.Sprintf("%s-%d", tag, i), 1)
		res, err := l.Append(b, AppendOptions{LeaderEpoch: 1})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			acked[i] = append(acked[i], ackedBatch{res.BaseOffset, b})
			mu.Unlock()
		}()
	}
	s.roundMu.Unlock()
	wg.Wait()
}

// openJournalDir opens n partitions "/data/j-<i>" of one log dir with a
// syncer using a journal of at most maxSize bytes per file, recovering
// them (and replaying the journal) unless clean, then starts the journal,
// without preparing its files (journalDir does).
func openJournalDir(t testing.TB, fsys vfs.FS, n int, cfg Config, maxSize int64, clean bool) (*Syncer, []*Log) {
	t.Helper()
	if err := fsys.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	s := NewSyncer(quiet)
	if err := s.OpenJournal(fsys, "/data", maxSize); err != nil {
		t.Fatal(err)
	}
	logs := make([]*Log, n)
	for i := range logs {
		l, err := Open(fmt.Sprintf("/data/j-%d", i), [16]byte{9, byte(i)}, cfg, clean, Options{FS: fsys, Syncer: s, Logger: quiet})
		if err != nil {
			t.Fatalf("open partition %d: %v", i, err)
		}
		logs[i] = l
	}
	if err := s.StartJournal(); err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// TestJournalLazyAndSizedToDisk: opening a log dir creates no journal
// file; the first round over many partitions creates both, each at most
// 1/16 of the free space (a 64 MiB disk gets 4 MiB files, not 8 MiB);
// on a disk with too little room none is created and rounds fsync the
// segments directly.
func TestJournalLazyAndSizedToDisk(t *testing.T) {
	for _, tc := range []struct {
		free int64
		want int64 // file size, 0 = no journal
	}{
		{-1, 8 << 20},       // free space not known: as configured
		{64 << 20, 4 << 20}, // a small disk: 1/16 of it each
		{8 << 20, 0},        // too small: 512 KiB would be under 1 MiB
		{10 << 30, 8 << 20},
	} {
		t.Run(fmt.Sprint(tc.free), func(t *testing.T) {
			fsys := vfs.NewCrashFS()
			fsys.SetFreeSpace(tc.free)
			s, logs := openJournalDir(t, fsys, 8, testConfig(), 8<<20, false)
			if f := journalFiles(t, fsys); len(f) != 0 {
				t.Fatalf("journal files at open: %v", f)
			}
			acked := map[int][]ackedBatch{}
			journalRound(t, s, logs, "a", acked) // triggers the creation
			s.jrnl.wait()
			journalRound(t, s, logs, "b", acked)
			st := s.JournalStats()
			files := journalFiles(t, fsys)
			if tc.want == 0 {
				if len(files) != 0 || st.Created != 0 || st.Rounds != 0 {
					t.Fatalf("no room: files %v, stats %+v", files, st)
				}
			} else {
				for _, size := range files {
					if size != tc.want {
						t.Fatalf("journal files %v, want %d bytes each", files, tc.want)
					}
				}
				if len(files) != 2 || st.FileBytes != tc.want || st.Rounds == 0 {
					t.Fatalf("files %v, stats %+v", files, st)
				}
			}
			checkAcked(t, "before close", logs, acked)
			closeAll(t, s, logs)
			if f := journalFiles(t, fsys); len(f) != 0 {
				t.Fatalf("journal files after a clean shutdown: %v", f)
			}
		})
	}
}

// TestJournalReleasedWhenIdle: files unused for journalIdleRelease are
// removed after the bytes they held are made durable in their segments (a
// power cut right after loses nothing acknowledged and replays nothing),
// and the next round over many partitions creates them again.
func TestJournalReleasedWhenIdle(t *testing.T) {
	fsys := vfs.NewCrashFS()
	s, logs := journalDir(t, fsys, 8, testConfig(), 1<<20, false)
	acked := map[int][]ackedBatch{}
	journalRound(t, s, logs, "a", acked)
	if s.JournalStats().Rounds == 0 {
		t.Fatal("the round did not use the journal")
	}
	s.releaseIdleJournal(time.Now()) // not idle yet
	if f := journalFiles(t, fsys); len(f) != 2 {
		t.Fatalf("released while in use: %v", f)
	}
	s.releaseIdleJournal(time.Now().Add(journalIdleRelease + time.Second))
	if f := journalFiles(t, fsys); len(f) != 0 || s.JournalStats().Released != 1 {
		t.Fatalf("idle journal kept: files %v, stats %+v", f, s.JournalStats())
	}
	img := fsys.Crash()
	journalRound(t, s, logs, "b", acked) // recreates them
	s.jrnl.wait()
	journalRound(t, s, logs, "c", acked)
	if st := s.JournalStats(); st.Created != 2 || len(journalFiles(t, fsys)) != 2 {
		t.Fatalf("not created again: %+v", st)
	}
	img2 := fsys.Crash()
	closeAll(t, s, logs)

	// The image cut right after the release: everything acknowledged then
	// is in the segments, nothing to replay.
	s2, logs2 := openJournalDir(t, img, 8, testConfig(), 1<<20, false)
	if n := s2.JournalStats().Replayed; n != 0 {
		t.Errorf("replayed %d records after a release", n)
	}
	first := map[int][]ackedBatch{}
	for i := range logs {
		first[i] = acked[i][:1]
	}
	checkAcked(t, "cut after the release", logs2, first)
	closeAll(t, s2, logs2)
	s3, logs3 := openJournalDir(t, img2, 8, testConfig(), 1<<20, false)
	checkAcked(t, "cut after the files came back", logs3, acked)
	closeAll(t, s3, logs3)
}

// TestJournalCreationFailsCleanly: a full disk while the files are being
// created leaves no file behind (the disk is not held), the journal is not
// failed, rounds fsync segments directly meanwhile, and creation is tried
// again after journalRetry.
func TestJournalCreationFailsCleanly(t *testing.T) {
	fsys := vfs.NewCrashFS()
	s, logs := openJournalDir(t, fsys, 8, testConfig(), 1<<20, false)
	fsys.SetHook(func(op, name string) error {
		if op == "truncate" && strings.Contains(name, journalFilePrefix+"1") {
			return syscall.ENOSPC
		}
		return nil
	})
	acked := map[int][]ackedBatch{}
	journalRound(t, s, logs, "a", acked)
	s.jrnl.wait()
	journalRound(t, s, logs, "b", acked)
	if f := journalFiles(t, fsys); len(f) != 0 {
		t.Fatalf("files left after a failed creation: %v", f)
	}
	if err := s.jrnl.err(); err != nil || s.JournalStats().Rounds != 0 {
		t.Fatalf("journal failed (%v) or used: %+v", err, s.JournalStats())
	}
	fsys.SetHook(nil)
	journalRound(t, s, logs, "c", acked) // before journalRetry: not tried
	s.jrnl.wait()
	if s.JournalStats().Created != 0 {
		t.Fatal("creation retried at once")
	}
	s.jrnl.mu.Lock()
	s.jrnl.retryAt = time.Time{}
	s.jrnl.mu.Unlock()
	journalRound(t, s, logs, "d", acked)
	s.jrnl.wait()
	journalRound(t, s, logs, "e", acked)
	if st := s.JournalStats(); st.Created != 1 || st.Rounds == 0 {
		t.Fatalf("not created on retry: %+v", st)
	}
	checkAcked(t, "after retry", logs, acked)
	closeAll(t, s, logs)
}

// TestJournalCrashDuringCreation cuts the power before each file-system
// step of the first round over new partitions, which creates the
// journal's files (allocated, not written: see allocateFile), journals
// the bytes and fsyncs the new directories: every image opens
// with every batch acknowledged before the cut back, and a file left
// allocated but unwritten (or short, or missing) replays nothing.
func TestJournalCrashDuringCreation(t *testing.T) {
	const parts = 8
	run := func(crashAt int) (img *vfs.CrashFS, acked map[int][]ackedBatch, steps int) {
		fsys := vfs.NewCrashFS()
		s, logs := openJournalDir(t, fsys, parts, testConfig(), 1<<20, false)
		acked = map[int][]ackedBatch{}
		cut := cutPowerAt(fsys, crashAt, (*vfs.CrashFS).Crash)
		appendRound(t, s, logs, "second", epoch1, cut, acked)
		fsys.SetHook(nil)
		if crashAt < 0 && s.JournalStats().Rounds == 0 {
			t.Fatalf("the round did not use the journal: %+v", s.JournalStats())
		}
		for _, l := range logs {
			l.Close()
		}
		s.Close()
		return cut.img, acked, cut.n
	}
	_, _, steps := run(-1)
	for k := range steps {
		img, acked, _ := run(k)
		if img == nil {
			continue
		}
		s2, logs2 := openJournalDir(t, img, parts, testConfig(), 1<<20, false)
		checkAcked(t, fmt.Sprintf("power cut before step %d", k), logs2, acked)
		closeAll(t, s2, logs2)
	}
	t.Logf("%d steps", steps)
}

// powerCut fails one mutating file-system operation of a CrashFS, the
// step-th (counting from 0; a negative step fails none), with
// vfs.ErrInjected and keeps the image taken at that moment: the power cut
// of a crash-at-every-step test. appendRound records an acknowledgement
// only while img is nil.
type powerCut struct {
	mu  sync.Mutex
	img *vfs.CrashFS // the image at the cut; nil before it
	n   int          // the operations seen
	ops []string     // each operation seen, "op name"
}

// cutPowerAt hooks fsys to cut the power at its step-th operation, where
// image(fsys) takes the image; the caller unhooks it (SetHook(nil)).
func cutPowerAt(fsys *vfs.CrashFS, step int, image func(*vfs.CrashFS) *vfs.CrashFS) *powerCut {
	c := &powerCut{}
	fsys.SetHook(func(op, name string) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		defer func() { c.n++ }()
		c.ops = append(c.ops, op+" "+name)
		if c.n == step {
			c.img = image(fsys)
			return vfs.ErrInjected
		}
		return nil
	})
	return c
}

// epoch1 is appendRound's leader epoch for every partition.
func epoch1(int) int32 { return 1 }

// appendRound appends one batch of value to every log in a single sync
// round of s, log p at leader epoch epoch(p), and records in acked each
// batch that became durable before the power cut (cut.img still nil); a
// batch whose append failed (the injected failure) was never acknowledged.
func appendRound(t *testing.T, s *Syncer, logs []*Log, value string, epoch func(p int) int32, cut *powerCut, acked map[int][]ackedBatch) {
	t.Helper()
	s.roundMu.Lock()
	ress := make([]AppendResult, len(logs))
	bs := make([][]byte, len(logs))
	for p, l := range logs {
		bs[p] = mkBatch(t, 2, value, 1)
		res, err := l.Append(bs[p], AppendOptions{LeaderEpoch: epoch(p)})
		if err != nil {
			bs[p] = nil
		}
		ress[p] = res
	}
	s.roundMu.Unlock()
	for p, l := range logs {
		if bs[p] != nil && l.WaitDurable(context.Background(), ress[p].LastOffset+1) == nil {
			cut.mu.Lock()
			if cut.img == nil {
				acked[p] = append(acked[p], ackedBatch{ress[p].BaseOffset, bs[p]})
			}
			cut.mu.Unlock()
		}
	}
}
