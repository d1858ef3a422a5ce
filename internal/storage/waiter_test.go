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
