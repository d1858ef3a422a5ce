package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	_, err := l.scan(l.HighWatermark(), l.Read, fn)
	return err
}

// ScanBatchesToEnd is ScanBatches up to the log end offset, past the high
// watermark: a coordinator that just became the leader of its partition
// loads everything its log holds, as Kafka's loaders read to the log end
// (GroupMetadataManager.doLoadGroupsAndOffsets,
// TransactionStateManager.loadTransactionMetadata, CoordinatorLoaderImpl):
// a new leader's high watermark may still lag what the previous leader
// acknowledged. It returns the offset after the last batch passed, which
// the coordinator then waits to see committed (WaitCommitted).
func (l *Log) ScanBatchesToEnd(fn func(b record.Batch) error) (end int64, err error) {
	return l.scan(l.LogEndOffset(), l.ReadUpToEnd, fn)
}

// ErrUncommitted is the error of Uncommitted and WaitCommitted: the log
// holds records past its high watermark, which its replicas may not have.
var ErrUncommitted = errors.New("records past the high watermark")

// Uncommitted returns ErrUncommitted, without waiting, when the log ends
// past its high watermark.
func (l *Log) Uncommitted() error {
	if hw, leo := l.HighWatermark(), l.LogEndOffset(); hw < leo {
		return fmt.Errorf("high watermark %d below the log end %d: %w", hw, leo, ErrUncommitted)
	}
	return nil
}

// WaitCommitted waits until the high watermark reaches end (and the
// records below it are fsynced, as WaitDurable), for at most bound (0: as
// long as ctx lasts); when bound passes first the error wraps
// ErrUncommitted.
func (l *Log) WaitCommitted(ctx context.Context, end int64, bound time.Duration) error {
	if l.HighWatermark() >= end && l.DurableEnd() >= end {
		return nil
	}
	if bound > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	if err := l.WaitDurable(ctx, end); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && bound > 0 {
			return fmt.Errorf("high watermark %d below %d after %v: %w", l.HighWatermark(), end, bound, ErrUncommitted)
		}
		return err
	}
	return nil
}

func (l *Log) scan(end int64, read func(offset, maxBytes int64, minOneBatch bool) (ReadResult, error), fn func(b record.Batch) error) (int64, error) {
	off := l.LogStartOffset()
	for off < end {
		res, err := read(off, scanReadBytes, true)
		if err != nil {
			return off, fmt.Errorf("scan %s at %d: %w", l.dir, off, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return off, nil
		}
		before := off
		err = scanChunks(res.Chunks, &off, fn)
		res.Release()
		if err != nil {
			return off, err
		}
		if off == before {
			return off, fmt.Errorf("scan %s at %d: no progress", l.dir, off)
		}
	}
	return off, nil
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
