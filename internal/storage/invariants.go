package storage

import (
	"fmt"

	"github.com/strata-io/strata/internal/record"
)

// Storage invariants, checked after every change of a log's structure when
// built with the invariants tag (go test -tags invariants ./internal/storage):
//
//   - segments are sorted by base offset and do not overlap: every batch of
//     a segment lies at or above its base and below the next segment's
//     base;
//   - the high watermark is at most the log end offset, and the log start
//     offset lies between the first segment's base and the log end;
//   - offset index entries increase in offset and position, and each points
//     at the start of the batch whose last offset it names.
//
// A violation panics with what was found. Without the tag the checks
// compile to nothing (invariantsEnabled is a false constant).

// checkInvariants checks the log (l.mu held). full checks every segment's
// batches and indexes; otherwise only what the last append touched (the
// active segment's index entries not checked yet).
func (l *Log) checkInvariants(full bool) {
	if !invariantsEnabled {
		return
	}
	if err := l.invariantErr(full); err != nil {
		panic(fmt.Sprintf("storage invariant violated in %s: %v", l.dir, err))
	}
}

func (l *Log) invariantErr(full bool) error {
	if l.closed || l.failed != nil || len(l.segs) == 0 {
		return nil
	}
	v := l.v.Load()
	if v.hw > v.leo {
		return fmt.Errorf("high watermark %d above log end offset %d", v.hw, v.leo)
	}
	if v.logStart < l.segs[0].base || v.logStart > v.leo {
		return fmt.Errorf("log start offset %d outside [first segment base %d, log end %d]", v.logStart, l.segs[0].base, v.leo)
	}
	for i := 1; i < len(l.segs); i++ {
		if l.segs[i].base <= l.segs[i-1].base {
			return fmt.Errorf("segment %d (base %d) not after segment %d (base %d)", i, l.segs[i].base, i-1, l.segs[i-1].base)
		}
	}
	if act := l.segs[len(l.segs)-1]; act.base > l.mark.leo {
		return fmt.Errorf("active segment base %d above the log end offset %d", act.base, l.mark.leo)
	}
	if !full {
		return l.checkSegment(l.segs[len(l.segs)-1], l.mark.leo, true)
	}
	for i, s := range l.segs {
		next := l.mark.leo
		if i+1 < len(l.segs) {
			next = l.segs[i+1].base
		}
		if err := l.checkSegment(s, next, false); err != nil {
			return err
		}
	}
	return nil
}

// checkSegment checks s's batches against [s.base, next) and its offset
// index entries; incremental checks only the entries added since the last
// check of the active segment.
func (l *Log) checkSegment(s *segment, next int64, incremental bool) error {
	oi, _, err := s.indexes()
	if err != nil {
		return nil // deleted meanwhile (a swap): nothing to check
	}
	f, err := s.acquire()
	if err != nil {
		return nil
	}
	defer f.Release()
	entries := oi.snapshot()
	from := 0
	if incremental {
		from = l.inv.from(s)
	}
	hdr := make([]byte, record.HeaderSize)
	size := s.size.Load()
	prevRel, prevPos := int64(-1), int64(-1)
	if from > 0 {
		prevRel, prevPos = int64(rel(entries, from-1)), int64(entryPos(entries, from-1))
	}
	for i := from; i < len(entries)/offsetEntrySize; i++ {
		r, p := int64(rel(entries, i)), int64(entryPos(entries, i))
		if r <= prevRel || p <= prevPos {
			return fmt.Errorf("segment %d: offset index entry %d (%d, %d) does not follow (%d, %d)", s.base, i, r, p, prevRel, prevPos)
		}
		if p >= size {
			return fmt.Errorf("segment %d: offset index entry %d points at %d, beyond the %d bytes of the segment", s.base, i, p, size)
		}
		h, err := readHeader(f.f, p, hdr)
		if err != nil {
			return fmt.Errorf("segment %d: offset index entry %d points at %d, where no batch header is: %v", s.base, i, p, err)
		}
		if h.last != s.base+r {
			return fmt.Errorf("segment %d: offset index entry %d names offset %d, the batch at %d ends at %d", s.base, i, s.base+r, p, h.last)
		}
		prevRel, prevPos = r, p
	}
	if s == l.segs[len(l.segs)-1] {
		l.inv.set(s, len(entries)/offsetEntrySize)
	}
	if incremental {
		return nil
	}
	// Every batch lies in [base, next), in order.
	lastEnd := s.base
	for pos := int64(0); pos < size; {
		h, err := readHeader(f.f, pos, hdr)
		if err != nil {
			return fmt.Errorf("segment %d: no batch header at %d of %d bytes: %v", s.base, pos, size, err)
		}
		if h.base < lastEnd && pos > 0 || h.base < s.base {
			return fmt.Errorf("segment %d: batch at %d starts at offset %d, before %d", s.base, pos, h.base, lastEnd)
		}
		if h.last >= next {
			return fmt.Errorf("segment %d: batch at %d ends at offset %d, not below the next segment's base %d", s.base, pos, h.last, next)
		}
		lastEnd = h.last + 1
		pos += h.size
	}
	return nil
}

// rel and entryPos decode offset index entry i (relative offset, position).
func rel(entries []byte, i int) int32 { return int32(be32(entries[i*offsetEntrySize:])) }

func entryPos(entries []byte, i int) int32 { return int32(be32(entries[i*offsetEntrySize+4:])) }

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
