package server

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The idle-heap releaser returns the heap of a finished burst of load to
// the operating system (issue 18, memory row).
//
// After a burst (say an acks=all produce over 1,000 partitions, whose
// request frames make a live heap of 100 MB and more), the Go runtime
// keeps the freed heap resident up to about its last GC goal, which only
// the next collection lowers. A quiet broker allocates little, so that
// collection comes late (the runtime forces one every 2 minutes), buffers
// kept for reuse (the protocol's recycled frames, sync.Pools) stay live
// meanwhile, and the background scavenger then returns the excess at
// about 1% of a CPU. A 10,100-partition broker measured 179-361 MB RSS
// just after the load steps for a live heap of about 30-50 MB.
//
// Every releaseInterval the releaser reads four runtime metrics: the heap
// objects (live, and dead ones not yet swept), the free heap still
// resident, the live heap of the last collection and the bytes allocated
// since its previous look. Idle heap is objects + free - live: resident
// heap the program does not use. It releases when the idle heap is at
// least minReleaseBytes, at least half the live heap (the live heap of a
// burst's end still counts the buffers the release drops), and more than
// what was allocated during the last interval: at the current rate the
// allocator would not reuse it within the next interval, so the load that
// needed it is over. Under a sustained load the allocation per interval
// dwarfs the idle heap and nothing happens.
//
// Releasing drops the protocol's recycled frame buffers
// (protocol.Server.DropRecycledFrames), runs two collections (the first
// moves sync.Pools' contents to their victim caches, the second frees
// them) and returns every free page (debug.FreeOSMemory): 0.15-0.2 s of
// CPU for a 10,100-partition broker after a produce burst (gctrace: the
// two collections of a 74 then 27 MB heap), at most once per
// releaseSpacing.
//
// GOMEMLIMIT and GOGC stay the operator's: the releaser sets neither.
const (
	releaseInterval = 5 * time.Second
	releaseSpacing  = 30 * time.Second
	minReleaseBytes = 32 << 20
)

// heapSample is what the releaser reads of the runtime.
type heapSample struct {
	objects uint64 // heap objects, live or dead and unswept (/memory/classes/heap/objects:bytes)
	free    uint64 // free heap pages still resident (/memory/classes/heap/free:bytes)
	live    uint64 // heap marked live by the last collection (/gc/heap/live:bytes)
	allocs  uint64 // bytes allocated since the start (/gc/heap/allocs:bytes)
}

// idle is the resident heap the program does not use: dead objects and
// free pages (0 when live objects were allocated since the collection).
func (s heapSample) idle() uint64 {
	if s.objects+s.free < s.live {
		return 0
	}
	return s.objects + s.free - s.live
}

// heapReleaser decides when to return idle heap; look runs it once. Its
// fields are the runtime's in production (newHeapReleaser), fakes in tests.
type heapReleaser struct {
	read    func() heapSample
	release func()
	now     func() time.Time
	// allocs is the allocation count at the previous look (0 before the
	// first, which therefore never releases).
	allocs uint64
	last   time.Time // the last release
}

// newHeapReleaser reads runtime/metrics and releases with two collections
// and debug.FreeOSMemory, after calling drop (when set) to let go of
// buffers kept for reuse.
func newHeapReleaser(drop func()) *heapReleaser {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/allocs:bytes"},
	}
	return &heapReleaser{
		read: func() heapSample {
			metrics.Read(samples)
			v := func(i int) uint64 {
				if samples[i].Value.Kind() != metrics.KindUint64 {
					return 0
				}
				return samples[i].Value.Uint64()
			}
			return heapSample{objects: v(0), free: v(1), live: v(2), allocs: v(3)}
		},
		release: func() {
			if drop != nil {
				drop()
			}
			runtime.GC()
			debug.FreeOSMemory()
		},
		now: time.Now,
	}
}

// look releases the idle heap when the rule above says so, and reports
// whether it did.
func (r *heapReleaser) look() bool {
	s := r.read()
	first := r.allocs == 0
	allocated := s.allocs - r.allocs
	r.allocs = s.allocs
	idle := s.idle()
	if first || idle < minReleaseBytes || idle < s.live/2 || allocated >= idle {
		return false
	}
	now := r.now()
	if !r.last.IsZero() && now.Sub(r.last) < releaseSpacing {
		return false
	}
	r.last = now
	r.release()
	return true
}

// startHeapReleaser runs the releaser every releaseInterval until
// stopHeapReleaser (Shutdown). The server owns the goroutine.
func (s *Server) startHeapReleaser() {
	s.memStop = make(chan struct{})
	s.memDone = make(chan struct{})
	r := newHeapReleaser(s.proto.DropRecycledFrames)
	go func() { // owner: s; ends at stopHeapReleaser
		defer close(s.memDone)
		t := time.NewTicker(releaseInterval)
		defer t.Stop()
		for {
			select {
			case <-s.memStop:
				return
			case <-t.C:
				start := time.Now()
				if r.look() {
					s.logger.Debug("returned idle heap to the operating system", "took", time.Since(start))
				}
			}
		}
	}()
}

// stopHeapReleaser stops the releaser's goroutine (a no-op when it never
// started).
func (s *Server) stopHeapReleaser() {
	if s.memStop != nil {
		close(s.memStop)
		<-s.memDone
		s.memStop = nil
	}
}
