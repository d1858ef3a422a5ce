package storage

import (
	"sync"
	"sync/atomic"
)

// fileCache bounds the segment .log descriptors the logs keep open: closed
// segments (their descriptor and loaded indexes) and active segments
// alike. Kafka keeps a descriptor per segment for the life of the segment
// (LogSegment holds a FileRecords whose FileChannel closes only when the
// segment is deleted), so a broker with many partitions needs as many
// descriptors as segments; Strata opens a segment's file on first use and
// closes the least recently used ones past the limit
// (strata.log.max.open.files). A closed segment just closes its file. An
// active segment is closed only once every byte written to it is fsynced
// in the file (Log.evictActive: an fsync before the close, so a write-back
// error is never lost with the last descriptor) and is reopened by the
// next append or read. Readers and sendfile hold a reference on the file
// (SegmentFile), so closing an evicted segment's descriptor waits for them.
// Index files hold no descriptor: they are read whole into memory.
//
// The count is of cached segments, so it bounds their descriptors; the
// descriptors held beyond it are transient: a reader's reference on an
// evicted file, a group-commit round's, and an active segment whose log is
// busy (its writer holds the lock the eviction needs), which is tried
// again at the next eviction.
type fileCache struct {
	mu         sync.Mutex
	limit      int
	head, tail *cacheElem // head = most recent
	n          int

	evicted       atomic.Uint64 // segments unloaded for the limit
	activeEvicted atomic.Uint64 // of them, active segments (fsynced, then closed)
}

type cacheElem struct {
	seg        *segment
	prev, next *cacheElem
}

// FileCache is a bounded LRU of open segment files shared by logs.
type FileCache = fileCache

// NewFileCache returns a cache keeping at most limit segment files open.
func NewFileCache(limit int) *FileCache {
	if limit < 1 {
		limit = 1
	}
	return &fileCache{limit: limit}
}

// Limit returns the bound.
func (c *fileCache) Limit() int { return c.limit }

// Len returns how many segments the cache holds.
func (c *fileCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Evictions returns how many segments the cache unloaded to stay within
// its limit, and how many of them were active segments.
func (c *fileCache) Evictions() (all, active uint64) {
	return c.evicted.Load(), c.activeEvicted.Load()
}

// touch marks s recently used (adding it when new) and reports whether
// the cache is over its limit (the caller then calls shrink, holding no
// segment lock).
func (c *fileCache) touch(s *segment) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touchLocked(s)
	return c.n > c.limit
}

func (c *fileCache) touchLocked(s *segment) {
	if e := s.elem; e != nil {
		if c.head != e {
			c.unlink(e)
			c.pushFront(e)
		}
		return
	}
	e := &cacheElem{seg: s}
	s.elem = e
	c.pushFront(e)
	c.n++
}

// shrink unloads least recently used segments until the cache is within
// its limit, sparing keep (the segment just used). A segment that cannot
// be unloaded now (pinned by a swap, or an active segment whose log is
// busy) goes back in as recently used; every cached segment is tried at
// most once per call.
func (c *fileCache) shrink(keep *segment) {
	c.mu.Lock()
	tries := c.n
	c.mu.Unlock()
	for ; tries > 0; tries-- {
		c.mu.Lock()
		if c.n <= c.limit {
			c.mu.Unlock()
			return
		}
		e := c.tail
		if e != nil && e.seg == keep {
			e = e.prev
		}
		if e == nil {
			c.mu.Unlock()
			return
		}
		c.unlink(e)
		c.n--
		s := e.seg
		s.elem = nil
		c.mu.Unlock()
		active := s.isActive()
		if !s.unload() {
			c.mu.Lock()
			c.touchLocked(s)
			c.mu.Unlock()
			continue
		}
		c.evicted.Add(1)
		if active {
			c.activeEvicted.Add(1)
		}
	}
}

func (c *fileCache) remove(s *segment) {
	c.mu.Lock()
	if e := s.elem; e != nil {
		c.unlink(e)
		c.n--
		s.elem = nil
	}
	c.mu.Unlock()
}

func (c *fileCache) pushFront(e *cacheElem) {
	e.prev, e.next = nil, c.head
	if c.head != nil {
		c.head.prev = e
	}
	c.head = e
	if c.tail == nil {
		c.tail = e
	}
}

func (c *fileCache) unlink(e *cacheElem) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = nil, nil
}
