package storage

import (
	"fmt"

	"github.com/strata-io/strata/internal/record"
)

// scanReadBytes is how much ScanBatches reads per step.
const scanReadBytes = 1 << 20

// ScanBatches calls fn with every batch from the log start offset to the
// high watermark, in offset order; the coordinators replay their state
// topics (__consumer_offsets, __transaction_state) with it. A batch that
// starts before the log start offset (a compacted log's first batch) is
// still passed whole; fn may keep b. An error from fn stops the scan and
// is returned as is.
func (l *Log) ScanBatches(fn func(b record.Batch) error) error {
	return l.scan(l.HighWatermark(), l.Read, fn)
}

// ScanBatchesToEnd is ScanBatches up to the log end offset, past the high
// watermark: a coordinator that just became the leader of its partition
// loads everything its log holds, as Kafka's loaders read to the log end
// (GroupMetadataManager.doLoadGroupsAndOffsets,
// TransactionStateManager.loadTransactionMetadata): a new leader's high
// watermark may still lag what the previous leader acknowledged.
func (l *Log) ScanBatchesToEnd(fn func(b record.Batch) error) error {
	return l.scan(l.LogEndOffset(), l.ReadUpToEnd, fn)
}

func (l *Log) scan(end int64, read func(offset, maxBytes int64, minOneBatch bool) (ReadResult, error), fn func(b record.Batch) error) error {
	off := l.LogStartOffset()
	for off < end {
		res, err := read(off, scanReadBytes, true)
		if err != nil {
			return fmt.Errorf("scan %s at %d: %w", l.dir, off, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return nil
		}
		before := off
		err = scanChunks(res.Chunks, &off, fn)
		res.Release()
		if err != nil {
			return err
		}
		if off == before {
			return fmt.Errorf("scan %s at %d: no progress", l.dir, off)
		}
	}
	return nil
}

// scanChunks splits chunks into batches, skips those below *off, calls fn
// and advances *off past each batch passed.
func scanChunks(chunks []Chunk, off *int64, fn func(b record.Batch) error) error {
	for _, c := range chunks {
		buf := make([]byte, c.Len)
		if _, err := c.File.File().ReadAt(buf, c.Pos); err != nil {
			return fmt.Errorf("scan chunk at %d: %w", c.Pos, err)
		}
		for len(buf) > 0 {
			b, rest, err := record.Next(buf)
			if err != nil {
				return fmt.Errorf("scan batch at %d: %w", *off, err)
			}
			buf = rest
			if b.LastOffset() < *off {
				continue
			}
			if err := fn(b); err != nil {
				return err
			}
			*off = b.LastOffset() + 1
		}
	}
	return nil
}
