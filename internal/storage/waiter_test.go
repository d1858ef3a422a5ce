package storage

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// TestWaiter: one waiter on many logs fires with the tags of the logs
// whose high watermark moved, and no more once removed.
func TestWaiter(t *testing.T) {
	fsys := vfs.NewCrashFS()
	s := NewSyncer(quiet)
	defer s.Close()
	var logs []*Log
	w := NewWaiter()
	for i := range 50 {
		l, err := Open(fmt.Sprintf("/d/w-%d", i), [16]byte{1}, testConfig(), false, Options{FS: fsys, Syncer: s, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		l.AddWaiter(w, i)
		logs = append(logs, l)
	}
	select {
	case <-w.C():
		t.Fatal("fired before any append")
	default:
	}
	for _, i := range []int{7, 31} {
		res := mustAppend(t, logs[i], mkBatch(t, 2, "x", 1))
		if err := logs[i].WaitDurable(t.Context(), res.LastOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	<-w.C()
	got := w.Take(nil)
	slices.Sort(got)
	got = slices.Compact(got)
	if !slices.Equal(got, []int{7, 31}) {
		t.Fatalf("fired tags %v, want [7 31]", got)
	}
	for _, l := range logs {
		l.RemoveWaiter(w)
	}
	res := mustAppend(t, logs[3], mkBatch(t, 2, "y", 1))
	if err := logs[3].WaitDurable(t.Context(), res.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C():
		if got := w.Take(nil); len(got) > 0 {
			t.Fatalf("fired after RemoveWaiter: %v", got)
		}
	default:
	}
}

// TestWaiterWakesOncePerRound: a waiter on many logs that one group-commit
// round makes readable wakes once, with every one of them (issue 18: a
// long poll woke on the round's first partition and answered the others
// one fetch later). The appends are held out of the round until all are
// written, so one round covers them.
func TestWaiterWakesOncePerRound(t *testing.T) {
	for _, n := range []int{2, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			fsys := vfs.NewCrashFS()
			s := NewSyncer(quiet)
			defer s.Close()
			cfg := testConfig()
			cfg.Durable = true
			w := NewWaiter()
			var logs []*Log
			for i := range n {
				l, err := Open(fmt.Sprintf("/d/r-%d", i), [16]byte{1}, cfg, false, Options{FS: fsys, Syncer: s, Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				logs = append(logs, l)
			}
			// Make the directories durable first (a first round), so the
			// round below is an ordinary one.
			for _, l := range logs {
				mustAppend(t, l, mkBatch(t, 1, "a", 1))
			}
			for i, l := range logs {
				l.AddWaiter(w, i)
			}
			s.roundMu.Lock() // no round runs until every append is pending
			var ends []int64
			for _, l := range logs {
				res, err := l.Append(mkBatch(t, 2, "b", 1), AppendOptions{LeaderEpoch: 1})
				if err != nil {
					s.roundMu.Unlock()
					t.Fatal(err)
				}
				ends = append(ends, res.LastOffset+1)
			}
			s.roundMu.Unlock()
			<-w.C()
			got := w.Take(nil)
			slices.Sort(got)
			got = slices.Compact(got)
			if len(got) != n {
				t.Fatalf("first wake-up had %d of the round's %d logs: %v", len(got), n, got)
			}
			for i, l := range logs {
				if hw := l.HighWatermark(); hw < ends[i] {
					t.Fatalf("log %d woke with high watermark %d < %d", i, hw, ends[i])
				}
			}
		})
	}
}

// TestWaiterListsTagOnce: a waiter left on its logs between fetches (a
// fetch session's) lists each tag once until taken, however often its log
// moved, so it holds at most one entry per log (and Take forgets them:
// the same tag is listed again after the next move).
func TestWaiterListsTagOnce(t *testing.T) {
	fsys := vfs.NewCrashFS()
	s := NewSyncer(quiet)
	defer s.Close()
	l, err := Open("/d/once-0", [16]byte{1}, testConfig(), false, Options{FS: fsys, Syncer: s, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := NewWaiter()
	const tag = 200 // past the first word of the bit set
	l.AddWaiter(w, tag)
	for range 20 {
		res := mustAppend(t, l, mkBatch(t, 2, "x", 1))
		if err := l.WaitDurable(t.Context(), res.LastOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	<-w.C()
	if got := w.Take(nil); !slices.Equal(got, []int{tag}) {
		t.Fatalf("after 20 moves: tags %v, want [%d]", got, tag)
	}
	if got := w.Take(nil); len(got) != 0 {
		t.Fatalf("taken twice: %v", got)
	}
	res := mustAppend(t, l, mkBatch(t, 2, "y", 1))
	if err := l.WaitDurable(t.Context(), res.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	<-w.C()
	if got := w.Take(nil); !slices.Equal(got, []int{tag}) {
		t.Fatalf("after one more move: tags %v, want [%d]", got, tag)
	}
	l.RemoveWaiter(w)
}

// TestEndWaiter: an end waiter (a leader's replica fetch) fires when the
// log end moves, not when only the high watermark does; WakeWaiters
// (leadership change) and Close fire it too; RemoveEndWaiter leaves the
// log without waiters.
func TestEndWaiter(t *testing.T) {
	fsys := vfs.NewCrashFS()
	s := NewSyncer(quiet)
	defer s.Close()
	l, err := Open("/d/end-0", [16]byte{1}, testConfig(), false, Options{FS: fsys, Syncer: s, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	l.StartReplication(nil)
	w := NewWaiter()
	const tag = 70
	l.AddEndWaiter(w, tag)
	fired := func() []int {
		select {
		case <-w.C():
		default:
			return nil
		}
		return w.Take(nil)
	}
	res, err := l.Append(mkBatch(t, 2, "x", 1), AppendOptions{LeaderEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := fired(); !slices.Equal(got, []int{tag}) {
		t.Fatalf("after an append: fired %v, want [%d]", got, tag)
	}
	l.SetHighWatermark(res.LastOffset+1, nil)
	if got := fired(); got != nil {
		t.Fatalf("after a high watermark move only: fired %v, want nothing", got)
	}
	l.WakeWaiters()
	if got := fired(); !slices.Equal(got, []int{tag}) {
		t.Fatalf("after WakeWaiters: fired %v, want [%d]", got, tag)
	}
	if n := l.Waiters(); n != 1 {
		t.Fatalf("%d waiters, want 1", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fired(); !slices.Equal(got, []int{tag}) {
		t.Fatalf("after Close: fired %v, want [%d]", got, tag)
	}
	l.RemoveEndWaiter(w)
	if n := l.Waiters(); n != 0 {
		t.Fatalf("%d waiters after RemoveEndWaiter, want 0", n)
	}
}
