package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/replica"
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
	return p.appendNoWait(records, acks, false, nil)
}

// AppendProduce appends a client's produce: AppendNoWait when verify is
// nil, else (a produce request with a transactional id, whose batches are
// producer pid's) as KIP-890 part 1 has Kafka's ReplicaManager and
// UnifiedLog do it: when pid has no
// transaction open in this partition, verify (the check with the
// transaction coordinator, AddPartitionsToTxn v4 VerifyOnly when it is on
// another broker) runs first, under a verification guard that any
// transactional batch of pid appended meanwhile (a marker ending the
// transaction) invalidates, so the append is then refused
// INVALID_TXN_STATE; when pid's transaction is open here it appends
// without asking the coordinator.
func (p *Partition) AppendProduce(records []byte, acks int16, pid int64, verify func() error) (storage.AppendResult, error) {
	if verify == nil {
		return p.appendNoWait(records, acks, false, nil)
	}
	guard := p.Log.StartTxnVerification(pid)
	if guard != nil {
		if err := verify(); err != nil {
			return storage.AppendResult{BaseOffset: -1, LastOffset: -1}, err
		}
	}
	return p.appendNoWait(records, acks, true, guard)
}

// NeedsTxnVerification reports whether a transactional produce of
// producer pid must be verified with its transaction coordinator before
// it is appended here (pid has no transaction open in this partition,
// KIP-890 part 1), and starts that verification: AppendProduce then
// carries the same guard. The produce handler asks it for all the
// partitions of a request first, to verify them with one request, as
// Kafka's ReplicaManager collects them for AddPartitionsToTxnManager.
func (p *Partition) NeedsTxnVerification(pid int64) bool {
	return p.Log.StartTxnVerification(pid) != nil
}

func (p *Partition) appendNoWait(records []byte, acks int16, verifyTxn bool, guard *storage.VerificationGuard) (storage.AppendResult, error) {
	ts := p.settings.Load()
	lead := p.Leadership()
	epoch := lead.LeaderEpoch
	r := p.repl.Load()
	if r != nil {
		// A replicated partition: only its leader appends, at its leader
		// epoch; acks=all needs the ISR at min.insync.replicas.
		e, err := r.CheckAppend(acks)
		if err != nil {
			return storage.AppendResult{BaseOffset: -1, LastOffset: -1}, err
		}
		epoch = e
	} else if lead.Leader != p.broker.nodeID {
		return storage.AppendResult{BaseOffset: -1, LastOffset: -1}, p.notLeader(lead)
	} else if acks == -1 && ts.minISR > len(lead.ISR) {
		return storage.AppendResult{}, fmt.Errorf("min.insync.replicas=%d but the ISR of %s-%d has %d replica(s): %w",
			ts.minISR, p.Topic, p.Index, len(lead.ISR), kerr.NotEnoughReplicas)
	}
	if ts.compression >= 0 {
		var err error
		records, err = recompress(records, ts.compression)
		if err != nil {
			return storage.AppendResult{}, err
		}
	}
	res, err := p.Log.Append(records, storage.AppendOptions{LeaderEpoch: epoch, RequireKeys: ts.requireKeys, VerifyTxn: verifyTxn, TxnGuard: guard})
	if err == nil && r != nil && !res.Duplicate {
		r.Appended()
	}
	return res, err
}

// AppendCoordinator appends a batch written by the broker itself (the
// group coordinator's transactional offset commits: producer id and epoch
// set, base sequence -1): no sequence checks, the transaction it opens is
// closed by a marker. Call WaitSynced before acting on it.
func (p *Partition) AppendCoordinator(batch []byte) (storage.AppendResult, error) {
	lead := p.Leadership()
	epoch := lead.LeaderEpoch
	r := p.repl.Load()
	if r == nil && lead.Leader != p.broker.nodeID {
		return storage.AppendResult{BaseOffset: -1, LastOffset: -1}, p.notLeader(lead)
	}
	if r != nil {
		e, err := r.CheckAppend(-1)
		if err != nil {
			return storage.AppendResult{BaseOffset: -1, LastOffset: -1}, err
		}
		epoch = e
	}
	res, err := p.Log.Append(batch, storage.AppendOptions{LeaderEpoch: epoch, Coordinator: true})
	if err != nil {
		return res, err
	}
	if r != nil {
		r.Appended()
	}
	return res, nil
}

// AppendMarker writes a transaction marker (see storage.Log.AppendMarker)
// as this partition's leader; call WaitDurable for its acknowledgement.
func (p *Partition) AppendMarker(pid int64, epoch int16, coordinatorEpoch int32, commit bool) (int64, error) {
	lead := p.Leadership()
	leaderEpoch := lead.LeaderEpoch
	r := p.repl.Load()
	if r == nil && lead.Leader != p.broker.nodeID {
		return -1, p.notLeader(lead)
	}
	if r != nil {
		e, err := r.CheckAppend(1)
		if err != nil {
			return -1, err
		}
		leaderEpoch = e
	}
	off, err := p.Log.AppendMarker(pid, epoch, coordinatorEpoch, commit, leaderEpoch)
	if err == nil && r != nil {
		r.Appended()
	}
	return off, err
}

// SetReplica makes the partition replicated: produce, markers and
// acknowledgements go through r (its leadership, ISR and high watermark).
// nil returns it to a single replica.
func (p *Partition) SetReplica(r *replica.Replica) { p.repl.Store(r) }

// Replica is the partition's replication state, nil when it has one
// replica.
func (p *Partition) Replica() *replica.Replica { return p.repl.Load() }

// ServeReplicaFetch answers one partition of a follower's Fetch (see
// replica.Replica.ServeFetch); NOT_LEADER_OR_FOLLOWER when the partition
// has one replica.
func (p *Partition) ServeReplicaFetch(f replica.FetchPart) (replica.FetchAnswer, error) {
	r := p.repl.Load()
	if r == nil {
		return replica.FetchAnswer{}, fmt.Errorf("%s-%d has a single replica: %w", p.Topic, p.Index, kerr.NotLeaderForPartition)
	}
	return r.ServeFetch(f)
}

// WaitDurable waits until an append is acknowledged for acks=all: on a
// replicated partition until the high watermark covers it (every ISR
// member holds it, fsynced under strata.durable.acks), otherwise until it
// is fsynced unless strata.durable.acks=false: that setting trades the
// durability of acknowledged produce requests only. A ctx timeout wraps
// kerr.RequestTimedOut.
func (p *Partition) WaitDurable(ctx context.Context, res storage.AppendResult) error {
	if r := p.repl.Load(); r != nil {
		return r.WaitAcked(ctx, res.LastOffset+1)
	}
	if !p.broker.durableAcks {
		return nil
	}
	return p.WaitSynced(ctx, res)
}

// WaitSynced waits until an append is fsynced whatever
// strata.durable.acks says: the group and transaction coordinators' own
// records (group metadata, offsets, transaction state, transaction
// markers) are always durable before they are acted on; on a replicated
// partition they are also acknowledged by the ISR first (Kafka writes
// them with acks=all). A ctx timeout wraps kerr.RequestTimedOut.
func (p *Partition) WaitSynced(ctx context.Context, res storage.AppendResult) error {
	if r := p.repl.Load(); r != nil {
		if err := r.WaitAcked(ctx, res.LastOffset+1); err != nil {
			return err
		}
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
		// Checked as a stream before anything is decoded into memory.
		if _, err := record.CheckRecords(b, record.CheckOptions{}); err != nil {
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

// The storage value types that cross the broker's API: the protocol layer
// names them here and reaches a partition's log only through Partition's
// methods, the one gate where leadership checks belong.
type (
	// AppendResult is what an append assigned (storage.AppendResult).
	AppendResult = storage.AppendResult
	// RecordError is one rejected record of a batch (storage.RecordError).
	RecordError = storage.RecordError
	// ReadResult is a read's chunks and offsets (storage.ReadResult).
	ReadResult = storage.ReadResult
	// Chunk is a byte range of a segment file (storage.Chunk).
	Chunk = storage.Chunk
	// AbortedTxn is an aborted transaction of a range (storage.AbortedTxn).
	AbortedTxn = storage.AbortedTxn
	// SegmentInfo describes one segment (storage.SegmentInfo).
	SegmentInfo = storage.SegmentInfo
	// ProducerInfo is one active producer (storage.ProducerInfo).
	ProducerInfo = storage.ProducerInfo
	// Waiter is one long poll's wake-up over many partitions
	// (storage.Waiter).
	Waiter = storage.Waiter
)

// NewWaiter returns a waiter for AddWaiter.
func NewWaiter() *Waiter { return storage.NewWaiter() }

// AddWaiter makes the partition fire w with tag whenever its high
// watermark or last stable offset moves, until RemoveWaiter (a long-poll
// fetch waits on all its partitions with one waiter).
func (p *Partition) AddWaiter(w *Waiter, tag int) { p.Log.AddWaiter(w, tag) }

// RemoveWaiter undoes AddWaiter.
func (p *Partition) RemoveWaiter(w *Waiter) { p.Log.RemoveWaiter(w) }

// AddEndWaiter makes the partition fire w with tag whenever its log end
// moves (and when its leadership changes, or its log fails or closes),
// until RemoveEndWaiter: a leader's replica fetches long-poll on it.
// See storage.Log.AddEndWaiter for the check after adding it.
func (p *Partition) AddEndWaiter(w *Waiter, tag int) { p.Log.AddEndWaiter(w, tag) }

// RemoveEndWaiter undoes AddEndWaiter.
func (p *Partition) RemoveEndWaiter(w *Waiter) { p.Log.RemoveEndWaiter(w) }

// ReadCommitted is Read up to the last stable offset (READ_COMMITTED).
func (p *Partition) ReadCommitted(offset, maxBytes int64, minOneBatch bool) (ReadResult, error) {
	return p.Log.ReadCommitted(offset, maxBytes, minOneBatch)
}

// HighWatermark is the end of what consumers may read.
func (p *Partition) HighWatermark() int64 { return p.Log.HighWatermark() }

// HighWatermarkChanged returns a channel closed at the next high
// watermark move (fetch long polls wait on it).
func (p *Partition) HighWatermarkChanged() <-chan struct{} { return p.Log.HighWatermarkChanged() }

// LastStableOffset is the first offset of the oldest open transaction (the
// high watermark when none is open).
func (p *Partition) LastStableOffset() int64 { return p.Log.LastStableOffset() }

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.Log.LogStartOffset() }

// LogEndOffset is the offset the next append gets.
func (p *Partition) LogEndOffset() int64 { return p.Log.LogEndOffset() }

// Size is the partition's size on disk in bytes.
func (p *Partition) Size() int64 { return p.Log.Size() }

// AbortedTransactions lists the aborted transactions overlapping
// [from, to) (a READ_COMMITTED fetch's answer).
func (p *Partition) AbortedTransactions(from, to int64) []AbortedTxn {
	return p.Log.AbortedTransactions(from, to)
}

// MaxTimestamp is the offset and timestamp of the record with the largest
// timestamp (ListOffsets MAX_TIMESTAMP).
func (p *Partition) MaxTimestamp() (offset, timestamp int64, err error) { return p.Log.MaxTimestamp() }

// OffsetForTimestamp finds the first offset whose timestamp is at least ts.
func (p *Partition) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	return p.Log.OffsetForTimestamp(ts)
}

// EndOffsetForEpoch is OffsetForLeaderEpoch's answer from the leader epoch
// checkpoint.
func (p *Partition) EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	return p.Log.EndOffsetForEpoch(epoch)
}

// Producers lists the partition's active producers (DescribeProducers).
func (p *Partition) Producers() []ProducerInfo { return p.Log.Producers() }

// Segments describes the partition's segments, oldest first.
func (p *Partition) Segments() []SegmentInfo { return p.Log.Segments() }
