package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/strata-io/strata/internal/record"
)

// A producer snapshot holds only each producer's last batch (Kafka's
// layout), but duplicate detection needs the last five: a producer that had
// five requests in flight when the broker died resends them after the
// restart, and a segment roll (which takes a snapshot) may have happened
// between them. backfillProducerBatches restores the missing earlier
// batches of the snapshot's producers by reading batch headers backwards
// from the snapshot offset, one index interval at a time, until every
// producer has five batches, hit an epoch change, or dedupScanBytes were
// read.

// dedupScanBytes bounds the bytes of batch headers read before a snapshot.
func dedupScanBytes(cfg *Config) int64 { return max(8<<20, 5*int64(cfg.MaxMessageBytes)) }

// Chunks of a segment are read backwards, each starting at an indexed
// batch at least minChunk after the previous start.
const minChunk = 64 << 10

// backfillProducerBatches completes the dedup window of the producers
// loaded from the snapshot at snapOff (l.ps) from the batches below it.
func (l *Log) backfillProducerBatches(snapOff int64) error {
	need := map[int64]*producerEntry{}
	for pid, e := range l.ps.m {
		if n := len(e.batches); n > 0 && n < maxBatchesPerProducer {
			need[pid] = e
		}
	}
	if len(need) == 0 || snapOff <= l.segs[0].base {
		return nil
	}
	found := map[int64][]batchMeta{} // earlier batches per producer, oldest first
	budget := dedupScanBytes(l.cfg.Load())
	hdr := make([]byte, record.HeaderSize)
	chunk := map[int64][]batchMeta{}
	stop := map[int64]bool{}
	for i := floorSegment(l.segs, snapOff-1); i >= 0 && len(need) > 0 && budget > 0; i-- {
		s := l.segs[i]
		if s.base >= snapOff {
			continue
		}
		oi, _, err := s.indexes()
		if err != nil {
			return err
		}
		f, err := s.acquire()
		if err != nil {
			return err
		}
		size := s.size.Load()
		// Chunk starts: 0 and indexed batch positions at least minChunk
		// apart, up to the one holding snapOff-1.
		starts := []int64{0}
		ents := oi.snapshot()
		limit := int64(-1)
		if snapOff-1-s.base <= 1<<31 {
			limit = snapOff - 1 - s.base
		}
		for k := 0; k+offsetEntrySize <= len(ents); k += offsetEntrySize {
			rel := int64(int32(binary.BigEndian.Uint32(ents[k:])))
			pos := int64(int32(binary.BigEndian.Uint32(ents[k+4:])))
			if limit >= 0 && rel > limit {
				break
			}
			if pos >= starts[len(starts)-1]+minChunk && pos < size {
				starts = append(starts, pos)
			}
		}
		// Headers come from windows while batches are small (one read
		// for many), one read each past large ones (headerReader): a
		// window of whole chunks read the bodies of large batches.
		hr := headerReader{f: f.f, size: size, prev: -1}
		for c := len(starts) - 1; c >= 0 && len(need) > 0 && budget > 0; c-- {
			end := size
			if c+1 < len(starts) {
				end = starts[c+1]
			}
			clear(chunk)
			clear(stop)
			hr.prev = -1
			for pos := starts[c]; pos < end; {
				hb, err := hr.header(pos)
				var h hdrInfo
				if err == nil {
					copy(hdr, hb)
					h, err = headerInfo(record.Batch(hdr))
				}
				if err != nil {
					f.Release()
					return fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
				}
				if h.base >= snapOff {
					break
				}
				b := record.Batch(hdr)
				if e := need[b.ProducerID()]; e != nil && h.last < e.batches[0].firstOffset {
					pid := b.ProducerID()
					switch {
					case b.ProducerEpoch() != e.epoch:
						// Batches before an epoch change are outside the window.
						chunk[pid] = chunk[pid][:0]
						stop[pid] = true
					case !b.IsControl():
						first, last := b.BaseSequence(), seqAdd(b.BaseSequence(), int64(b.LastOffsetDelta()))
						if first < 0 {
							first, last = -1, -1 // coordinator-origin batch
						}
						chunk[pid] = append(chunk[pid], batchMeta{firstSeq: first, lastSeq: last, firstOffset: h.base, lastOffset: h.last})
					}
				}
				pos += h.size
			}
			budget -= end - starts[c]
			for pid, bs := range chunk {
				found[pid] = append(append([]batchMeta(nil), bs...), found[pid]...)
			}
			for pid, e := range need {
				if stop[pid] || len(found[pid])+len(e.batches) >= maxBatchesPerProducer {
					delete(need, pid)
				}
			}
		}
		f.Release()
	}
	for pid, bs := range found {
		e := l.ps.m[pid]
		all := append(bs, e.batches...)
		if n := len(all); n > maxBatchesPerProducer {
			all = all[n-maxBatchesPerProducer:]
		}
		e.batches = append([]batchMeta(nil), all...)
	}
	return nil
}
