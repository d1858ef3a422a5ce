package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
)

// Replication support: a replica's log appends the leader's batches as
// they are (AppendAsFollower), cuts where its history diverges (TruncateTo,
// TruncateFullyAndStartAt), records a leader epoch when it starts leading
// (AssignEpoch), reports the end of its fsynced data (DurableEnd), and
// takes its high watermark from replication (SetHighWatermark) instead of
// from its own fsynced end (internal/replica decides the value).

// ErrUnexpectedOffset is returned by AppendAsFollower when the batches do
// not continue the log (Kafka's UnexpectedAppendOffsetException /
// OffsetsOutOfOrderException): the follower's fetch position is wrong.
var ErrUnexpectedOffset = errors.New("replicated batches do not continue the log")

// maxBatchMarks bounds the batch ends remembered to place the high
// watermark without reading the log (replicated mode).
const maxBatchMarks = 4096

// replicated is the state of a log whose high watermark replication sets.
type replicated struct {
	hw int64
	// marks are recent batch ends (offset, segment, position), in order,
	// at or above hw: the high watermark usually lands on one of them.
	marks     []writeMark
	onDurable func(durableEnd int64)
}

// StartReplication makes replication decide the log's high watermark (the
// replica layer calls it when it takes the log over, before
// SetHighWatermark) and returns the value it starts from, which is known
// committed:
//   - the high watermark the log already has under replication, or the one
//     of the log dir's replication-offset-checkpoint found at Open (capped
//     by the recovered end: Kafka's Partition.createLog);
//   - the high watermark of a log that stopped being replicated in this
//     incarnation (it was its only replica since);
//   - otherwise the log start: a log without a checkpointed high
//     watermark (killed before its first checkpoint, or written by a
//     release without the file) cannot tell its committed records from an
//     uncommitted tail, and its own fsynced end, taken at Open, moves back.
//
// onDurable is as for SetHighWatermark.
func (l *Log) StartReplication(onDurable func(durableEnd int64)) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	back := false
	if l.rep == nil {
		hw := l.logStart
		if l.hwTrusted {
			hw = l.v.Load().hw
		} else {
			back = true
			if old := l.v.Load().hw; old > hw {
				l.logger.Info("replicated log without a checkpointed high watermark: nothing past its log start is known committed",
					"log_start", hw, "log_end", l.mark.leo)
			}
		}
		l.rep = &replicated{hw: hw}
	}
	if onDurable != nil {
		l.rep.onDurable = onDurable
	}
	l.ck.track(l.key, l)
	l.publishView(back)
	return l.v.Load().hw
}

// SetHighWatermark makes replication decide the log's high watermark from
// now on (the partition has replicas: Kafka's high watermark is the end of
// what the ISR holds, not of what this log fsynced) and sets it to hw,
// capped by the log end offset. The published high watermark never moves
// back except through a truncation. onDurable, when not nil, is called
// each time the fsynced end advances, with the log's lock held: it must not
// call the Log, only record the value (the replica layer's leader then
// counts its own fsynced end).
func (l *Log) SetHighWatermark(hw int64, onDurable func(durableEnd int64)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rep == nil {
		l.rep = &replicated{}
		l.ck.track(l.key, l)
	}
	l.rep.hw = hw
	if onDurable != nil {
		l.rep.onDurable = onDurable
	}
	l.publish()
}

// Replicated reports whether replication decides the log's high watermark
// (after StartReplication or SetHighWatermark, or from Open when the log
// dir's replication-offset-checkpoint lists the log).
func (l *Log) Replicated() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rep != nil
}

// UnsetReplicated returns the log to a high watermark that follows its own
// fsynced end (a partition whose other replicas were removed).
func (l *Log) UnsetReplicated() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rep != nil {
		l.ck.untrack(l.key, l, -1)
	}
	l.rep = nil
	l.hwTrusted = true
	l.publish()
}

// ReadUpToEnd is Read for a follower's fetch (replicated logs): whole
// batches up to the log end offset, past the high watermark.
func (l *Log) ReadUpToEnd(offset, maxBytes int64, minOneBatch bool) (ReadResult, error) {
	for try := 0; ; try++ {
		v := *l.readerView()
		v.hw, v.hwBase, v.hwPos = v.leo, v.endBase, v.endPos
		res, err := l.read(&v, offset, maxBytes, minOneBatch)
		res.HighWatermark = l.v.Load().hw
		if errors.Is(err, errSegmentGone) && try < maxViewRetries {
			continue
		}
		return res, err
	}
}

// DurableEnd is the offset below which the log is fsynced: what a follower
// reports as replicated under strata.durable.acks, and the leader's own
// contribution to the high watermark.
func (l *Log) DurableEnd() int64 { return l.v.Load().durable }

// LatestEpoch is the newest leader epoch in the log's history, -1 when
// none (the last fetched epoch a follower sends, Fetch v12+).
func (l *Log) LatestEpoch() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.epochs.entries); n > 0 {
		return l.epochs.entries[n-1].Epoch
	}
	return -1
}

// AssignEpoch records that leader epoch starts at the log end offset, as a
// new leader does before accepting any write (Kafka's makeLeader,
// KIP-279): followers holding records of an epoch this replica never saw
// then find its end. An epoch not newer than the latest is ignored.
func (l *Log) AssignEpoch(epoch int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil {
		return fmt.Errorf("assign epoch %d to %s: log closed or failed: %w", epoch, l.dir, kerr.KafkaStorageError)
	}
	if !l.epochs.assign(epoch, l.mark.leo) {
		return nil
	}
	if err := l.writeEpochCheckpoint(); err != nil {
		l.epochs.entries = l.epochs.entries[:len(l.epochs.entries)-1]
		return fmt.Errorf("assign epoch %d to %s: %v: %w", epoch, l.dir, err, kerr.KafkaStorageError)
	}
	return nil
}

// noteBatchEnd remembers where a batch ends (replicated logs only, under
// l.mu), so that the high watermark, which lands on batch ends, is placed
// without reading the log.
func (l *Log) noteBatchEnd(m writeMark) {
	r := l.rep
	if r == nil {
		return
	}
	if len(r.marks) >= maxBatchMarks {
		r.marks = append(r.marks[:0], r.marks[len(r.marks)/2:]...)
	}
	r.marks = append(r.marks, m)
}

// forgetBatchEnds drops remembered batch ends past end (a truncation).
func (l *Log) forgetBatchEnds(end int64) {
	if r := l.rep; r != nil {
		k := sort.Search(len(r.marks), func(i int) bool { return r.marks[i].leo > end })
		r.marks = r.marks[:k]
	}
}

// replicatedMark places the replicated high watermark (under l.mu): the
// offset, and the byte position of the batch holding it (readers see only
// whole batches below). A failure to read the log (it is failing anyway)
// keeps the high watermark where it was.
func (l *Log) replicatedMark() writeMark {
	r := l.rep
	hw := max(min(r.hw, l.mark.leo), l.logStart)
	switch {
	case hw == l.mark.leo:
		return l.mark
	case hw == l.synced.leo:
		return l.synced
	}
	// At a segment boundary: the start of that segment (a closed segment's
	// end position changes when the cleaner rewrites it).
	if s := l.segs[floorSegment(l.segs, hw)]; s.base == hw {
		return writeMark{leo: hw, base: s.base}
	}
	// Batch ends below the high watermark are no longer needed.
	k := sort.Search(len(r.marks), func(i int) bool { return r.marks[i].leo >= hw })
	if k > 0 {
		r.marks = append(r.marks[:0], r.marks[k:]...)
	}
	if len(r.marks) > 0 && r.marks[0].leo == hw {
		return r.marks[0]
	}
	s := l.segs[floorSegment(l.segs, hw)]
	pos, _, err := l.cutPoint(s, hw)
	if err != nil {
		l.logger.Warn("cannot place the high watermark", "offset", hw, "err", err)
		if old := l.v.Load(); old != nil {
			return writeMark{leo: old.hw, base: old.hwBase, pos: old.hwPos}
		}
		return writeMark{leo: l.logStart, base: l.segs[0].base}
	}
	return writeMark{leo: hw, base: s.base, pos: pos}
}

// AppendAsFollower appends batches fetched from the partition's leader as
// they are: their offsets and partition leader epochs are the leader's
// (Kafka's UnifiedLog.appendAsFollower). Each batch is still checked for
// structure and CRC (record.ValidateStored: the leader's log may be
// compacted); size limits and timestamps are the leader's business. A
// trailing partial batch (fetch responses may end with one) is left out.
// The first batch must start at the log end offset, or later (a compacted
// gap); one starting below it wraps ErrUnexpectedOffset, except into an
// empty log, which then restarts at that batch (the leader's log start can
// be inside a batch after DeleteRecords; Kafka's
// appendRecordsToFollowerOrFutureReplica). The leader epoch history, the
// producer state (sequence numbers are not checked: the leader did) and
// the transaction index follow the appended batches.
func (l *Log) AppendAsFollower(records []byte) (AppendResult, error) {
	res := AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}
	var batches []record.Batch
	size := 0
	for rest := records; len(rest) > 0; {
		b, r, err := record.Next(rest)
		if errors.Is(err, record.ErrTruncated) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("append replicated batches to %s: batch %d: %w", l.dir, len(batches), err)
		}
		if err := record.ValidateStored(b); err != nil {
			return res, fmt.Errorf("append replicated batches to %s: batch %d: %w", l.dir, len(batches), err)
		}
		if k := len(batches); k > 0 && b.BaseOffset() <= batches[k-1].LastOffset() {
			return res, fmt.Errorf("append replicated batches to %s: offsets out of order (%d after %d): %w", l.dir, b.BaseOffset(), batches[k-1].LastOffset(), ErrUnexpectedOffset)
		}
		batches = append(batches, b)
		size += b.Size()
		rest = r
	}
	if len(batches) == 0 {
		return res, nil
	}
	records = records[:size]
	cfg := l.cfg.Load()
	if int64(size) > cfg.SegmentBytes {
		return res, fmt.Errorf("append replicated batches to %s: %d bytes exceed segment.bytes %d: %w", l.dir, size, cfg.SegmentBytes, kerr.RecordListTooLarge)
	}
	first, last := batches[0], batches[len(batches)-1]

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return res, fmt.Errorf("append to %s: log closed: %w", l.dir, kerr.NotLeaderForPartition)
	}
	if l.failed != nil {
		return res, fmt.Errorf("append to %s: %v: %w", l.dir, l.failed, kerr.KafkaStorageError)
	}
	if first.BaseOffset() < l.mark.leo {
		if l.mark.leo != l.logStart || first.LastOffset() < l.mark.leo {
			return res, fmt.Errorf("append replicated batches to %s: first offset %d below the log end %d: %w", l.dir, first.BaseOffset(), l.mark.leo, ErrUnexpectedOffset)
		}
		// An empty log restarting below its start: a cut, which the journal
		// must learn of first (beginCut takes the syncer's round lock, which
		// comes before l.mu).
		l.mu.Unlock()
		err := l.TruncateFullyAndStartAt(first.BaseOffset())
		l.mu.Lock()
		if err != nil {
			return res, err
		}
		if l.closed || l.failed != nil || first.BaseOffset() != l.mark.leo {
			return res, fmt.Errorf("append replicated batches to %s: the log changed while it restarted at %d: %w", l.dir, first.BaseOffset(), ErrUnexpectedOffset)
		}
	}
	nowT := l.now()
	if err := l.loadProducers(); err != nil {
		return res, fmt.Errorf("append to %s: %v: %w", l.dir, err, kerr.KafkaStorageError)
	}
	// Producer state as Kafka's REPLICATION origin: no sequence checks, an
	// older producer or coordinator epoch is taken as it is; a data batch
	// without a transaction while one is open is still refused.
	pt := l.ps.begin()
	var done []completedTxn
	for _, b := range batches {
		pid := b.ProducerID()
		if pid < 0 {
			continue
		}
		if b.IsControl() {
			m, ok, err := parseMarker(b)
			if err != nil {
				return res, fmt.Errorf("append replicated batches to %s: %w", l.dir, err)
			}
			if ok {
				if first := pt.applyMarker(pid, b.ProducerEpoch(), m, b.MaxTimestamp()); first >= 0 {
					done = append(done, completedTxn{pid: pid, first: first, last: b.BaseOffset(), abort: !m.commit})
				}
			}
			continue
		}
		if !b.IsTransactional() && pt.txnOpen(pid) {
			return res, fmt.Errorf("append replicated batches to %s: non-transactional batch from producer %d while its transaction is open: %w", l.dir, pid, kerr.InvalidTxnState)
		}
		fs := b.BaseSequence()
		pt.record(pid, b.ProducerEpoch(), batchMeta{firstSeq: fs, lastSeq: seqAdd(fs, int64(b.LastOffsetDelta())), firstOffset: b.BaseOffset(), lastOffset: b.LastOffset()}, b.MaxTimestamp())
		if b.IsTransactional() {
			pt.openTxn(pid, b.BaseOffset())
		}
	}
	if err := l.reserve.take(int64(size)); err != nil {
		return res, fmt.Errorf("append replicated batches to %s: %w", l.dir, err)
	}
	if err := l.maybeRollForAppend(int64(size), first.MaxTimestamp(), last.LastOffset(), nowT.UnixMilli(), cfg); err != nil {
		return res, fmt.Errorf("append replicated batches to %s: %w", l.dir, err)
	}
	if last.LastOffset()-l.active.base > 1<<31-1 {
		return res, fmt.Errorf("append replicated batches to %s: offset %d too far from segment base %d: %w", l.dir, last.LastOffset(), l.active.base, ErrUnexpectedOffset)
	}
	// The leader's epochs, as stamped on its batches (Kafka assigns each
	// batch's partitionLeaderEpoch at its base offset).
	assigned := false
	for _, b := range batches {
		if l.epochs.assign(b.PartitionLeaderEpoch(), b.BaseOffset()) {
			assigned = true
		}
	}
	if assigned {
		if err := l.writeEpochCheckpoint(); err != nil {
			l.epochs.truncateFromEnd(first.BaseOffset())
			return res, fmt.Errorf("append replicated batches to %s: leader epoch checkpoint: %v: %w", l.dir, err, kerr.KafkaStorageError)
		}
	}
	if err := l.writeLocked(records, batches, last.LastOffset()+1); err != nil {
		return res, fmt.Errorf("append replicated batches to %s: %w", l.dir, err)
	}
	pt.commit()
	if err := l.completeTxns(done); err != nil {
		return res, err
	}
	l.publish()
	res.BaseOffset, res.LastOffset, res.LogStartOffset = first.BaseOffset(), last.LastOffset(), l.logStart
	return res, l.flushPolicyLocked(cfg, nowT)
}

// TruncateFullyAndStartAt empties the log and restarts it at offset
// (Kafka's UnifiedLog.truncateFullyAndStartAt): a follower whose log ends
// below the leader's log start offset keeps nothing it has. Every segment
// goes, the log start and end become offset, the producer state, leader
// epoch history and transaction index start empty.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	defer l.syncer.beginCut(l)()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil {
		return fmt.Errorf("truncate %s: log closed or failed: %w", l.dir, kerr.KafkaStorageError)
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("truncate %s fully to %d: %w", l.dir, offset, kerr.OffsetOutOfRange)
	}
	if err := l.flushLocked(); err != nil {
		return err
	}
	if err := l.syncer.journalCut(l, offset); err != nil {
		return l.fail(err)
	}
	l.cuts++
	if err := l.closeActiveFiles(l.active, true, false); err != nil {
		return l.fail(err)
	}
	// Every segment goes (renamed .deleted first, so a new segment may
	// take the name of an old one; readers holding them keep reading and
	// the files are unlinked after file.delete.delay.ms).
	var files []string
	for _, s := range l.segs {
		s.markDeleted()
		for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
			from := s.path(suf)
			if err := l.fsys.Rename(from, from+DeletedSuffix); err == nil {
				files = append(files, from+DeletedSuffix)
			}
		}
	}
	ns := l.newSegment(offset)
	if err := l.createSegmentFiles(ns, false); err != nil {
		return l.fail(err)
	}
	l.segs = []*segment{ns}
	if err := l.openActive(0); err != nil {
		return l.fail(err)
	}
	l.mark = writeMark{leo: offset, base: offset}
	l.synced = l.mark
	l.recoveryPoint.Store(offset)
	l.logStart = offset
	if err := l.writeLogStartCheckpoint(offset); err != nil {
		return l.fail(err)
	}
	if err := l.setRecoveryPoint(offset, true); err != nil {
		return l.fail(err)
	}
	// Producer state, transactions and epochs start empty.
	l.ps = newProducerState()
	l.completing = nil
	l.lsoPos.Store(nil)
	if snaps, err := l.listSnapshots(); err == nil {
		for _, o := range snaps {
			l.fsys.Remove(filepath.Join(l.dir, FileName(o, SnapshotSuffix)))
		}
	}
	if err := l.writeSnapshot(offset); err != nil { // also fsyncs the directory
		return l.fail(err)
	}
	l.epochs.entries = nil
	if err := l.writeEpochCheckpoint(); err != nil {
		return l.fail(err)
	}
	if l.rep != nil {
		l.rep.marks = l.rep.marks[:0]
	}
	l.publishView(true)
	l.checkInvariants(true)
	l.deleteLater(files, l.cfg.Load().FileDeleteDelay)
	return nil
}
