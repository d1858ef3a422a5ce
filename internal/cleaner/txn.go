package cleaner

import (
	"fmt"
	"sort"

	"github.com/strata-io/strata/internal/record"
)

// txnTracker follows transactions through one pass over a log in offset
// order (the map build, or the recopy of a round's segments), as Kafka's
// CleanedTransactionMetadata does. The pass only
// covers offsets below the last stable offset, so every transaction it
// meets is already decided: the aborted ones are exactly the .txnindex
// entries overlapping the pass, and every other transactional batch
// belongs to a committed transaction.
type txnTracker struct {
	// pending are the aborted transactions of the pass sorted by first
	// offset; pending[next:] have not been reached yet.
	pending []abortedTxn
	next    int
	// aborted maps a producer id to its aborted transaction in progress at
	// the current position: reached (first offset passed) and its ABORT
	// marker not read yet. seen records that a batch of it was met.
	aborted map[int64]*abortedTxnState
	// committed holds the producer ids with a batch of a committed
	// transaction met since their last marker.
	committed map[int64]bool
	scratch   rawRecord
}

// abortedTxnState is one aborted transaction in progress during a pass.
type abortedTxnState struct {
	txn  abortedTxn
	seen bool
}

// newTxnTracker starts a pass knowing the aborted transactions that
// overlap it (in any order).
func newTxnTracker(aborted []abortedTxn) *txnTracker {
	p := append([]abortedTxn(nil), aborted...)
	sort.SliceStable(p, func(i, j int) bool { return p[i].FirstOffset < p[j].FirstOffset })
	return &txnTracker{pending: p, aborted: map[int64]*abortedTxnState{}, committed: map[int64]bool{}}
}

// reach makes every aborted transaction starting at or before off in
// progress.
func (t *txnTracker) reach(off int64) {
	for t.next < len(t.pending) && t.pending[t.next].FirstOffset <= off {
		a := t.pending[t.next]
		t.next++
		if _, ok := t.aborted[a.ProducerID]; !ok {
			t.aborted[a.ProducerID] = &abortedTxnState{txn: a}
		}
	}
}

// dataBatch accounts for a data (non-control) batch and reports whether
// it belongs to an aborted transaction: then none of its records may
// enter the offset map or the output.
func (t *txnTracker) dataBatch(b record.Batch) bool {
	t.reach(b.LastOffset())
	if !b.IsTransactional() {
		return false
	}
	pid := b.ProducerID()
	if st := t.aborted[pid]; st != nil {
		st.seen = true
		return true
	}
	t.committed[pid] = true
	return false
}

// controlBatch accounts for a control batch and reports its type and
// whether the marker is no longer needed by any batch of its transaction
// (Kafka's rule): an ABORT marker once no batch of its transaction was
// met in this pass, a COMMIT marker when no batch of its transaction was
// met in this pass. ok is false for a control batch that is not a
// COMMIT or ABORT marker (or whose key cannot be read): such a batch is
// never removable. An empty control batch (left by an earlier cleaning)
// is removable.
func (t *txnTracker) controlBatch(b record.Batch) (typ record.ControlType, removable, ok bool) {
	t.reach(b.LastOffset())
	pid := b.ProducerID()
	if b.NumRecords() == 0 {
		return 0, true, true
	}
	typ, ok = t.markerType(b)
	if !ok {
		return typ, false, false
	}
	switch typ {
	case record.ControlAbort:
		st := t.aborted[pid]
		delete(t.aborted, pid)
		delete(t.committed, pid)
		return typ, st == nil || !st.seen, true
	case record.ControlCommit:
		seen := t.committed[pid]
		delete(t.committed, pid)
		return typ, !seen, true
	}
	return typ, false, false
}

// markerType reads the control type from the key of b's first record.
func (t *txnTracker) markerType(b record.Batch) (record.ControlType, bool) {
	data, err := batchRecords(b)
	if err != nil {
		return 0, false
	}
	var key []byte
	first := true
	err = scanRecords(data, int(b.NumRecords()), &t.scratch, func(r *rawRecord) error {
		if first {
			key, first = r.Key, false
		}
		return nil
	})
	if err != nil || key == nil {
		return 0, false
	}
	typ, err := record.ParseControlKey(key)
	if err != nil {
		return 0, false
	}
	return typ, true
}

// markerPolicy says which transaction markers a round may remove once
// Kafka's rule makes them eligible (see docs/compaction.md,
// "Transactions").
type markerPolicy struct {
	commit bool
	abort  bool
}

// allows reports whether a marker of type typ may be removed.
func (p markerPolicy) allows(typ record.ControlType) bool {
	switch typ {
	case record.ControlCommit:
		return p.commit
	case record.ControlAbort:
		return p.abort
	}
	return false
}

// applyControl decides a control batch: kept unchanged unless it is a
// marker the policy lets go and that no batch of its transaction needs
// any more; such a marker is first stamped with a delete horizon and is
// removed by a round that runs after the horizon (still eligible then),
// as a tombstone (KIP-534). A removed marker that is
// the latest state of an active producer stays as an empty batch.
func (f *filter) applyControl(b record.Batch) ([]byte, error) {
	if f.txn == nil {
		return b, nil
	}
	n := int(b.NumRecords())
	typ, removable, ok := f.txn.controlBatch(b)
	if n == 0 { // emptied by an earlier round
		return f.dropAll(b, 0, false)
	}
	if !ok || !removable || !f.markers.allows(typ) {
		return b, nil
	}
	if b.HasDeleteHorizon() {
		if f.nowMs < b.BaseTimestamp() {
			return b, nil
		}
		f.stats.MarkersRemoved++
		return f.dropAll(b, n, false)
	}
	data, err := batchRecords(b)
	if err != nil {
		return nil, fmt.Errorf("decompress control batch at offset %d: %w", b.BaseOffset(), err)
	}
	kept := f.kept[:0]
	err = scanRecords(data, n, &f.scratch, func(r *rawRecord) error {
		kept = append(kept, *r)
		return nil
	})
	f.kept = kept[:0]
	if err != nil {
		return nil, fmt.Errorf("decode control batch at offset %d: %w", b.BaseOffset(), err)
	}
	return f.rebuild(b, kept, true)
}

// removeAbortMarkers enables Kafka's removal of ABORT markers. It is off:
// storage carries every .txnindex entry of the replaced segments into the
// cleaned one, and an entry whose marker is gone would make a
// READ_COMMITTED consumer skip that producer's later committed batches
// (it stops skipping a producer only at its ABORT marker). ABORT markers
// are therefore all kept (see docs/compaction.md).
const removeAbortMarkers = false
