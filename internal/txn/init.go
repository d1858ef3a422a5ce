package txn

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// pidEpoch is the producer id and epoch an InitProducerId v3+ request
// carries (KIP-360).
type pidEpoch struct {
	pid   int64
	epoch int16
}

// handleInitProducerID answers InitProducerId. PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH before v4 (KIP-588).
func (c *Coordinator) handleInitProducerID(_ context.Context, r *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	pid, epoch, e := c.initProducerID(r)
	resp.ErrorCode = code(fenced(e, r.Version, 4))
	if e == nil {
		resp.ProducerID, resp.ProducerEpoch = pid, epoch
	}
	return resp
}

// initProducerID is KafkaApis.handleInitProducerIdRequest's validation
// followed by TransactionCoordinator.handleInitProducerId.
func (c *Coordinator) initProducerID(r *kmsg.InitProducerIDRequest) (int64, int16, *kerr.Error) {
	var expected *pidEpoch
	if r.Version >= 3 {
		switch {
		case r.ProducerID == -1 && r.ProducerEpoch == -1:
		case r.ProducerID == -1 || r.ProducerEpoch == -1:
			return 0, 0, kerr.InvalidRequest
		default:
			expected = &pidEpoch{r.ProducerID, r.ProducerEpoch}
		}
	}
	if r.TransactionalID == nil {
		// Not transactional: a fresh producer id at epoch 0.
		pid, err := c.deps.NewProducerID()
		if err != nil {
			return 0, 0, producerIDError(err)
		}
		return pid, 0, nil
	}
	id := *r.TransactionalID
	timeout := r.TransactionTimeoutMillis
	switch {
	case id == "":
		return 0, 0, kerr.InvalidRequest
	case timeout <= 0 || int64(timeout) > c.cfg.MaxTimeout.Milliseconds():
		return 0, 0, kerr.InvalidTransactionTimeout
	}
	if e := c.availability(id); e != nil {
		return 0, 0, e
	}
	m, e := c.lookupOrCreate(id, timeout)
	if e != nil {
		return 0, 0, e
	}
	c.mu.Lock()
	tr, e, fence := c.prepareInitLocked(m, timeout, expected)
	c.mu.Unlock()
	if e != nil {
		return 0, 0, e
	}
	if fence {
		// Kafka aborts the Ongoing transaction at a bumped epoch, then
		// answers CONCURRENT_TRANSACTIONS: the retry bumps the epoch again
		// (or rotates the producer id once epochs are exhausted).
		if e := c.finishEnd(m, tr, true); e != nil {
			return 0, 0, e
		}
		return 0, 0, kerr.ConcurrentTransactions
	}
	if e := c.write(m, tr); e != nil {
		return 0, 0, e
	}
	c.logger.Debug("initialized transactional id", "transactional_id", id, "producer_id", tr.producerID, "epoch", tr.epoch)
	return tr.producerID, tr.epoch, nil
}

// lookupOrCreate returns id's metadata, creating it (Empty, a new producer
// id, epoch -1) on first use, as Kafka's putTransactionStateIfNotExists.
func (c *Coordinator) lookupOrCreate(id string, timeout int32) (*txnMeta, *kerr.Error) {
	c.mu.Lock()
	m := c.txns[id]
	c.mu.Unlock()
	if m != nil {
		return m, nil
	}
	pid, err := c.deps.NewProducerID()
	if err != nil {
		return nil, producerIDError(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m = c.txns[id]; m == nil {
		if e := c.availability(id); e != nil {
			return nil, e // unloaded meanwhile
		}
		m = newMeta(id, pid, timeout, c.nowMs())
		c.txns[id] = m
	}
	return m, nil
}

// prepareInitLocked is Kafka's prepareInitProducerIdTransit: it returns
// the Empty transition to write, or with fence=true the prepared abort of
// an Ongoing transaction. Called with c.mu held.
func (c *Coordinator) prepareInitLocked(m *txnMeta, timeout int32, expected *pidEpoch) (tr transit, e *kerr.Error, fence bool) {
	if m.hasPending {
		return tr, kerr.ConcurrentTransactions, false
	}
	if expected != nil && !(m.epoch == -1 || expected.pid == m.producerID ||
		(expected.pid == m.lastProducerID && epochExhausted(expected.epoch))) {
		// Neither this producer id, nor a retry after a rotation.
		return tr, kerr.ProducerFenced, false
	}
	switch m.state {
	case statePrepareCommit, statePrepareAbort:
		return tr, kerr.ConcurrentTransactions, false
	case stateOngoing:
		tr, e, write := c.fenceLocked(m)
		if !write {
			return tr, e, false
		}
		return tr, nil, true
	case stateEmpty, stateCompleteCommit, stateCompleteAbort:
	default:
		c.logger.Error("transaction in an illegal state", "transactional_id", m.id, "state", m.state)
		return tr, kerr.UnknownServerError, false
	}
	now := c.nowMs()
	if epochExhausted(m.epoch) && (expected == nil || expected.epoch == m.epoch) {
		// Rotate: a new producer id at epoch 0 (rare, so the id is
		// allocated under the lock).
		pid, err := c.deps.NewProducerID()
		if err != nil {
			return tr, producerIDError(err), false
		}
		last := int16(-1)
		if expected != nil {
			last = m.epoch
		}
		tr = transit{producerID: pid, lastProducerID: m.producerID, epoch: 0, lastEpoch: last,
			timeoutMs: timeout, state: stateEmpty, startMs: -1, lastUpdateMs: now}
	} else {
		epoch, last, e := nextEpoch(m, expected)
		if e != nil {
			return tr, e, false
		}
		tr = transit{producerID: m.producerID, lastProducerID: m.producerID, epoch: epoch, lastEpoch: last,
			timeoutMs: timeout, state: stateEmpty, startMs: -1, lastUpdateMs: now}
	}
	if !m.prepare(tr) {
		return tr, kerr.UnknownServerError, false
	}
	return tr, nil, false
}

// nextEpoch is Kafka's prepareIncrementProducerEpoch: the epoch (and last
// epoch) to hand out. Without an expected epoch the epoch is bumped; with
// one it must be the current epoch (bump) or the last one (a retry of a
// bump whose answer was lost: no bump), else the producer is fenced.
func nextEpoch(m *txnMeta, expected *pidEpoch) (epoch, last int16, e *kerr.Error) {
	switch {
	case expected == nil:
		if epochExhausted(m.epoch) {
			return 0, 0, kerr.UnknownServerError // unreachable: the caller rotates
		}
		return m.epoch + 1, -1, nil
	case (m.epoch == -1 || expected.epoch == m.epoch) && !epochExhausted(m.epoch):
		return m.epoch + 1, m.epoch, nil
	case expected.epoch == m.lastEpoch:
		return m.epoch, m.lastEpoch, nil
	}
	return 0, 0, kerr.ProducerFenced
}

// producerIDError maps a failed producer id allocation to a client error.
func producerIDError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return kerr.CoordinatorNotAvailable
}
