package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Index entry sizes (Kafka's .index and .timeindex layouts).
const (
	offsetEntrySize = 8  // relativeOffset int32 | position int32
	timeEntrySize   = 12 // timestamp int64 | relativeOffset int32
)

var errBadIndex = errors.New("corrupt index")

// offsetIndex is the in-memory copy of a segment's sparse offset index.
// The single writer appends; readers copy the slice header under a short
// read lock and search without locks (appends never touch bytes a reader's
// slice covers).
type offsetIndex struct {
	mu         sync.RWMutex
	buf        []byte
	maxEntries int
}

func (ix *offsetIndex) snapshot() []byte {
	ix.mu.RLock()
	b := ix.buf
	ix.mu.RUnlock()
	return b
}

func (ix *offsetIndex) entries() int { return len(ix.snapshot()) / offsetEntrySize }

func (ix *offsetIndex) full() bool { return ix.entries() >= ix.maxEntries }

// add appends an entry and returns its encoded bytes for the file.
func (ix *offsetIndex) add(rel int32, pos int32) []byte {
	var e [offsetEntrySize]byte
	binary.BigEndian.PutUint32(e[0:], uint32(rel))
	binary.BigEndian.PutUint32(e[4:], uint32(pos))
	ix.mu.Lock()
	ix.buf = append(ix.buf, e[:]...)
	ix.mu.Unlock()
	return e[:]
}

// lookupOffsetIndex returns the largest entry whose offset <= target as
// (relative offset, position), or (0, 0) when none. It does not allocate.
func lookupOffsetIndex(buf []byte, rel int64) (int32, int32) {
	n := len(buf) / offsetEntrySize
	lo, hi := 0, n-1
	found := -1
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		r := int64(int32(binary.BigEndian.Uint32(buf[mid*offsetEntrySize:])))
		if r <= rel {
			found = mid
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	if found < 0 {
		return 0, 0
	}
	e := buf[found*offsetEntrySize:]
	return int32(binary.BigEndian.Uint32(e)), int32(binary.BigEndian.Uint32(e[4:]))
}

// lastIndexedPos returns the largest position <= maxPos among the offset
// index entries in buf (positions are non-decreasing), or -1 when none. It
// does not allocate.
func lastIndexedPos(buf []byte, maxPos int64) int64 {
	n := len(buf) / offsetEntrySize
	i := sort.Search(n, func(i int) bool {
		return int64(int32(binary.BigEndian.Uint32(buf[i*offsetEntrySize+4:]))) > maxPos
	})
	if i == 0 {
		return -1
	}
	return int64(int32(binary.BigEndian.Uint32(buf[(i-1)*offsetEntrySize+4:])))
}

// ParseOffsetIndex validates the bytes of an .index file against the size
// of its .log: whole entries, relative offsets strictly increasing and
// non-negative, positions non-decreasing and inside the log. It returns the
// entries (a prefix of data).
func ParseOffsetIndex(data []byte, logSize int64) ([]byte, error) {
	if len(data)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("%w: offset index length %d not a multiple of %d", errBadIndex, len(data), offsetEntrySize)
	}
	prevRel, prevPos := int64(-1), int64(-1)
	for i := 0; i < len(data); i += offsetEntrySize {
		rel := int64(int32(binary.BigEndian.Uint32(data[i:])))
		pos := int64(int32(binary.BigEndian.Uint32(data[i+4:])))
		if rel < 0 || rel <= prevRel || pos < prevPos || pos < 0 || (pos >= logSize && logSize >= 0) {
			return nil, fmt.Errorf("%w: offset index entry %d (%d, %d) out of order or past log end %d", errBadIndex, i/offsetEntrySize, rel, pos, logSize)
		}
		prevRel, prevPos = rel, pos
	}
	return data, nil
}

// timeIndex is the in-memory copy of a segment's time index.
type timeIndex struct {
	mu         sync.RWMutex
	buf        []byte
	maxEntries int
}

func (ix *timeIndex) snapshot() []byte {
	ix.mu.RLock()
	b := ix.buf
	ix.mu.RUnlock()
	return b
}

func (ix *timeIndex) entries() int { return len(ix.snapshot()) / timeEntrySize }

// full keeps the last slot for the entry written when the segment closes.
func (ix *timeIndex) full() bool { return ix.entries() >= ix.maxEntries-1 }

func (ix *timeIndex) last() (ts int64, rel int32, ok bool) {
	b := ix.snapshot()
	if len(b) == 0 {
		return -1, 0, false
	}
	e := b[len(b)-timeEntrySize:]
	return int64(binary.BigEndian.Uint64(e)), int32(binary.BigEndian.Uint32(e[8:])), true
}

// add appends (ts, rel) if ts is larger than the last entry's; it returns
// the encoded bytes or nil when nothing was added.
func (ix *timeIndex) add(ts int64, rel int32) []byte {
	if lts, lrel, ok := ix.last(); ok && (ts <= lts || rel < lrel) {
		return nil
	}
	var e [timeEntrySize]byte
	binary.BigEndian.PutUint64(e[0:], uint64(ts))
	binary.BigEndian.PutUint32(e[8:], uint32(rel))
	ix.mu.Lock()
	ix.buf = append(ix.buf, e[:]...)
	ix.mu.Unlock()
	return e[:]
}

// lookupTimeIndex returns the relative offset of the largest entry with
// timestamp <= ts, or (0, false) when every entry is later.
func lookupTimeIndex(buf []byte, ts int64) (int32, bool) {
	n := len(buf) / timeEntrySize
	lo, hi := 0, n-1
	found := -1
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		t := int64(binary.BigEndian.Uint64(buf[mid*timeEntrySize:]))
		if t <= ts {
			found = mid
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	if found < 0 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(buf[found*timeEntrySize+8:])), true
}

// ParseTimeIndex validates the bytes of a .timeindex file: whole entries,
// timestamps and relative offsets non-decreasing, offsets non-negative.
// Trailing all-zero entries (an untrimmed preallocated file) are dropped.
func ParseTimeIndex(data []byte) ([]byte, error) {
	if len(data)%timeEntrySize != 0 {
		return nil, fmt.Errorf("%w: time index length %d not a multiple of %d", errBadIndex, len(data), timeEntrySize)
	}
	end := len(data)
	for end >= timeEntrySize && allZero(data[end-timeEntrySize:end]) && end > timeEntrySize {
		end -= timeEntrySize
	}
	data = data[:end]
	prevTs, prevRel := int64(-1<<63), int64(-1)
	for i := 0; i < len(data); i += timeEntrySize {
		ts := int64(binary.BigEndian.Uint64(data[i:]))
		rel := int64(int32(binary.BigEndian.Uint32(data[i+8:])))
		if rel < 0 || rel < prevRel || ts < prevTs {
			return nil, fmt.Errorf("%w: time index entry %d (%d, %d) out of order", errBadIndex, i/timeEntrySize, ts, rel)
		}
		prevTs, prevRel = ts, rel
	}
	return data, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
