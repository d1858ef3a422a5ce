package storage

import "sync"

// fileCache bounds how many closed segments keep an open .log descriptor
// and in-memory indexes. Segments load lazily on first read and the least
// recently used are unloaded past the limit; active segments are not
// counted. One cache may be shared by every log of a broker.
type fileCache struct {
	mu         sync.Mutex
	limit      int
	head, tail *cacheElem // head = most recent
	n          int
}

type cacheElem struct {
	seg        *segment
	prev, next *cacheElem
}

// FileCache is a bounded LRU of open closed-segment files shared by logs.
type FileCache = fileCache

// NewFileCache returns a cache keeping at most limit closed segments open.
func NewFileCache(limit int) *FileCache {
	if limit < 1 {
		limit = 1
	}
	return &fileCache{limit: limit}
}

// touch marks s recently used and returns the segments to unload (the
// caller unloads them after releasing s.mu).
func (c *fileCache) touch(s *segment) []*segment {
	c.mu.Lock()
	var evict []*segment
	if e := s.elem; e != nil {
		c.unlink(e)
		c.pushFront(e)
	} else {
		e := &cacheElem{seg: s}
		s.elem = e
		c.pushFront(e)
		c.n++
		for c.n > c.limit && c.tail != nil && c.tail != e {
			t := c.tail
			c.unlink(t)
			c.n--
			t.seg.elem = nil
			evict = append(evict, t.seg)
		}
	}
	c.mu.Unlock()
	return evict
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
