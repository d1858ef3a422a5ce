package storage

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
)

// maxViewRetries bounds how often a read restarts when a segment it chose
// was deleted or swapped out under it.
const maxViewRetries = 8

// limitFor returns how many bytes of s readers may see under v (the high
// watermark bounds the segment holding it; later segments are invisible).
func (v *view) limitFor(s *segment) int64 {
	switch {
	case s.base < v.hwBase:
		return s.size.Load()
	case s.base == v.hwBase:
		return v.hwPos
	default:
		return 0
	}
}

// floorSegment returns the index of the last segment with base <= off (0
// when off is below every base).
func floorSegment(segs []*segment, off int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > off })
	if i == 0 {
		return 0
	}
	return i - 1
}

// Read returns whole batches starting with the batch that contains offset
// (or the next surviving batch after a compacted gap), never past the high
// watermark, at most maxBytes unless minOneBatch and the first batch is
// larger (KIP-74). offset < LogStartOffset or > LogEndOffset wraps
// kerr.OffsetOutOfRange. offset == high watermark returns no chunks.
func (l *Log) Read(offset int64, maxBytes int64, minOneBatch bool) (ReadResult, error) {
	for try := 0; ; try++ {
		res, err := l.read(l.readerView(), offset, maxBytes, minOneBatch)
		if errors.Is(err, errSegmentGone) && try < maxViewRetries {
			continue
		}
		return res, err
	}
}

func (l *Log) read(v *view, offset, maxBytes int64, minOneBatch bool) (ReadResult, error) {
	res := ReadResult{HighWatermark: v.hw, LogStartOffset: v.logStart, LogEndOffset: v.leo, LastStableOffset: v.lso()}
	if offset < v.logStart || offset > v.leo {
		return res, fmt.Errorf("read %s at %d: log is [%d, %d]: %w", l.dir, offset, v.logStart, v.leo, kerr.OffsetOutOfRange)
	}
	if offset >= v.hw {
		return res, nil
	}
	hdr := make([]byte, record.HeaderSize)
	for i := floorSegment(v.segs, offset); i < len(v.segs); i++ {
		s := v.segs[i]
		limit := v.limitFor(s)
		if limit == 0 {
			if s.base > v.hwBase {
				break
			}
			continue
		}
		oi, _, err := s.indexes()
		if err != nil {
			return res, err
		}
		f, err := s.acquire()
		if err != nil {
			return res, err
		}
		var pos int64
		if offset > s.base {
			_, p := lookupOffsetIndex(oi.snapshot(), offset-s.base)
			pos = int64(p)
		}
		start, end, err := scanRange(f, hdr, oi.snapshot(), pos, limit, offset, maxBytes, minOneBatch)
		if err != nil {
			f.Release()
			return res, fmt.Errorf("read %s segment %d: %w", l.dir, s.base, err)
		}
		if start < 0 {
			f.Release()
			continue // compacted gap: the next segment holds the next batch
		}
		res.OlderSegment = s.base < v.hwBase
		if !res.OlderSegment {
			res.Readable = limit - start
		}
		if end <= start {
			f.Release() // first batch larger than maxBytes and !minOneBatch
			return res, nil
		}
		res.Chunks = []Chunk{{File: f, Pos: start, Len: end - start}}
		return res, nil
	}
	return res, nil
}

// scanRange walks batch headers from pos (a batch start) to find the first
// batch with lastOffset >= offset, then extends over whole batches while
// they fit in maxBytes. start is -1 when no batch qualifies below limit.
// Once the first batch is found, the sparse offset index (idx, whose
// positions are batch starts) lets it skip ahead to the last indexed batch
// start within both limit and maxBytes: every batch before that position
// fits, so only the headers after it are read.
func scanRange(f *SegmentFile, hdr, idx []byte, pos, limit, offset, maxBytes int64, minOne bool) (start, end int64, err error) {
	start = -1
	for pos < limit {
		h, err := readHeader(f.f, pos, hdr)
		if err != nil {
			return -1, -1, err
		}
		if start < 0 {
			if h.last >= offset {
				start = pos
				if h.size > maxBytes {
					if minOne {
						return start, pos + h.size, nil
					}
					return start, start, nil
				}
				pos += h.size
				if p := lastIndexedPos(idx, min(limit, start+maxBytes)); p > pos {
					pos = p
				}
				continue
			}
		} else if pos+h.size-start > maxBytes {
			break
		}
		pos += h.size
	}
	if start < 0 {
		return -1, -1, nil
	}
	return start, min(pos, limit), nil
}

// readBatch reads the whole batch at pos.
func readBatch(f *SegmentFile, pos int64, size int64) (record.Batch, error) {
	buf := make([]byte, size)
	n, err := f.f.ReadAt(buf, pos)
	if int64(n) < size {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return record.Batch(buf), nil
}

// OffsetForTimestamp returns the first offset whose record timestamp >= ts
// and that timestamp (ListOffsets by time); found=false past the end.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error) {
	for try := 0; ; try++ {
		offset, timestamp, found, err = l.offsetForTimestamp(l.v.Load(), ts)
		if errors.Is(err, errSegmentGone) && try < maxViewRetries {
			continue
		}
		return offset, timestamp, found, err
	}
}

func (l *Log) offsetForTimestamp(v *view, ts int64) (int64, int64, bool, error) {
	hdr := make([]byte, record.HeaderSize)
	for _, s := range v.segs {
		limit := v.limitFor(s)
		if limit == 0 {
			if s.base > v.hwBase {
				break
			}
			continue
		}
		maxTs, _, err := s.maxTimestamp()
		if err != nil {
			return 0, 0, false, err
		}
		if maxTs < ts {
			continue
		}
		oi, ti, err := s.indexes()
		if err != nil {
			return 0, 0, false, err
		}
		var pos int64
		if rel, ok := lookupTimeIndex(ti.snapshot(), ts); ok {
			_, p := lookupOffsetIndex(oi.snapshot(), int64(rel))
			pos = int64(p)
		}
		f, err := s.acquire()
		if err != nil {
			return 0, 0, false, err
		}
		for pos < limit {
			h, err := readHeader(f.f, pos, hdr)
			if err != nil {
				f.Release()
				return 0, 0, false, err
			}
			if h.maxTs >= ts && h.last >= v.logStart {
				b, err := readBatch(f, pos, h.size)
				if err != nil {
					f.Release()
					return 0, 0, false, err
				}
				off, t, ok, err := firstRecordAtOrAfter(b, ts, v.logStart)
				if err != nil {
					f.Release()
					return 0, 0, false, err
				}
				if ok {
					f.Release()
					return off, t, true, nil
				}
			}
			pos += h.size
		}
		f.Release()
	}
	return -1, -1, false, nil
}

// firstRecordAtOrAfter finds the first record with timestamp >= ts and
// offset >= minOffset in b.
func firstRecordAtOrAfter(b record.Batch, ts, minOffset int64) (int64, int64, bool, error) {
	if b.IsControl() {
		return 0, 0, false, nil
	}
	base, baseTs := b.BaseOffset(), b.BaseTimestamp()
	lat := b.IsLogAppendTime()
	var off, t int64
	found := false
	errStop := errors.New("stop")
	err := b.ForEachRecord(func(r *record.Record) error {
		rt := baseTs + r.TimestampDelta
		if lat {
			rt = b.MaxTimestamp()
		}
		o := base + int64(r.OffsetDelta)
		if rt >= ts && o >= minOffset {
			off, t, found = o, rt, true
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, 0, false, fmt.Errorf("decode batch at offset %d: %w", base, err)
	}
	return off, t, found, nil
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets -3), or (-1, -1) for an empty log.
func (l *Log) MaxTimestamp() (offset int64, timestamp int64, err error) {
	v := l.v.Load()
	offset, timestamp = -1, -1
	for _, s := range v.segs {
		if v.limitFor(s) == 0 {
			continue
		}
		ts, off, err := s.maxTimestamp()
		if err != nil {
			if errors.Is(err, errSegmentGone) {
				continue
			}
			return -1, -1, err
		}
		if ts > timestamp && off < v.hw {
			timestamp, offset = ts, off
		}
	}
	if offset < 0 {
		return -1, -1, nil
	}
	// Refine the batch's last offset to the record carrying the timestamp.
	if o, t, ok, err := l.OffsetForTimestamp(timestamp); err == nil && ok && t == timestamp {
		offset = o
	}
	return offset, timestamp, nil
}
