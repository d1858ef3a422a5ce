package cleaner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// roundResult describes one finished cleaning round.
type roundResult struct {
	Start        time.Time
	Duration     time.Duration
	FirstDirty   int64
	EndOffset    int64 // new checkpoint
	Segments     int   // source segments recopied
	Groups       int   // output segments
	MapKeys      int
	MapUtil      float64
	MapFull      bool // the map filled before the dirty range ended
	MapDuration  time.Duration
	SwapDuration time.Duration
	Stats        roundStats
	Cleanable    cleanable
	Forced       bool
	NothingToDo  bool
}

// worker is one cleaner goroutine's private state: its share of the
// dedupe buffer (allocated on first use) and its read buffer.
type worker struct {
	id      int
	mapMem  int64
	m       *OffsetMap
	buf     []byte
	scratch rawRecord
	offs    []int64   // scratch: offsets of one batch's keyed records
	hashes  []keyHash // scratch: their key hashes
}

// ioBufferSize is the read buffer of each worker (log.cleaner.io.buffer.size
// is 512 KiB shared by read and write; writes go straight to the file).
const ioBufferSize = 1 << 20

func (w *worker) offsetMap() (*OffsetMap, error) {
	if w.m == nil {
		m, err := NewOffsetMap(w.mapMem, DefaultLoadFactor)
		if err != nil {
			return nil, err
		}
		w.m = m
	} else {
		w.m.Clear()
	}
	return w.m, nil
}

// release returns the map's pages to the kernel between rounds.
func (w *worker) release() {
	if w.m != nil {
		w.m.Clear()
	}
}

// free releases the worker's memory when it exits.
func (w *worker) free() {
	if w.m != nil {
		w.m.Free()
		w.m = nil
	}
	w.buf = nil
}

// cleanLog runs one round over l (Kafka's Cleaner.doClean): build the
// offset map over the dirty range, recopy every closed segment below the
// map's end in groups through storage's crash-safe swap, and return the new
// first dirty offset. ckpt < 0 means no checkpoint yet.
func (c *Cleaner) cleanLog(ctx context.Context, w *worker, l *storage.Log, ckpt int64, force bool) (roundResult, error) {
	start := c.now()
	nowMs := start.UnixMilli()
	res := roundResult{Start: start, Forced: force}
	cfg := l.Config()
	segs := l.Segments()
	cl := computeCleanable(segs, l.LogStartOffset(), l.LogEndOffset(), l.LastStableOffset(), ckpt, cfg, nowMs)
	res.Cleanable = cl
	res.FirstDirty = cl.FirstDirty
	if !force && !cl.eligible(cfg.MinCleanableDirtyRatio) {
		res.NothingToDo = true
		res.EndOffset = cl.FirstDirty
		return res, nil
	}
	m, err := w.offsetMap()
	if err != nil {
		return res, err
	}
	// The dirty range holds at most this many keyed records.
	m.Limit(cl.FirstUncleanable - cl.FirstDirty)
	if err := c.buildMap(ctx, w, l, segs, cl, m, &res); err != nil {
		return res, err
	}
	res.MapDuration = c.now().Sub(start)
	end := m.Latest() + 1
	res.EndOffset = end
	res.MapKeys = m.Size()
	res.MapUtil = m.Utilization()
	groups := groupSegments(segs, end, cfg)
	if len(groups) == 0 {
		res.NothingToDo = true
		return res, nil
	}
	f := &filter{
		m:                 m,
		nowMs:             nowMs,
		deleteRetentionMs: cfg.DeleteRetentionMs,
		producerLast:      l.ActiveProducerLastBatches(),
		upper:             end,
	}
	// One pass over every group in offset order, so a marker sees the
	// batches of its transaction in earlier groups.
	last := groups[len(groups)-1]
	f.txn = newTxnTracker(l.AbortedTransactions(groups[0][0].BaseOffset, last[len(last)-1].NextOffset))
	f.producerEpoch = producerEpochs(l)
	f.markers = markerPolicy{commit: true, abort: removeAbortMarkers}
	var batch swapBatch
	defer batch.abort()
	for i, g := range groups {
		if err := c.cleanGroup(ctx, w, l, g, f, &batch); err != nil {
			res.Stats.add(f.stats)
			return res, err
		}
		if batch.full(cfg.SegmentBytes) || i == len(groups)-1 {
			n := len(batch.bases)
			if err := c.swap(l, &batch, &res); err != nil {
				res.Stats.add(f.stats)
				return res, err
			}
			res.Segments += n
		}
		res.Groups++
	}
	res.Stats.add(f.stats)
	res.Duration = c.now().Sub(start)
	return res, nil
}

// buildMap puts every keyed record of [FirstDirty, FirstUncleanable) into
// m until it is full, except records of aborted transactions (the range
// ends at or below the last stable offset, so every transaction in it is
// decided). m.Latest() ends as the last offset covered: the end
// of the range, or the offset before the first record that did not fit
// (map full mid-segment is fine, KAFKA-3894). After a fully mapped segment
// Latest is the segment's last offset even across offset holes
// (KAFKA-8764), so every round makes progress.
func (c *Cleaner) buildMap(ctx context.Context, w *worker, l *storage.Log, segs []storage.SegmentInfo, cl cleanable, m *OffsetMap, res *roundResult) error {
	m.SetLatest(cl.FirstDirty - 1)
	errFull := errors.New("map full")
	txn := newTxnTracker(l.AbortedTransactions(cl.FirstDirty, cl.FirstUncleanable))
	for _, s := range segs {
		if s.Active || s.NextOffset <= cl.FirstDirty || s.BaseOffset >= cl.FirstUncleanable {
			continue
		}
		err := c.forEachBatch(ctx, w, l, s.BaseOffset, func(b record.Batch) error {
			if b.LastOffset() < cl.FirstDirty {
				return nil
			}
			if err := record.ValidateStored(b); err != nil {
				return fmt.Errorf("segment %d batch at offset %d: %w", s.BaseOffset, b.BaseOffset(), err)
			}
			// Control batches only move the transaction state; records of
			// aborted transactions never enter the map.
			mapIt := false
			if b.IsControl() {
				txn.controlBatch(b)
			} else {
				mapIt = !txn.dataBatch(b) && b.NumRecords() > 0
			}
			if mapIt {
				base := b.BaseOffset()
				data, err := batchRecords(b)
				if err != nil {
					return fmt.Errorf("decompress batch at offset %d: %w", base, err)
				}
				offs, hs := w.offs[:0], w.hashes[:0]
				err = scanRecords(data, int(b.NumRecords()), &w.scratch, func(r *rawRecord) error {
					if off := base + int64(r.OffsetDelta); off >= cl.FirstDirty && r.Key != nil {
						offs = append(offs, off)
						hs = append(hs, m.hashKey(r.Key))
					}
					return nil
				})
				w.offs, w.hashes = offs[:0], hs[:0]
				if err != nil {
					return fmt.Errorf("map batch at offset %d: %w", base, err)
				}
				m.sink ^= m.touch(hs)
				for i, h := range hs {
					if !m.putHash(h, offs[i]) {
						m.SetLatest(offs[i] - 1)
						return errFull
					}
				}
			}
			m.SetLatest(b.LastOffset())
			return nil
		}, &res.Stats)
		if err == errFull {
			res.MapFull = true
			return nil
		}
		if err != nil {
			return err
		}
		m.SetLatest(s.NextOffset - 1)
	}
	return nil
}

// forEachBatch reads segment base's batches in order and calls fn (the
// batch aliases a buffer reused afterwards). Callers check CRCs where it
// matters: the map build for every batch it maps (a corrupt batch must not
// put phantom offsets into the map), the filter for every batch it
// rebuilds, and storage's SegmentWriter for every batch written verbatim.
func (c *Cleaner) forEachBatch(ctx context.Context, w *worker, l *storage.Log, base int64, fn func(record.Batch) error, st *roundStats) error {
	sf, size, err := l.OpenSegment(base)
	if err != nil {
		if !hasSegments(l, base) {
			err = errors.Join(errSegmentsChanged, err)
		}
		return fmt.Errorf("open segment %d: %w", base, err)
	}
	defer sf.Release()
	br := newBatchReader(ctx, sf.File(), 0, size, nil, c.throttle)
	if br.mm == nil { // ReadAt mode needs a buffer
		if w.buf == nil {
			w.buf = make([]byte, ioBufferSize)
		}
		br.buf = w.buf
	}
	defer br.close()
	defer func() {
		st.BytesRead += br.read
		if cap(br.buf) <= ioBufferSize {
			w.buf = br.buf[:cap(br.buf)]
		} // a grown buffer is dropped, so memory returns to normal
	}()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := br.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("segment %d: %w", base, err)
		}
		if len(b) < record.HeaderSize {
			return fmt.Errorf("segment %d: batch at position shorter than a header: %w", base, kerr.CorruptMessage)
		}
		if err := fn(b); err != nil {
			return err
		}
	}
}

// groupSegments splits the closed segments below end into runs that fit
// one output segment: total size <= segment.bytes, estimated index size <=
// segment.index.bytes, and offsets within int32 of the group's base.
func groupSegments(segs []storage.SegmentInfo, end int64, cfg storage.Config) [][]storage.SegmentInfo {
	var groups [][]storage.SegmentInfo
	var cur []storage.SegmentInfo
	var size, idx int64
	interval := int64(cfg.IndexIntervalBytes)
	if interval <= 0 {
		interval = 4096
	}
	idxEst := func(s storage.SegmentInfo) int64 { return (s.Size/interval + 1) * 12 }
	for _, s := range segs {
		if s.Active || s.BaseOffset >= end {
			break
		}
		if len(cur) > 0 && (size+s.Size > cfg.SegmentBytes ||
			(cfg.SegmentIndexBytes > 0 && idx+idxEst(s) > int64(cfg.SegmentIndexBytes)) ||
			s.NextOffset-1-cur[0].BaseOffset > math.MaxInt32) {
			groups = append(groups, cur)
			cur, size, idx = nil, 0, 0
		}
		cur = append(cur, s)
		size += s.Size
		idx += idxEst(s)
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// swapBatch holds cleaned segments written and not yet swapped in: the
// outputs of consecutive groups, swapped in by one ReplaceSegments so that
// their fsyncs run together and the directory is synced twice for all of
// them rather than twice for each. With tiny segments (segment.bytes of a
// few hundred bytes, every batch its own segment, as in kafka-go's
// compaction test) the per-swap fsyncs were the whole cost of a round.
type swapBatch struct {
	bases   []int64 // the replaced segments
	writers []*storage.SegmentWriter
	bytes   int64 // bytes of the writers
}

// maxSwapGroups bounds the output segments swapped in at once (open files
// and index buffers held by the batch).
const maxSwapGroups = 64

// minSwapBytes is how many bytes of cleaned output a batch may hold
// before it is swapped in even when segment.bytes is smaller.
const minSwapBytes = 16 << 20

// full reports whether the batch should be swapped in now: at
// maxSwapGroups outputs, or once the outputs hold segment.bytes (at least
// minSwapBytes), so that the disk holds at most about one extra segment of
// cleaned data before the originals go (Kafka swaps each group's output at
// once: with the default 1 GiB segment.bytes every group is still swapped
// on its own).
func (b *swapBatch) full(segmentBytes int64) bool {
	return len(b.writers) >= maxSwapGroups || b.bytes >= max(segmentBytes, minSwapBytes)
}

// abort deletes the files of writers not swapped in.
func (b *swapBatch) abort() {
	for _, sw := range b.writers {
		_ = sw.Abort()
	}
	*b = swapBatch{}
}

// cleanGroup filters the segments of g into one new segment and adds it
// to batch.
func (c *Cleaner) cleanGroup(ctx context.Context, w *worker, l *storage.Log, g []storage.SegmentInfo, f *filter, batch *swapBatch) error {
	sw, err := l.NewCleanedSegment(g[0].BaseOffset)
	if err != nil {
		return fmt.Errorf("new cleaned segment %d: %w", g[0].BaseOffset, err)
	}
	batch.writers = append(batch.writers, sw)
	for _, s := range g {
		batch.bases = append(batch.bases, s.BaseOffset)
		err := c.forEachBatch(ctx, w, l, s.BaseOffset, func(b record.Batch) error {
			out, err := f.apply(b)
			if err != nil || out == nil {
				return err
			}
			if err := sw.Append(out); err != nil {
				return fmt.Errorf("write cleaned segment %d: %w", g[0].BaseOffset, err)
			}
			f.stats.BytesWritten += int64(len(out))
			return c.throttle.wait(ctx, len(out))
		}, &f.stats)
		if err != nil {
			return err
		}
	}
	batch.bytes += sw.Size()
	return nil
}

// swap replaces the batch's source segments with its outputs and empties
// it.
func (c *Cleaner) swap(l *storage.Log, batch *swapBatch, res *roundResult) error {
	first := batch.bases[0]
	if c.hooks.beforeSwap != nil {
		c.hooks.beforeSwap(first)
	}
	swapStart := c.now()
	if err := l.ReplaceSegments(batch.bases, batch.writers); err != nil {
		if !hasSegments(l, batch.bases...) {
			err = errors.Join(errSegmentsChanged, err)
		}
		return fmt.Errorf("swap cleaned segments from %d: %w", first, err)
	}
	res.SwapDuration += c.now().Sub(swapStart)
	*batch = swapBatch{} // swapped: Abort would be a no-op
	return nil
}

// errSegmentsChanged marks a round aborted because segments it was
// cleaning went away meanwhile (retention of a compact,delete topic,
// DeleteRecords, topic deletion): not a failure, the next pass starts over.
var errSegmentsChanged = errors.New("segments changed during cleaning")

// hasSegments reports whether every base is still a closed segment of l.
func hasSegments(l *storage.Log, bases ...int64) bool {
	have := map[int64]bool{}
	for _, s := range l.Segments() {
		if !s.Active {
			have[s.BaseOffset] = true
		}
	}
	for _, b := range bases {
		if !have[b] {
			return false
		}
	}
	return true
}
