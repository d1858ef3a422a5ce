package txn

import (
	"fmt"
	"time"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
)

// startLoop starts the coordinator's periodic work on its clock, owned by
// the coordinator (Close stops it and waits for a run in progress): every
// AbortTimedOutInterval it aborts timed-out transactions and retries
// unfinished completions (Kafka's
// transaction.abort.timed.out.transaction.cleanup.interval.ms); every
// RemoveExpiredInterval it expires idle transactional ids
// (transaction.remove.expired.transaction.cleanup.interval.ms); every
// MarkerRetryInterval it retries the markers of transactions a failed
// attempt left prepared. With clock.Manual, tests run it by advancing
// time. c.mu must be held.
//
// Markers are retried without a bound, as Kafka's
// TransactionMarkerChannelManager does: until every partition of the
// transaction has its marker (at whichever broker leads it by then), its
// partition is deleted (WriteMarkers skips it), or this broker stops
// coordinating the transaction (UnloadPartition forgets it; the new
// coordinator completes it on load). So a leader that moves or dies
// mid-commit delays a transaction, never leaves it hanging.
func (c *Coordinator) startLoop() {
	c.stopLoop = append(c.stopLoop,
		clock.Every(c.cfg.Clock, c.cfg.AbortTimedOutInterval, func() {
			c.abortTimedOut()
			c.retryUnfinished()
		}),
		clock.Every(c.cfg.Clock, c.cfg.MarkerRetryInterval, func() { c.retryUnfinished() }),
		clock.Every(c.cfg.Clock, c.cfg.RemoveExpiredInterval, func() { c.expireIDs() }))
}

// abortTimedOut aborts, with an epoch bump, every Ongoing transaction
// older than its timeout (Kafka's abortTimedOutTransactions over
// timedOutTransactions: txnStartTimestamp + txnTimeoutMs < now). It
// returns how many it aborted.
func (c *Coordinator) abortTimedOut() int {
	if c.closed.Load() {
		return 0
	}
	now := c.nowMs()
	c.mu.Lock()
	var due []*txnMeta
	for _, m := range c.txns {
		if !m.hasPending && m.state == stateOngoing && m.startMs+int64(m.timeoutMs) < now && c.serving(m.id) {
			due = append(due, m)
		}
	}
	c.mu.Unlock()
	n := 0
	for _, m := range due {
		c.mu.Lock()
		if c.txns[m.id] != m || m.hasPending || m.state != stateOngoing || m.startMs+int64(m.timeoutMs) >= now {
			c.mu.Unlock()
			continue
		}
		tr, e, write := c.fenceLocked(m)
		c.mu.Unlock()
		if !write {
			c.logger.Warn("timed-out transaction not aborted", "transactional_id", m.id, "err", e)
			continue
		}
		c.logger.Info("aborting timed-out transaction", "transactional_id", m.id,
			"producer_id", tr.producerID, "epoch", tr.epoch, "timeout_ms", tr.timeoutMs)
		if e := c.finishEnd(m, tr, true); e != nil {
			c.logger.Warn("abort of timed-out transaction failed", "transactional_id", m.id, "err", e)
			continue
		}
		c.m.timedOut.Inc()
		n++
	}
	return n
}

// retryUnfinished completes transactions whose markers or completion
// record failed earlier.
func (c *Coordinator) retryUnfinished() {
	if c.closed.Load() {
		return
	}
	c.mu.Lock()
	var todo []*txnMeta
	for _, m := range c.txns {
		if !m.hasPending && (m.state == statePrepareCommit || m.state == statePrepareAbort) && c.serving(m.id) {
			todo = append(todo, m)
		}
	}
	c.mu.Unlock()
	for _, m := range todo {
		c.complete(m)
	}
}

// expireIDs writes a tombstone for, then forgets, every transactional id
// idle longer than IDExpiration in Empty, CompleteCommit or CompleteAbort
// (Kafka's removeExpiredTransactionalIds), one batch per
// __transaction_state partition. It returns how many it expired.
func (c *Coordinator) expireIDs() int {
	if c.closed.Load() {
		return 0
	}
	cutoff := c.nowMs() - c.cfg.IDExpiration.Milliseconds()
	byPart := map[int32][]*txnMeta{}
	c.mu.Lock()
	for _, m := range c.txns {
		if m.hasPending || !m.state.expirable() || m.lastUpdateMs > cutoff || !c.serving(m.id) {
			continue
		}
		if !m.prepare(m.to(stateDead, nil, m.startMs, m.lastUpdateMs)) {
			continue
		}
		p := c.partition(m.id)
		byPart[p] = append(byPart[p], m)
	}
	c.mu.Unlock()
	n := 0
	for p, ms := range byPart {
		err := c.writeTombstones(p, ms)
		c.mu.Lock()
		for _, m := range ms {
			if err == nil && m.pendingIs(stateDead) && c.txns[m.id] == m {
				delete(c.txns, m.id)
				n++
			} else {
				m.clearPending()
			}
		}
		c.mu.Unlock()
		if err != nil {
			c.logger.Warn("expire transactional ids failed", "partition", p, "err", err)
		}
	}
	c.m.expired.Add(float64(n))
	return n
}

func (c *Coordinator) writeTombstones(p int32, ms []*txnMeta) error {
	recs := make([]record.Record, len(ms))
	for i, m := range ms {
		recs[i] = record.Record{Key: stateKey(m.id)}
	}
	b, err := buildBatch(c.cfg.Clock.Now(), recs)
	if err != nil {
		return err
	}
	// Kafka bounds this append by request.timeout.ms (30 s).
	if err := c.stateAppend(p, b, 30*time.Second); err != nil {
		return fmt.Errorf("append tombstones to __transaction_state-%d: %w", p, err)
	}
	return nil
}
