package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
)

// AppendOptions carry per-request data for Append.
type AppendOptions struct {
	LeaderEpoch int32 // stamped into partitionLeaderEpoch of each batch
	// RequireKeys rejects (kerr.InvalidRecord, nothing appended) any record
	// with a null key: set for compacted topics.
	RequireKeys bool
	// Coordinator marks an append by the broker itself (transaction
	// markers, the group coordinator's transactional offset commits):
	// control batches are accepted, baseOffset is not checked, and data
	// batches of a producer id may have baseSequence -1: they get no
	// sequence checks (only the producer epoch is checked) and still open
	// the producer's transaction when transactional.
	Coordinator bool
	// VerifyTxn refuses (kerr.InvalidTxnState, nothing appended) a
	// transactional data batch of a producer whose transaction is not open
	// in this partition unless TxnGuard is the guard the log holds for it
	// (StartTxnVerification, verify.go; KIP-890 part 1). Set for produce
	// requests with a transactional id.
	VerifyTxn bool
	TxnGuard  *VerificationGuard
}

// AppendResult describes where a produce landed.
type AppendResult struct {
	BaseOffset     int64 // offset of the first record appended
	LastOffset     int64
	LogAppendTime  int64 // -1 unless LogAppendTime
	LogStartOffset int64
	// Duplicate is true when an idempotent producer resent batches that were
	// already appended; the offsets are the original ones and nothing new was
	// written.
	Duplicate bool
	// RecordErrors lists the bad records (index within batch, message) when
	// the append was rejected because of individual records (Produce v8+).
	RecordErrors []RecordError
}

// RecordError is one rejected record.
type RecordError struct {
	Index   int32
	Message string
}

// AppendError is returned when individual records were rejected; it wraps
// the Kafka error and carries the per-record details (also in the
// AppendResult).
type AppendError struct {
	Err          error
	RecordErrors []RecordError
}

// Error implements error.
func (e *AppendError) Error() string {
	return fmt.Sprintf("%v (%d bad records)", e.Err, len(e.RecordErrors))
}

// Unwrap returns the Kafka error.
func (e *AppendError) Unwrap() error { return e.Err }

// Append validates records (one or more v2 batches as received from a
// producer), assigns offsets in place, and writes them. It either appends
// everything or nothing. Errors wrap kerr codes: CorruptMessage,
// MessageTooLarge, RecordListTooLarge, InvalidRecord, InvalidTimestamp,
// OutOfOrderSequenceNumber, InvalidProducerEpoch, DuplicateSequenceNumber,
// InvalidTxnState (a non-transactional batch from a producer whose
// transaction is open), TransactionCoordinatorFenced (a marker from an
// older coordinator epoch), KafkaStorageError. A transactional data batch
// opens its producer's transaction in this partition; a COMMIT/ABORT
// control batch (Coordinator only, see AppendMarker) closes it. It returns
// once the bytes are written to the file (acks=1 meaning); call
// WaitDurable for acks=all.
func (l *Log) Append(records []byte, opts AppendOptions) (AppendResult, error) {
	res := AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}
	cfg := l.cfg.Load()
	batches, err := l.validate(records, cfg, opts)
	if err != nil {
		var ae *AppendError
		if errors.As(err, &ae) {
			res.RecordErrors = ae.RecordErrors
		}
		return res, fmt.Errorf("append to %s: %w", l.dir, err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	res.LogStartOffset = l.logStart
	if l.closed {
		return res, fmt.Errorf("append to %s: log closed: %w", l.dir, kerr.NotLeaderForPartition)
	}
	if l.failed != nil {
		return res, fmt.Errorf("append to %s: %v: %w", l.dir, l.failed, kerr.KafkaStorageError)
	}
	if opts.LeaderEpoch < l.epochFence {
		return res, fmt.Errorf("append to %s: leader epoch %d is being replaced by %d: %w", l.dir, opts.LeaderEpoch, l.epochFence, kerr.NotLeaderForPartition)
	}
	nowT := l.now()
	nowMs := nowT.UnixMilli()
	if err := l.loadProducers(); err != nil {
		return res, fmt.Errorf("append to %s: %v: %w", l.dir, err, kerr.KafkaStorageError)
	}

	// Producer state (idempotence, transactions): staged so a rejected
	// request changes nothing. Offsets are known up front: the batches go
	// at the log end offset in order (a roll does not move it).
	pt := l.ps.begin()
	var done []completedTxn
	off := l.mark.leo
	for i, b := range batches {
		base := off
		off += int64(b.LastOffsetDelta()) + 1
		pid := b.ProducerID()
		if pid < 0 {
			continue
		}
		if b.IsControl() {
			m, ok, err := parseMarker(b)
			if err != nil {
				return res, fmt.Errorf("append to %s: batch %d: %w", l.dir, i, err)
			}
			if !ok {
				continue
			}
			if err := pt.checkMarker(pid, b.ProducerEpoch(), m); err != nil {
				return res, fmt.Errorf("append to %s: %w", l.dir, err)
			}
			if first := pt.applyMarker(pid, b.ProducerEpoch(), m, nowMs); first >= 0 {
				done = append(done, completedTxn{pid: pid, first: first, last: base, abort: !m.commit})
			}
			continue
		}
		epoch := b.ProducerEpoch()
		first := b.BaseSequence()
		last := seqAdd(first, int64(b.LastOffsetDelta()))
		if opts.Coordinator {
			// Coordinator-origin data (transactional offset commits):
			// no sequence numbers, only the epoch is checked.
			if err := pt.checkEpoch(pid, epoch); err != nil {
				return res, fmt.Errorf("append to %s: %w", l.dir, err)
			}
		} else {
			dup, err := pt.check(pid, epoch, first, last)
			if err != nil {
				return res, fmt.Errorf("append to %s: %w", l.dir, err)
			}
			if dup != nil {
				if len(batches) == 1 {
					res.BaseOffset, res.LastOffset, res.Duplicate = dup.firstOffset, dup.lastOffset, true
					return res, nil
				}
				return res, fmt.Errorf("append to %s: batch %d of producer %d is a duplicate inside a multi-batch request: %w", l.dir, i, pid, kerr.DuplicateSequenceNumber)
			}
		}
		if opts.VerifyTxn && b.IsTransactional() && !pt.txnOpen(pid) {
			if err := l.checkTxnVerified(pid, opts.TxnGuard); err != nil {
				return res, fmt.Errorf("append to %s: %w", l.dir, err)
			}
		}
		if !b.IsTransactional() && pt.txnOpen(pid) {
			return res, fmt.Errorf("append to %s: non-transactional batch from producer %d while its transaction is open: %w", l.dir, pid, kerr.InvalidTxnState)
		}
		pt.record(pid, epoch, batchMeta{firstSeq: first, lastSeq: last, firstOffset: base, lastOffset: off - 1}, nowMs)
		if b.IsTransactional() {
			pt.openTxn(pid, base)
		}
	}

	// Room on the disk above the free-space reserve (reserve.go).
	if err := l.reserve.take(int64(len(records))); err != nil {
		return res, fmt.Errorf("append to %s: %w", l.dir, err)
	}
	// Roll if needed (Kafka's UnifiedLog.maybeRoll), then assign offsets in place.
	first := batches[0]
	incomingLast := l.mark.leo + lastDelta(batches)
	if err := l.maybeRollForAppend(int64(len(records)), first.MaxTimestamp(), incomingLast, nowMs, cfg); err != nil {
		return res, fmt.Errorf("append to %s: %w", l.dir, err)
	}
	off = l.mark.leo
	res.BaseOffset = off
	if l.epochs.assign(opts.LeaderEpoch, off) {
		if err := l.writeEpochCheckpointForAppend(); err != nil {
			l.epochs.entries = l.epochs.entries[:len(l.epochs.entries)-1]
			return res, fmt.Errorf("append to %s: leader epoch checkpoint: %v: %w", l.dir, err, kerr.KafkaStorageError)
		}
	}
	for _, b := range batches {
		b.SetBaseOffset(off)
		b.SetPartitionLeaderEpoch(opts.LeaderEpoch)
		if cfg.LogAppendTime && !b.IsControl() {
			b.SetLogAppendTime(nowMs)
			res.LogAppendTime = nowMs
		}
		off = b.LastOffset() + 1
	}
	res.LastOffset = off - 1

	if err := l.writeLocked(records, batches, off); err != nil {
		return res, fmt.Errorf("append to %s: %w", l.dir, err)
	}
	pt.commit()
	if len(l.verifying) > 0 {
		// A transactional batch opened or ended its producer's
		// transaction here: its verification is used up (Kafka's
		// updateProducers clears the VerificationStateEntry).
		for _, b := range batches {
			if b.IsTransactional() {
				delete(l.verifying, b.ProducerID())
			}
		}
	}
	if err := l.completeTxns(done); err != nil {
		return res, err
	}
	l.publish()
	return res, l.flushPolicyLocked(cfg, nowT)
}

// writeLocked writes whole batches (offsets assigned) at the end of the
// active segment and moves the log end to end (under l.mu). A failed write
// leaves no byte behind.
func (l *Log) writeLocked(records []byte, batches []record.Batch, end int64) error {
	if l.epochStale {
		// The file still names epochs that start at or past the old log
		// end (loadEpochs), or lacks the epoch an empty log was given
		// (AssignEpochs): rewritten before the end moves past them, or a
		// later load would keep them over these batches' offsets (or
		// lose this epoch's entry).
		if err := l.writeEpochCheckpointForAppend(); err != nil {
			return fmt.Errorf("leader epoch checkpoint: %v: %w", err, kerr.KafkaStorageError)
		}
	}
	s := l.active
	if err := l.loadWriter(s); err != nil {
		return fmt.Errorf("active segment %d: %v: %w", s.base, err, kerr.KafkaStorageError)
	}
	pos := s.size.Load()
	f, err := s.writeFile()
	if err != nil {
		return fmt.Errorf("write: %v: %w", err, kerr.KafkaStorageError)
	}
	if _, err := f.WriteAt(records, pos); err != nil {
		l.reserve.noteWriteError(err)
		// Leave no byte behind: cut the file back to the last whole batch.
		if terr := f.Truncate(pos); terr != nil {
			return l.fail(fmt.Errorf("write failed (%v) and truncate failed: %w", err, terr))
		}
		return fmt.Errorf("write: %v: %w", err, kerr.KafkaStorageError)
	}
	// Sparse index entries, one per crossed index.interval.bytes. They are
	// kept in memory and written out when the segment closes: the active
	// segment is always past the recovery point, so after a crash its
	// indexes are rebuilt from the .log anyway.
	p := pos
	for _, b := range batches {
		h, _ := headerInfo(b)
		s.bld.add(h, p)
		p += h.size
		l.noteBatchEnd(writeMark{leo: h.last + 1, base: s.base, pos: p})
	}
	if s.firstBatchTs < 0 && pos == 0 {
		s.firstBatchTs = batches[0].MaxTimestamp()
	}
	s.maxTs.Store(s.bld.maxTs)
	s.maxTsOff.Store(s.bld.maxTsOff)
	s.tsKnown.Store(true)
	s.size.Store(p)
	l.mark = writeMark{leo: end, base: s.base, pos: p}
	l.dirty = true
	l.changed = true
	return nil
}

// flushPolicyLocked asks for the fsync an append calls for: a group commit
// under durable acks, else flush.messages / flush.ms.
func (l *Log) flushPolicyLocked(cfg *Config, nowT time.Time) error {
	switch {
	case cfg.Durable:
		if !l.syncer.request(l) {
			return l.flushLocked()
		}
	case l.mark.leo-l.recoveryPoint.Load() >= cfg.FlushMessages:
		return l.flushLocked()
	case cfg.FlushMs != math.MaxInt64 && sinceMs(nowT, l.lastFlush) >= cfg.FlushMs:
		l.lastFlush = nowT.UnixNano()
		l.syncer.request(l)
	}
	return nil
}

func lastDelta(batches []record.Batch) int64 {
	var n int64
	for _, b := range batches {
		n += int64(b.LastOffsetDelta()) + 1
	}
	return n - 1
}

// validate checks a produce request's batches before anything is
// written (Kafka's UnifiedLog.analyzeAndValidateRecords and LogValidator).
func (l *Log) validate(records []byte, cfg *Config, opts AppendOptions) ([]record.Batch, error) {
	if len(records) == 0 {
		return nil, fmt.Errorf("no record batch: %w", kerr.InvalidRecord)
	}
	if int64(len(records)) > cfg.SegmentBytes {
		return nil, fmt.Errorf("%d bytes exceed segment.bytes %d: %w", len(records), cfg.SegmentBytes, kerr.RecordListTooLarge)
	}
	var batches []record.Batch
	nowMs := l.now().UnixMilli()
	for rest := records; len(rest) > 0; {
		b, r, err := record.Next(rest)
		if err != nil {
			if errors.Is(err, record.ErrTruncated) || errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("batch %d: %v: %w", len(batches), err, kerr.CorruptMessage)
			}
			return nil, fmt.Errorf("batch %d: %w", len(batches), err)
		}
		rest = r
		if b.Size() > int(cfg.MaxMessageBytes) {
			return nil, fmt.Errorf("batch of %d bytes exceeds max.message.bytes %d: %w", b.Size(), cfg.MaxMessageBytes, kerr.MessageTooLarge)
		}
		if err := record.Validate(b); err != nil {
			return nil, fmt.Errorf("batch %d: %w", len(batches), err)
		}
		if b.NumRecords() == 0 {
			return nil, fmt.Errorf("batch %d has no records: %w", len(batches), kerr.InvalidRecord)
		}
		if !opts.Coordinator {
			if b.IsControl() {
				return nil, fmt.Errorf("batch %d: control batch from a client: %w", len(batches), kerr.InvalidRecord)
			}
			if b.BaseOffset() != 0 {
				return nil, fmt.Errorf("batch %d: baseOffset %d, producers must send 0: %w", len(batches), b.BaseOffset(), kerr.InvalidRecord)
			}
		}
		if b.ProducerID() >= 0 && b.BaseSequence() < 0 && !b.IsControl() && !opts.Coordinator {
			return nil, fmt.Errorf("batch %d: producer id %d with baseSequence %d: %w", len(batches), b.ProducerID(), b.BaseSequence(), kerr.InvalidRecord)
		}
		if b.IsTransactional() && b.ProducerID() < 0 {
			return nil, fmt.Errorf("batch %d: transactional batch without a producer id: %w", len(batches), kerr.InvalidRecord)
		}
		batches = append(batches, b)
	}
	if len(batches) > 1 && batches[0].Compression() != record.None {
		return nil, fmt.Errorf("compressed request with %d batches: %w", len(batches), kerr.InvalidRecord)
	}
	// Every record is read, as Kafka's LogValidator does: the records
	// present must be what the header says (record.CheckRecords), keys on
	// compacted topics and each record's timestamp are checked.
	check := record.CheckOptions{CollectNullKeys: opts.RequireKeys, CheckTimestamps: !cfg.LogAppendTime,
		NowMs: nowMs, BeforeMs: cfg.TimestampBeforeMaxMs, AfterMs: cfg.TimestampAfterMaxMs}
	var badKeys, badTimes []RecordError
	for i, b := range batches {
		o := check
		if b.IsControl() {
			o.CollectNullKeys, o.CheckTimestamps = false, false
		}
		info, err := record.CheckRecords(b, o)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", i, err)
		}
		for _, idx := range info.NullKeys {
			badKeys = append(badKeys, RecordError{Index: idx, Message: "compacted topic cannot accept message without key"})
		}
		for _, idx := range info.BadTimestamps {
			badTimes = append(badTimes, RecordError{Index: idx, Message: fmt.Sprintf(
				"timestamp of record %d is out of range: it must be within [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]", idx)})
		}
		// Kafka sets a CreateTime batch's maxTimestamp to the largest
		// record timestamp (LogValidator setMaxTimestamp): a client's
		// wrong value would mislead the time index, retention and rolls.
		if !cfg.LogAppendTime && !b.IsControl() && b.MaxTimestamp() != info.MaxTimestamp {
			b.SetMaxTimestamp(info.MaxTimestamp)
		}
	}
	if len(badKeys) > 0 {
		return nil, &AppendError{Err: fmt.Errorf("%d records without key on a compacted topic: %w", len(badKeys), kerr.InvalidRecord), RecordErrors: badKeys}
	}
	if len(badTimes) > 0 {
		return nil, &AppendError{Err: fmt.Errorf("%d records with a timestamp out of range: %w", len(badTimes), kerr.InvalidTimestamp), RecordErrors: badTimes}
	}
	return batches, nil
}

// maybeRollForAppend rolls the active segment when the incoming bytes
// would not fit or it is too old (Kafka's LogSegment.shouldRoll).
func (l *Log) maybeRollForAppend(incoming, incomingMaxTs, incomingLast, nowMs int64, cfg *Config) error {
	s := l.active
	if err := l.loadWriter(s); err != nil {
		return fmt.Errorf("active segment %d: %v: %w", s.base, err, kerr.KafkaStorageError)
	}
	size := s.size.Load()
	if size == 0 {
		return nil
	}
	roll := size > cfg.SegmentBytes-incoming ||
		s.oi.full() || s.ti.full() ||
		incomingLast-s.base > math.MaxInt32
	if !roll {
		var waited int64
		if s.firstBatchTs >= 0 && incomingMaxTs >= 0 {
			waited = incomingMaxTs - s.firstBatchTs
		} else {
			waited = nowMs - s.createdMs
		}
		roll = waited > cfg.maxSegmentMs()-s.jitterMs
	}
	if !roll {
		return nil
	}
	return l.rollLocked()
}

// Roll closes the active segment and starts a new one (no-op if empty).
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil || l.active.size.Load() == 0 {
		return nil
	}
	return l.rollLocked()
}

// rollLocked closes the active segment and opens a new one at the log end
// offset. The old segment gets its final time-index entry and trimmed,
// fsynced indexes. In durable mode its .log is fsynced here, before the
// next segment gets any byte; otherwise by the next group-commit round (as
// Kafka flushes rolled segments asynchronously), after which the recovery
// point checkpoint moves past it.
// A producer snapshot is taken at the new base.
func (l *Log) rollLocked() error {
	if err := l.loadProducers(); err != nil {
		return err // failed the log
	}
	l.changed = true
	old := l.active
	oldFile, err := old.acquire()
	if err != nil {
		return l.fail(fmt.Errorf("roll: active segment %d: %w", old.base, err))
	}
	if err := l.closeActiveFiles(old, false, false); err != nil {
		oldFile.Release()
		return l.fail(err)
	}
	switch {
	case l.cfg.Load().Durable:
		// The old segment is made durable before any byte goes to the
		// next one: otherwise a power cut could keep a later segment's
		// bytes but lose this one's tail, a gap that recovery cannot tell
		// from compaction. Usually cheap: group-commit rounds already
		// synced most of it.
		err := l.syncDirsLocked()
		if err == nil {
			err = oldFile.f.Sync()
		}
		oldFile.Release()
		if err != nil {
			return l.fail(fmt.Errorf("roll: fdatasync segment %d: %w", old.base, err))
		}
		l.setSynced(l.mark, true)
	case l.dirty:
		l.closing = append(l.closing, oldFile)
	default:
		oldFile.Release()
	}
	l.dirty = false
	ns := l.newSegment(l.mark.leo)
	if err := l.createSegmentFiles(ns, false); err != nil {
		return l.fail(err)
	}
	segs := make([]*segment, len(l.segs), len(l.segs)+1)
	copy(segs, l.segs)
	l.segs = append(segs, ns)
	if err := l.openActive(0); err != nil {
		return l.fail(err)
	}
	l.mark = writeMark{leo: l.mark.leo, base: ns.base, pos: 0}
	if l.synced.leo == l.mark.leo {
		l.synced = l.mark
	}
	if l.flushed.leo == l.mark.leo {
		l.flushed = l.mark
	}
	l.ps.expire(l.now().UnixMilli(), l.pidExpiration.Milliseconds())
	if err := l.writeSnapshot(ns.base); err != nil { // also fsyncs the directory
		return l.fail(err)
	}
	if len(l.closing) == 0 {
		// The rolled segment is durable: the recovery point enters the
		// new one, so a crash never rescans a closed segment.
		if err := l.setRecoveryPoint(ns.base, true); err != nil {
			return l.fail(err)
		}
	} else if !l.syncer.request(l) {
		if err := l.flushLocked(); err != nil {
			return err
		}
	}
	// The old segment is now an ordinary cached closed segment.
	if f, err := old.acquire(); err == nil {
		f.Release()
	}
	l.publish()
	l.checkInvariants(true)
	return nil
}
