package cleaner

import (
	"encoding/binary"
	"fmt"

	"github.com/strata-io/strata/internal/record"
)

// filter decides, batch by batch, what one cleaning round keeps. It is a
// pure function of the batch bytes and the round's inputs (Kafka's
// cleanInto / MemoryRecords.filterTo rules).
type filter struct {
	m *OffsetMap // key -> latest offset over the mapped dirty range
	// nowMs is the round's start time; tombstone horizons are compared to it
	// and new horizons are nowMs + deleteRetentionMs.
	nowMs             int64
	deleteRetentionMs int64
	// producerLast maps each active producer id to the last offset of its
	// last data batch; that batch is kept (empty if need be).
	producerLast map[int64]int64
	// producerEpoch maps each producer id with live state to its current
	// epoch: a marker of a producer without a data batch in producerLast
	// is kept (empty if need be) when it carries that epoch (fencing).
	producerEpoch map[int64]int16
	// upper is the round's end offset: a batch ending right below it is
	// kept (empty if need be), as Kafka does since KAFKA-17076.
	upper int64
	// txn follows the transactions of the pass. nil (unit tests of the
	// non-transactional rules) copies transactional data and markers
	// unchanged.
	txn *txnTracker
	// markers says which transaction markers may be removed.
	markers markerPolicy

	stats roundStats
	// Scratch buffers reused across batches.
	scratch rawRecord
	recs    []rawRecord
	hashes  []keyHash
	kept    []rawRecord
	body    []byte
	out     []byte
}

// roundStats are the counters of one round.
type roundStats struct {
	BytesRead         int64
	BytesWritten      int64
	RecordsRead       int64
	RecordsRemoved    int64
	TombstonesRemoved int64
	NullKeysRemoved   int64
	BatchesRewritten  int64
	BatchesEmptied    int64
	BatchesDropped    int64
	HorizonsStamped   int64
	// AbortedRemoved counts records of aborted transactions removed.
	AbortedRemoved int64
	// MarkersRemoved counts transaction markers removed.
	MarkersRemoved int64
	// TombstonesRetained counts tombstones kept because their delete
	// horizon has not passed; NextHorizonMs is the earliest such horizon
	// (0 when none), when the next of them becomes removable.
	TombstonesRetained int64
	NextHorizonMs      int64
}

func (s *roundStats) add(o roundStats) {
	s.BytesRead += o.BytesRead
	s.BytesWritten += o.BytesWritten
	s.RecordsRead += o.RecordsRead
	s.RecordsRemoved += o.RecordsRemoved
	s.TombstonesRemoved += o.TombstonesRemoved
	s.NullKeysRemoved += o.NullKeysRemoved
	s.BatchesRewritten += o.BatchesRewritten
	s.BatchesEmptied += o.BatchesEmptied
	s.BatchesDropped += o.BatchesDropped
	s.HorizonsStamped += o.HorizonsStamped
	s.AbortedRemoved += o.AbortedRemoved
	s.MarkersRemoved += o.MarkersRemoved
	s.TombstonesRetained += o.TombstonesRetained
	if o.NextHorizonMs > 0 && (s.NextHorizonMs == 0 || o.NextHorizonMs < s.NextHorizonMs) {
		s.NextHorizonMs = o.NextHorizonMs
	}
}

// apply returns what to write for batch b: b itself (unchanged, copied
// verbatim), a rebuilt batch with the same base and last offset, a 61-byte
// empty batch, or nil (drop the batch). The result may alias b or the
// filter's scratch buffer: write it before the next call.
func (f *filter) apply(b record.Batch) ([]byte, error) {
	n := int(b.NumRecords())
	f.stats.RecordsRead += int64(n)
	if b.Magic() != record.MagicV2 {
		return b, nil // no producer state, no transactions, no horizon
	}
	if b.IsControl() {
		// Control batches (transaction markers) are never deduplicated by
		// key.
		return f.applyControl(b)
	}
	if f.txn == nil && b.IsTransactional() {
		// No view of transactions: leave transactional data alone.
		return b, nil
	}
	if f.txn != nil && f.txn.dataBatch(b) {
		// Records of aborted transactions are removed regardless of keys.
		return f.dropAll(b, n, true)
	}
	if n == 0 { // an empty batch left by an earlier cleaning
		if f.retainEmpty(b) {
			return b, nil
		}
		f.stats.BatchesDropped++
		return nil, nil
	}
	data, err := batchRecords(b)
	if err != nil {
		return nil, fmt.Errorf("decompress batch at offset %d: %w", b.BaseOffset(), err)
	}
	base := b.BaseOffset()
	hasHorizon := b.HasDeleteHorizon()
	horizon := int64(-1)
	if hasHorizon {
		horizon = b.BaseTimestamp()
	}
	latest := f.m.Latest()
	recs := f.recs[:0]
	hs := f.hashes[:0]
	err = scanRecords(data, n, &f.scratch, func(r *rawRecord) error {
		recs = append(recs, *r)
		var h keyHash
		if base+int64(r.OffsetDelta) <= latest && r.Key != nil {
			h = f.m.hashKey(r.Key)
		}
		hs = append(hs, h)
		return nil
	})
	f.recs, f.hashes = recs[:0], hs[:0]
	if err != nil {
		return nil, fmt.Errorf("decode batch at offset %d: %w", base, err)
	}
	f.m.sink ^= f.m.touch(hs)
	kept := f.kept[:0]
	needHorizon := false
	for i := range recs {
		r := &recs[i]
		off := base + int64(r.OffsetDelta)
		switch {
		case off > latest:
			// Not covered by this round's map: keep undecided.
		case r.Key == nil:
			f.stats.RecordsRemoved++
			f.stats.NullKeysRemoved++
			continue
		case off < f.m.getHash(hs[i]):
			f.stats.RecordsRemoved++
			continue
		case r.NullValue:
			if hasHorizon && f.nowMs >= horizon {
				f.stats.RecordsRemoved++
				f.stats.TombstonesRemoved++
				continue
			}
			h := horizon
			if !hasHorizon {
				needHorizon = true
				h = f.nowMs + f.deleteRetentionMs
			}
			f.stats.TombstonesRetained++
			if f.stats.NextHorizonMs == 0 || h < f.stats.NextHorizonMs {
				f.stats.NextHorizonMs = h
			}
		}
		kept = append(kept, *r)
	}
	f.kept = kept[:0]
	if len(kept) == n && !needHorizon {
		return b, nil // storage's SegmentWriter checks its CRC
	}
	if len(kept) == 0 {
		return f.dropAll(b, 0, false)
	}
	return f.rebuild(b, kept, needHorizon)
}

// dropAll removes every record of b: it returns the 61-byte empty form of
// b when b must stay (retainEmpty), else nil. n records are counted as
// removed (aborted tells whether they belong to an aborted transaction).
func (f *filter) dropAll(b record.Batch, n int, aborted bool) ([]byte, error) {
	f.stats.RecordsRemoved += int64(n)
	if aborted {
		f.stats.AbortedRemoved += int64(n)
	}
	if !f.retainEmpty(b) {
		f.stats.BatchesDropped++
		return nil, nil
	}
	if b.NumRecords() == 0 {
		return b, nil // already empty
	}
	// Never build new bytes (with a fresh CRC) from a corrupt batch.
	if err := record.ValidateStored(b); err != nil {
		return nil, fmt.Errorf("batch at offset %d: %w", b.BaseOffset(), err)
	}
	f.stats.BatchesEmptied++
	f.out = appendEmptyBatch(f.out[:0], b)
	return f.out, nil
}

// rebuild returns b with only the kept records (in order), stamped with a
// delete horizon of nowMs + delete.retention.ms when needHorizon. Every
// header field but the length, attributes (horizon bit), base timestamp,
// max timestamp, count and CRC is kept: base offset, last offset delta,
// producer id/epoch/base sequence, transactional/control bits, leader
// epoch, codec.
func (f *filter) rebuild(b record.Batch, kept []rawRecord, needHorizon bool) ([]byte, error) {
	base := b.BaseOffset()
	// Never build new bytes (with a fresh CRC) from a corrupt batch.
	if err := record.ValidateStored(b); err != nil {
		return nil, fmt.Errorf("batch at offset %d: %w", base, err)
	}
	attrs := b.Attributes()
	oldBase := b.BaseTimestamp()
	newBase := oldBase
	if needHorizon {
		newBase = f.nowMs + f.deleteRetentionMs
		attrs |= record.AttrHasDeleteHorizon
		f.stats.HorizonsStamped++
	}
	body := f.body[:0]
	maxTs := int64(-1)
	for i := range kept {
		r := &kept[i]
		ts := oldBase + r.TsDelta
		maxTs = max(maxTs, ts)
		if needHorizon {
			body = appendWithTsDelta(body, r, ts-newBase)
		} else {
			body = append(body, r.raw...)
		}
	}
	f.body = body[:0]
	if b.IsLogAppendTime() {
		maxTs = b.MaxTimestamp() // preserved, as Kafka does
	}
	out := append(f.out[:0], b[:record.HeaderSize]...)
	if c := b.Compression(); c == record.None {
		out = append(out, body...)
	} else {
		z, err := record.Compress(c, body)
		if err != nil {
			return nil, fmt.Errorf("recompress batch at offset %d: %w", base, err)
		}
		out = append(out, z...)
	}
	be := binary.BigEndian
	be.PutUint32(out[8:], uint32(len(out)-record.LogOverhead))
	be.PutUint16(out[21:], uint16(attrs))
	be.PutUint64(out[27:], uint64(newBase))
	be.PutUint64(out[35:], uint64(maxTs))
	be.PutUint32(out[57:], uint32(len(kept)))
	be.PutUint32(out[17:], record.Batch(out).ComputeCRC())
	f.out = out
	f.stats.BatchesRewritten++
	return out, nil
}

// retainEmpty reports whether b must stay (as an empty batch) even when
// none of its records survive: the last batch of an active idempotent
// producer (so the next leader or a restart rebuilds its sequence state
// and it never sees OUT_OF_ORDER_SEQUENCE_NUMBER), a marker with the
// current epoch of an active producer that has no data batch in its
// state (fencing), or the batch ending the round.
func (f *filter) retainEmpty(b record.Batch) bool {
	last := b.LastOffset()
	if pid := b.ProducerID(); pid >= 0 {
		if lo, ok := f.producerLast[pid]; ok {
			if lo == last {
				return true
			}
		} else if ep, ok := f.producerEpoch[pid]; ok && b.IsControl() && b.ProducerEpoch() == ep {
			// The producer has no data batch left in its state: its
			// marker carries its latest epoch.
			return true
		}
	}
	return last+1 == f.upper
}

// appendEmptyBatch appends the 61-byte header-only form of b (Kafka's
// writeEmptyHeader): same base offset, lastOffsetDelta, leader epoch,
// producer id/epoch/base sequence, max timestamp and transactional/control
// and timestamp-type bits; no codec, no records, baseTimestamp -1.
func appendEmptyBatch(dst []byte, b record.Batch) []byte {
	n := len(dst)
	dst = append(dst, b[:record.HeaderSize]...)
	out := dst[n:]
	be := binary.BigEndian
	be.PutUint32(out[8:], uint32(record.HeaderSize-record.LogOverhead))
	attrs := b.Attributes() &^ (record.AttrCompressionMask | record.AttrHasDeleteHorizon)
	be.PutUint16(out[21:], uint16(attrs))
	be.PutUint64(out[27:], ^uint64(0)) // baseTimestamp -1
	be.PutUint32(out[57:], 0)          // recordsCount
	be.PutUint32(out[17:], record.Batch(out).ComputeCRC())
	return dst
}
