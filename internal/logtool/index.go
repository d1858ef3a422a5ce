package logtool

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// Index entry sizes (Kafka's OffsetIndex, TimeIndex and TransactionIndex).
const (
	OffsetEntrySize = 8
	TimeEntrySize   = 12
	TxnEntrySize    = 34
)

// OffsetEntry is one .index entry: a batch's offset relative to the segment
// base offset, and the byte position of a batch start in the .log file.
type OffsetEntry struct {
	RelativeOffset int32
	Position       int32
}

// TimeEntry is one .timeindex entry: the largest timestamp so far and the
// relative offset of the batch that carried it.
type TimeEntry struct {
	Timestamp      int64
	RelativeOffset int32
}

// TxnEntry is one .txnindex entry: an aborted transaction.
type TxnEntry struct {
	Version          int16
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// ParseOffsetIndex decodes an .index file. Trailing all-zero slots (left by
// preallocation) are dropped; extra is the number of bytes after the last
// whole slot (non-zero means the file length is not a multiple of 8).
func ParseOffsetIndex(data []byte) (entries []OffsetEntry, extra int) {
	n := len(data) / OffsetEntrySize
	for n > 0 && allZero(data[(n-1)*OffsetEntrySize:n*OffsetEntrySize]) {
		n--
	}
	entries = make([]OffsetEntry, n)
	for i := range entries {
		e := data[i*OffsetEntrySize:]
		entries[i] = OffsetEntry{RelativeOffset: int32(binary.BigEndian.Uint32(e)), Position: int32(binary.BigEndian.Uint32(e[4:]))}
	}
	return entries, len(data) % OffsetEntrySize
}

// ParseTimeIndex decodes a .timeindex file, dropping trailing zero slots.
func ParseTimeIndex(data []byte) (entries []TimeEntry, extra int) {
	n := len(data) / TimeEntrySize
	for n > 0 && allZero(data[(n-1)*TimeEntrySize:n*TimeEntrySize]) {
		n--
	}
	entries = make([]TimeEntry, n)
	for i := range entries {
		e := data[i*TimeEntrySize:]
		entries[i] = TimeEntry{Timestamp: int64(binary.BigEndian.Uint64(e)), RelativeOffset: int32(binary.BigEndian.Uint32(e[8:]))}
	}
	return entries, len(data) % TimeEntrySize
}

// ParseTxnIndex decodes a .txnindex file.
func ParseTxnIndex(data []byte) (entries []TxnEntry, extra int) {
	entries = make([]TxnEntry, len(data)/TxnEntrySize)
	for i := range entries {
		e := data[i*TxnEntrySize:]
		entries[i] = TxnEntry{
			Version:          int16(binary.BigEndian.Uint16(e)),
			ProducerID:       int64(binary.BigEndian.Uint64(e[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(e[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(e[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(e[26:])),
		}
	}
	return entries, len(data) % TxnEntrySize
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// batchInfo is what index checks need to know about one batch.
type batchInfo struct {
	pos          int64
	base, last   int64
	maxTimestamp int64
}

// segmentLayout is the batch layout of a scanned .log file.
type segmentLayout struct {
	base    int64 // from the file name
	batches []batchInfo
	end     int64 // position after the last valid batch
}

// batchAt returns the batch starting exactly at pos.
func (l *segmentLayout) batchAt(pos int64) (batchInfo, bool) {
	i := sort.Search(len(l.batches), func(i int) bool { return l.batches[i].pos >= pos })
	if i < len(l.batches) && l.batches[i].pos == pos {
		return l.batches[i], true
	}
	return batchInfo{}, false
}

// batchContaining returns the batch whose offset range holds off.
func (l *segmentLayout) batchContaining(off int64) (batchInfo, bool) {
	i := sort.Search(len(l.batches), func(i int) bool { return l.batches[i].last >= off })
	if i < len(l.batches) && l.batches[i].base <= off {
		return l.batches[i], true
	}
	return batchInfo{}, false
}

// checkOffsetIndex checks .index entries against the log: offsets and
// positions strictly increase, every position is the start of a batch, and
// every offset is the last offset of a batch at or after that position
// (Kafka indexes (lastOffset of an append, position before the append)).
func checkOffsetIndex(file string, entries []OffsetEntry, l *segmentLayout) []Problem {
	var probs []Problem
	add := func(i int, format string, args ...any) {
		e := entries[i]
		probs = append(probs, Problem{File: file, Position: int64(i * OffsetEntrySize),
			Reason: fmt.Sprintf("entry %d (offset %d, position %d): ", i, l.base+int64(e.RelativeOffset), e.Position) + fmt.Sprintf(format, args...)})
	}
	for i, e := range entries {
		off := l.base + int64(e.RelativeOffset)
		if e.RelativeOffset < 0 || e.Position < 0 {
			add(i, "negative relative offset or position")
			continue
		}
		if i > 0 && e.RelativeOffset <= entries[i-1].RelativeOffset {
			add(i, "offset not above previous entry's %d", l.base+int64(entries[i-1].RelativeOffset))
		}
		if i > 0 && e.Position <= entries[i-1].Position {
			add(i, "position not above previous entry's %d", entries[i-1].Position)
		}
		b, ok := l.batchAt(int64(e.Position))
		if !ok {
			if int64(e.Position) >= l.end {
				add(i, "position is past the last valid batch (which ends at %d)", l.end)
			} else {
				add(i, "position is not the start of a batch")
			}
			continue
		}
		if off < b.last {
			add(i, "offset is below the last offset %d of the batch at that position", b.last)
			continue
		}
		if c, ok := l.batchContaining(off); !ok || c.last != off {
			add(i, "offset is not the last offset of any batch in the segment")
		}
	}
	return probs
}

// checkTimeIndex checks .timeindex entries against the log: timestamps
// strictly increase, offsets never decrease, and each entry's offset lies in
// a batch whose maxTimestamp equals the entry's timestamp.
func checkTimeIndex(file string, entries []TimeEntry, l *segmentLayout) []Problem {
	var probs []Problem
	add := func(i int, format string, args ...any) {
		e := entries[i]
		probs = append(probs, Problem{File: file, Position: int64(i * TimeEntrySize),
			Reason: fmt.Sprintf("entry %d (timestamp %d, offset %d): ", i, e.Timestamp, l.base+int64(e.RelativeOffset)) + fmt.Sprintf(format, args...)})
	}
	for i, e := range entries {
		if i > 0 && e.Timestamp <= entries[i-1].Timestamp {
			add(i, "timestamp not above previous entry's %d", entries[i-1].Timestamp)
		}
		if i > 0 && e.RelativeOffset < entries[i-1].RelativeOffset {
			add(i, "offset below previous entry's %d", l.base+int64(entries[i-1].RelativeOffset))
		}
		off := l.base + int64(e.RelativeOffset)
		b, ok := l.batchContaining(off)
		if !ok {
			add(i, "offset is not in any batch of the segment")
			continue
		}
		if b.maxTimestamp != e.Timestamp {
			add(i, "batch at position %d has maxTimestamp %d", b.pos, b.maxTimestamp)
		}
	}
	return probs
}
