package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Append writes a producer's batches to the partition with the topic's
// rules (null keys rejected on compacted topics, compression.type applied,
// min.insync.replicas checked for acks=all) and, for acks=-1, waits until
// they are durable (unless strata.durable.acks=false). Errors wrap kerr
// codes.
func (p *Partition) Append(ctx context.Context, records []byte, acks int16) (storage.AppendResult, error) {
	res, err := p.AppendNoWait(records, acks)
	if err != nil || acks != -1 {
		return res, err
	}
	return res, p.WaitDurable(ctx, res)
}

// AppendNoWait is Append without the durability wait: the caller calls
// WaitDurable (for acks=-1) before answering, so that the next request can
// be appended meanwhile and share the same fsync.
func (p *Partition) AppendNoWait(records []byte, acks int16) (storage.AppendResult, error) {
	ts := p.settings.Load()
	if acks == -1 && ts.minISR > len(p.ISR) {
		return storage.AppendResult{}, fmt.Errorf("min.insync.replicas=%d but the ISR of %s-%d has %d replica(s): %w",
			ts.minISR, p.Topic, p.Index, len(p.ISR), kerr.NotEnoughReplicas)
	}
	if ts.compression >= 0 {
		var err error
		records, err = recompress(records, ts.compression)
		if err != nil {
			return storage.AppendResult{}, err
		}
	}
	return p.Log.Append(records, storage.AppendOptions{LeaderEpoch: p.LeaderEpoch, RequireKeys: ts.requireKeys})
}

// AppendCoordinator durably appends a batch written by the broker itself
// (the group coordinator's transactional offset commits: producer id and
// epoch set, base sequence -1): no sequence checks, the transaction it
// opens is closed by a marker. It returns after fsync (unless
// strata.durable.acks=false).
func (p *Partition) AppendCoordinator(ctx context.Context, batch []byte) (storage.AppendResult, error) {
	res, err := p.Log.Append(batch, storage.AppendOptions{LeaderEpoch: p.LeaderEpoch, Coordinator: true})
	if err != nil {
		return res, err
	}
	return res, p.WaitDurable(ctx, res)
}

// WaitDurable waits until an append is fsynced (acks=all), unless
// strata.durable.acks=false. A ctx timeout wraps kerr.RequestTimedOut.
func (p *Partition) WaitDurable(ctx context.Context, res storage.AppendResult) error {
	if !p.broker.durableAcks {
		return nil
	}
	if err := p.Log.WaitDurable(ctx, res.LastOffset+1); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("wait for fsync of %s-%d: %v: %w", p.Topic, p.Index, err, kerr.RequestTimedOut)
		}
		return err
	}
	return nil
}

// recompress rewrites every batch whose codec differs from target
// (compression.type other than producer), keeping offsets deltas,
// timestamps and producer fields.
func recompress(records []byte, target record.Compression) ([]byte, error) {
	rest := records
	same := true
	for len(rest) > 0 {
		b, r, err := record.Next(rest)
		if err != nil {
			return nil, fmt.Errorf("split produced batches: %w", asCorrupt(err))
		}
		if b.Compression() != target {
			same = false
		}
		rest = r
	}
	if same {
		return records, nil
	}
	var out []byte
	rest = records
	for len(rest) > 0 {
		b, r, _ := record.Next(rest)
		rest = r
		if b.Compression() == target || b.IsControl() {
			out = append(out, b...)
			continue
		}
		if err := record.Validate(b); err != nil {
			return nil, err
		}
		recs, err := b.Records()
		if err != nil {
			return nil, fmt.Errorf("decode batch for recompression: %v: %w", err, kerr.CorruptMessage)
		}
		h := b.Header()
		h.Attributes = h.Attributes&^record.AttrCompressionMask | int16(target)
		nb, err := record.Build(h, recs)
		if err != nil {
			return nil, fmt.Errorf("recompress batch: %v: %w", err, kerr.CorruptMessage)
		}
		out = append(out, nb...)
	}
	return out, nil
}

// asCorrupt maps a framing error to CorruptMessage unless it already
// carries a Kafka error.
func asCorrupt(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return err
	}
	return fmt.Errorf("%v: %w", err, kerr.CorruptMessage)
}

// Read returns whole batches from offset (see storage.Log.Read).
func (p *Partition) Read(offset, maxBytes int64, minOneBatch bool) (storage.ReadResult, error) {
	return p.Log.Read(offset, maxBytes, minOneBatch)
}

// DeleteRecords advances the log start offset; compact-only topics refuse
// with PolicyViolation.
func (p *Partition) DeleteRecords(before int64) (int64, error) {
	cfg := p.Log.Config()
	if cfg.Compact && !cfg.Delete {
		return -1, fmt.Errorf("records of %s-%d cannot be deleted: cleanup.policy=compact: %w", p.Topic, p.Index, kerr.PolicyViolation)
	}
	return p.Log.DeleteRecords(before)
}
