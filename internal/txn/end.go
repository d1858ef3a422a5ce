package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleEndTxn answers EndTxn v0-4.
func (c *Coordinator) handleEndTxn(r *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	e := c.endTxn(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit)
	resp.ErrorCode = code(fenced(e, r.Version, 2))
	return resp
}

// endTxn is Kafka's handleEndTransaction (endTransaction with
// isFromClient=true).
func (c *Coordinator) endTxn(id string, pid int64, epoch int16, commit bool) *kerr.Error {
	if id == "" {
		return kerr.InvalidRequest
	}
	if e := c.availability(id); e != nil {
		return e
	}
	c.mu.Lock()
	m := c.txns[id]
	if m == nil {
		c.mu.Unlock()
		if e := c.availability(id); e != nil {
			return e // unloaded meanwhile
		}
		return kerr.InvalidProducerIDMapping
	}
	tr, e, write := c.prepareEndLocked(m, pid, epoch, commit, true)
	c.mu.Unlock()
	if !write {
		return e
	}
	return c.finishEnd(m, tr, false)
}

// prepareEndLocked validates an end of m's transaction and, when a
// PrepareCommit/PrepareAbort must be written, prepares it (write=true).
// Otherwise e is the answer (nil = NONE: a retry of a completed end).
// This is the synchronous part of Kafka's
// TransactionCoordinator.endTransaction. Called with c.mu held.
func (c *Coordinator) prepareEndLocked(m *txnMeta, pid int64, epoch int16, commit, fromClient bool) (tr transit, e *kerr.Error, write bool) {
	switch {
	case m.producerID != pid:
		return tr, kerr.InvalidProducerIDMapping, false
	case (fromClient && epoch != m.epoch) || epoch < m.epoch:
		// Clients must use the current epoch; the coordinator's own
		// (fencing) aborts use a bumped one.
		return tr, kerr.ProducerFenced, false
	case m.hasPending && m.pending != statePrepareEpochFence:
		return tr, kerr.ConcurrentTransactions, false
	}
	switch m.state {
	case stateOngoing:
		next := statePrepareAbort
		if commit {
			next = statePrepareCommit
		}
		if next == statePrepareAbort && m.pendingIs(statePrepareEpochFence) {
			// The fence: the bumped epoch goes into the PrepareAbort.
			m.clearPending()
			m.epoch = epoch
			m.lastEpoch = -1
		}
		tr = m.to(next, sortedParts(m.parts), m.startMs, c.nowMs())
		if !m.prepare(tr) {
			return tr, kerr.UnknownServerError, false
		}
		return tr, nil, true
	case stateCompleteCommit:
		if commit {
			return tr, nil, false
		}
	case stateCompleteAbort:
		if !commit {
			return tr, nil, false
		}
	case statePrepareCommit:
		if commit {
			return tr, kerr.ConcurrentTransactions, false
		}
	case statePrepareAbort:
		if !commit {
			return tr, kerr.ConcurrentTransactions, false
		}
	case stateEmpty:
	default: // Dead, PrepareEpochFence: never the current state
		c.logger.Error("transaction in an illegal state", "transactional_id", m.id, "state", m.state)
		return tr, kerr.UnknownServerError, false
	}
	return tr, kerr.InvalidTxnState, false
}

// fenceLocked bumps m's epoch (Kafka's prepareFenceProducerEpoch, not
// bumped again after a fence that failed to be written) and prepares the
// abort of its Ongoing transaction at the bumped epoch. Called with c.mu
// held, m Ongoing with nothing pending.
func (c *Coordinator) fenceLocked(m *txnMeta) (transit, *kerr.Error, bool) {
	if m.epoch == 1<<15-1 {
		c.logger.Error("cannot fence a producer at epoch 32767", "transactional_id", m.id)
		return transit{}, kerr.UnknownServerError, false
	}
	bumped := m.epoch + 1
	if m.failedFence {
		bumped = m.epoch
	}
	m.pending, m.hasPending = statePrepareEpochFence, true
	tr, e, write := c.prepareEndLocked(m, m.producerID, bumped, false, false)
	if !write && m.pendingIs(statePrepareEpochFence) {
		m.clearPending()
	}
	return tr, e, write
}

// finishEnd writes the prepared PrepareCommit/PrepareAbort and answers
// NONE once it is durable: the outcome is decided. The markers and the
// CompleteCommit/CompleteAbort are written afterwards, in the background
// (completeAsync), as Kafka's TransactionCoordinator.endTransaction calls
// sendReplyCallback once appendTransactionToLog has written the prepare
// record and hands the markers to TransactionMarkerChannelManager. Until
// they are written the transaction stays PrepareCommit/PrepareAbort, so
// the producer's next InitProducerId, AddPartitionsToTxn or
// AddOffsetsToTxn gets CONCURRENT_TRANSACTIONS (clients retry it), as in
// Kafka; a failed attempt is retried by the loop.
func (c *Coordinator) finishEnd(m *txnMeta, tr transit, fence bool) *kerr.Error {
	err := c.appendTransit(m.id, tr)
	c.mu.Lock()
	if err != nil {
		m.clearPending()
		if fence {
			// The epoch was bumped in memory but never returned to the
			// client: do not bump it again on the next fence.
			m.failedFence = true
		}
		c.mu.Unlock()
		c.logger.Warn("transaction end append failed", "transactional_id", m.id, "state", tr.state, "err", err)
		return appendError(err)
	}
	m.apply(tr)
	c.mu.Unlock()
	c.completeAsync(m)
	return nil
}

// completeAsync runs complete(m) in a goroutine the coordinator owns
// (Close waits for it; UnloadPartition cancels its marker writes through
// the partition's context). At most one runs per transactional id (the
// completion is a pending transition, which a second complete skips), so
// they are bounded by the transactional ids ending a transaction at once,
// like Kafka's marker queue. A closed coordinator starts none: the next
// coordinator of the id completes the transaction on load.
func (c *Coordinator) completeAsync(m *txnMeta) {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return
	}
	c.completing.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.completing.Done()
		c.complete(m)
	}()
}

// complete finishes a transaction in PrepareCommit/PrepareAbort: it
// writes the markers to every partition of the transaction that still
// exists (Kafka drops markers of deleted partitions), then persists
// CompleteCommit/CompleteAbort. While it runs, the transition is pending
// (requests get CONCURRENT_TRANSACTIONS). On failure the transaction stays
// prepared and the loop tries again.
func (c *Coordinator) complete(m *txnMeta) {
	c.mu.Lock()
	if c.txns[m.id] != m || m.hasPending || (m.state != statePrepareCommit && m.state != statePrepareAbort) {
		c.mu.Unlock()
		return
	}
	commit := m.state == statePrepareCommit
	next := stateCompleteAbort
	if commit {
		next = stateCompleteCommit
	}
	tr := m.to(next, nil, m.startMs, c.nowMs())
	if !m.prepare(tr) {
		c.mu.Unlock()
		return
	}
	pid, epoch := m.producerID, m.epoch
	parts := sortedParts(m.parts)
	coordEpoch := c.coordEpochs[c.partition(m.id)]
	c.mu.Unlock()
	ctx := c.partCtx(c.partition(m.id))

	live := parts[:0:0]
	for _, tp := range parts {
		if c.deps.PartitionExists(tp.Topic, tp.Partition) {
			live = append(live, tp)
		}
	}
	if len(live) > 0 {
		if err := c.deps.WriteMarkers(ctx, pid, epoch, coordEpoch, commit, live); err != nil {
			c.mu.Lock()
			m.clearPending()
			c.mu.Unlock()
			c.m.markerFailures.Inc()
			c.logger.Warn("write transaction markers failed; will retry", "transactional_id", m.id,
				"producer_id", pid, "epoch", epoch, "commit", commit, "err", err)
			return
		}
	}
	tr.lastUpdateMs = c.nowMs()
	if e := c.write(m, tr); e != nil {
		c.logger.Warn("transaction completion not persisted; will retry", "transactional_id", m.id, "err", e)
		return
	}
	if commit {
		c.m.commits.Inc()
	} else {
		c.m.aborts.Inc()
	}
}
