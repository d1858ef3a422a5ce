package server

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// fakeRuntime feeds heapReleaser scripted samples and a manual clock.
type fakeRuntime struct {
	s        heapSample
	now      time.Time
	released int
}

func (f *fakeRuntime) releaser() *heapReleaser {
	return &heapReleaser{
		read:    func() heapSample { return f.s },
		release: func() { f.released++ },
		now:     func() time.Time { return f.now },
	}
}

// TestHeapReleaserAfterBurst walks the releaser through a start, a burst
// of load, its end and a second burst: it returns the heap once the
// allocation rate drops below the free resident heap, never during the
// load, never twice within releaseSpacing, and not for a small heap.
func TestHeapReleaserAfterBurst(t *testing.T) {
	const mb = 1 << 20
	f := &fakeRuntime{now: time.Unix(1000, 0)}
	r := f.releaser()
	// step: the heap holds live bytes of live objects plus idle bytes
	// (dead objects half, free pages half).
	step := func(idle, live, allocated uint64, want bool) {
		t.Helper()
		f.now = f.now.Add(releaseInterval)
		f.s.objects, f.s.free, f.s.live = live+idle/2, idle-idle/2, live
		f.s.allocs += allocated
		before := f.released
		if got := r.look(); got != want || (f.released > before) != want {
			t.Fatalf("idle %d MB, live %d MB, allocated %d MB: released %v (calls %d -> %d), want %v",
				idle/mb, live/mb, allocated/mb, got, before, f.released, want)
		}
	}
	// The first look only learns the allocation count, even with much idle heap.
	step(200*mb, 30*mb, 500*mb, false)
	// At rest: a small idle heap stays.
	step(20*mb, 30*mb, 1*mb, false)
	// A burst: much idle heap between collections, but the allocation
	// per interval is larger still.
	step(120*mb, 90*mb, 900*mb, false)
	step(150*mb, 100*mb, 700*mb, false)
	// Idle heap below half the live heap stays.
	step(45*mb, 100*mb, 2*mb, false)
	// The burst is over: idle heap above half the live heap (which still
	// counts the buffers the release drops; measured at the end of a
	// produce over 1,000 partitions) and above what the last interval
	// allocated.
	step(100*mb, 102*mb, 12*mb, true)
	// Within releaseSpacing of that release nothing more happens, even
	// when the rule holds again.
	step(100*mb, 40*mb, 5*mb, false)
	f.now = f.now.Add(releaseSpacing)
	step(100*mb, 40*mb, 5*mb, true)
	// Objects allocated since the last collection can make the objects
	// exceed live + idle: no idle heap, no release.
	f.now = f.now.Add(releaseSpacing)
	f.s = heapSample{objects: 10 * mb, free: 0, live: 60 * mb, allocs: f.s.allocs}
	if r.look() {
		t.Fatal("released with no idle heap")
	}
}

// TestHeapReleaserReturnsFreeHeap runs the production releaser on the
// real runtime: a burst leaves 64 MiB of free heap resident, which the
// releaser returns to the operating system.
func TestHeapReleaserReturnsFreeHeap(t *testing.T) {
	// No collection between the steps, and so no background scavenging
	// either (its goal follows the GC goal).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	r := newHeapReleaser(nil)
	r.look() // learns the allocation count
	var keep [][]byte
	for range 64 {
		keep = append(keep, make([]byte, 1<<20))
	}
	runtime.KeepAlive(keep)
	keep = nil
	runtime.GC() // the burst's garbage is free heap, resident
	before := r.read()
	if before.idle() < minReleaseBytes {
		t.Fatalf("the burst left %d bytes of idle heap resident, want at least %d", before.idle(), minReleaseBytes)
	}
	// The look right after the burst releases when the free heap exceeds
	// what the burst allocated since the first look, else the next does.
	if !r.look() && !r.look() {
		t.Fatalf("no release with %d bytes idle and %d live", before.idle(), before.live)
	}
	if after := r.read(); after.idle() >= minReleaseBytes {
		t.Fatalf("idle resident heap %d bytes after the release (before %d)", after.idle(), before.idle())
	}
}
