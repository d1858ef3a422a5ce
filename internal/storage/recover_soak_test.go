package storage

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// TestRecoveryRandomLives (20 seeds; 1,000 with STRATA_LONG=1) is
// TestRecoveryResumeMatchesFullScan over random lives: per seed a random
// segment size, index interval and index size, then three to six lives of
// appends (timestamps sometimes out of order), transactions committed or
// aborted, rolls, flushes with or without a checkpoint of the recovery
// points, follower truncations of what was not acknowledged, each life
// ended by a clean close (CloseDeferSync and Syncer.Close, or Close) or by
// a crash the next life starts from (power cut, torn power cut or kill -9
// image). Power cuts (exact, entries first, torn) and kill -9 images are
// taken before random file operations; each is recovered as is and
// without its index files and recovery point, and both must agree
// (compareRecovered: batches, every acknowledged one, reads, time lookups,
// max timestamp, aborted transactions; index entries checked against the
// batches). In session 9 it found three bugs (an empty segment's stale
// index files, TruncateTo's order, a clean close after a crash recovery
// leaving stale index files), each with its own test now. The images
// depend on the syncer goroutine's timing, so a seed does not always
// replay the same run: rerun a failing one with -run
// 'TestRecoveryRandomLives/<seed>$' -count=20.
func TestRecoveryRandomLives(t *testing.T) {
	seeds := uint64(20) // the default suite: a few seconds
	if os.Getenv("STRATA_LONG") == "1" {
		seeds = 1000
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomLives(t, seed) })
	}
}

func randomLives(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	hrng := rand.New(rand.NewPCG(seed, 7)) // the hook's draws (taken under mu)
	cfg := resumeConfig()
	cfg.SegmentBytes = int64(1500 + rng.IntN(8000))
	cfg.IndexIntervalBytes = int32(rng.IntN(600))
	cfg.SegmentIndexBytes = int32(64 + rng.IntN(2000))
	dir := "/d/lives-0"
	fsys := vfs.NewCrashFS()
	var mu sync.Mutex
	var images []resumeImage
	var acked []record.Batch
	oneIn := 5 + rng.IntN(20)
	snap := func(f *vfs.CrashFS, what string) { // mu held
		n := len(acked)
		switch hrng.IntN(4) {
		case 0:
			images = append(images, resumeImage{"power cut " + what, f.Crash(), n})
		case 1:
			images = append(images, resumeImage{"power cut, entries first, " + what, f.CrashEntriesFirst(), n})
		case 2:
			images = append(images, resumeImage{"torn power cut " + what, f.CrashTorn(func(u int) int { return hrng.IntN(u + 1) }), n})
		default:
			images = append(images, resumeImage{"kill -9 " + what, f.Clone(), n})
		}
	}
	var history strings.Builder // what happened, logged on failure
	note := func(format string, a ...any) {
		mu.Lock()
		fmt.Fprintf(&history, format+"\n", a...)
		mu.Unlock()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d: %+v\n%s", seed, cfg, history.String())
		}
	})
	hook := func(f *vfs.CrashFS) {
		step := 0
		f.SetHook(func(op, name string) error {
			mu.Lock()
			defer mu.Unlock()
			step++
			if hrng.IntN(oneIn) == 0 {
				snap(f, fmt.Sprintf("before %s %s (step %d)", op, name, step))
			}
			return nil
		})
	}
	hook(fsys)
	n := 0
	clean := false
	for life := range 3 + rng.IntN(4) {
		s := NewSyncer(quiet)
		l, err := Open(dir, [16]byte{1}, cfg, clean, Options{FS: fsys, Syncer: s, Logger: quiet})
		if err != nil {
			t.Fatalf("life %d: open: %v", life, err)
		}
		var pending []record.Batch
		ackedEnd := l.LogEndOffset()
		note("life %d: open clean=%v, log end %d", life, clean, ackedEnd)
		ack := func() {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			ckpt := rng.IntN(2) == 0
			if ckpt {
				if err := s.WriteCheckpoints(); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			acked = append(acked, pending...)
			mu.Unlock()
			pending = nil
			ackedEnd = l.LogEndOffset()
			note("flush at %d, checkpoint %v", ackedEnd, ckpt)
		}
		// A life either writes transactions (producer id 77+life) or
		// truncates: a truncation could cut a marker, and the
		// sequence numbers here do not follow a rolled-back producer.
		txnLife := rng.IntN(2) == 0
		pid, seq, open := int64(77+life), int32(0), false
		for range rng.IntN(60) {
			switch r := rng.IntN(20); {
			case r < 12:
				ts := int64(1000 + 10*(n%180))
				if rng.IntN(7) == 0 {
					ts -= int64(rng.IntN(60))
				}
				b := mkBatch(t, 1+rng.IntN(4), fmt.Sprint("b", n), ts)
				n++
				if _, err := l.Append(b, AppendOptions{LeaderEpoch: 1}); err != nil {
					t.Fatal(err)
				}
				pending = append(pending, b)
			case r < 14 && txnLife:
				k := 1 + rng.IntN(2)
				tb := mkTxnBatch(t, k, fmt.Sprint("t", n), pid, 0, seq)
				n++
				if _, err := l.Append(tb, AppendOptions{LeaderEpoch: 1}); err != nil {
					t.Fatal(err)
				}
				seq += int32(k)
				open = true
			case r < 16 && open:
				commit := rng.IntN(2) == 0
				if _, err := l.AppendMarker(pid, 0, 1, commit, 1); err != nil {
					t.Fatal(err)
				}
				open = false
				note("marker commit=%v", commit)
			case r >= 16 && r < 18:
				ack()
			case r == 18:
				note("roll at %d", l.LogEndOffset())
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			case r == 19 && !txnLife && l.LogEndOffset() > ackedEnd:
				to := ackedEnd + rng.Int64N(l.LogEndOffset()-ackedEnd+1)
				note("truncate to %d (log end %d)", to, l.LogEndOffset())
				if _, err := l.TruncateTo(to); err != nil {
					t.Fatal(err)
				}
				pending = nil // which of them survived is not tracked
			}
		}
		if open {
			if _, err := l.AppendMarker(pid, 0, 1, false, 1); err != nil {
				t.Fatal(err)
			}
		}
		ack()
		mu.Lock()
		snap(fsys, fmt.Sprintf("life %d idle", life))
		mu.Unlock()
		switch end := rng.IntN(3); end {
		case 0, 1:
			note("clean close (deferred sync %v)", end == 0)
			closeLog := l.Close
			if end == 0 {
				closeLog = l.CloseDeferSync
			}
			if err := closeLog(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			clean = true
		default:
			// The next life starts from a crash image taken now.
			mu.Lock()
			var img *vfs.CrashFS
			switch rng.IntN(3) {
			case 0:
				img, end = fsys.Crash(), 3
			case 1:
				img, end = fsys.CrashTorn(func(u int) int { return rng.IntN(u + 1) }), 4
			default:
				img, end = fsys.Clone(), 5
			}
			mu.Unlock()
			note("crash (%s)", map[int]string{3: "power cut", 4: "torn power cut", 5: "kill -9"}[end])
			fsys.SetHook(nil)
			l.Close()
			s.Close()
			fsys = img
			hook(fsys)
			clean = false
		}
	}
	fsys.SetHook(nil)
	for _, img := range images {
		ref := img.fsys.Clone()
		removeIndexes(t, ref, dir)
		a := recoverImage(t, img.what, img.fsys, dir, cfg)
		b := recoverImage(t, img.what+" (full scan)", ref, dir, cfg)
		compareRecovered(t, img.what, a, b, acked[:img.acked])
		a.Close()
		b.Close()
	}
}
