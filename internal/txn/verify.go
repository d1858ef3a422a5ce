package txn

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// VerifyProduce checks a transactional produce batch (KIP-890 part 1):
// nil when partition tp was added to pid's Ongoing transaction at this
// epoch. Otherwise the error wraps, as Kafka's verification answers the
// produce request (handleVerifyPartitionsInTransaction, with
// AddPartitionsToTxnManager's PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH):
//   - kerr.InvalidProducerIDMapping: unknown transactional id or another
//     producer id;
//   - kerr.InvalidProducerEpoch: another epoch (fenced or stale);
//   - kerr.ConcurrentTransactions: the transaction is in PrepareCommit or
//     PrepareAbort (Kafka's ReplicaManager answers the produce with the
//     retriable NOT_ENOUGH_REPLICAS, as it does for
//     kerr.CoordinatorLoadInProgress before Load and
//     kerr.CoordinatorNotAvailable after Close);
//   - kerr.InvalidTxnState: no Ongoing transaction, or tp not added to it.
func (c *Coordinator) VerifyProduce(transactionalID string, pid int64, epoch int16, tp TopicPartition) error {
	if transactionalID == "" {
		return fmt.Errorf("verify transactional produce: empty transactional id: %w", kerr.InvalidRequest)
	}
	if e := c.availability(transactionalID); e != nil {
		return fmt.Errorf("verify transactional produce of %s: %w", transactionalID, e)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.txns[transactionalID]
	var e *kerr.Error
	switch {
	case m == nil && c.availability(transactionalID) != nil:
		e = c.availability(transactionalID) // unloaded meanwhile
	case m == nil || m.producerID != pid:
		e = kerr.InvalidProducerIDMapping
	case m.epoch != epoch:
		e = kerr.InvalidProducerEpoch
	case m.state == statePrepareCommit || m.state == statePrepareAbort:
		// A transition in flight is not checked: Kafka re-validates on the
		// append (the producer state refuses stale epochs).
		e = kerr.ConcurrentTransactions
	case m.state != stateOngoing:
		e = kerr.InvalidTxnState
	default:
		if _, ok := m.parts[tp]; ok {
			return nil
		}
		e = kerr.InvalidTxnState
	}
	return fmt.Errorf("verify transactional produce of %s (producer %d epoch %d) to %s-%d: %w",
		transactionalID, pid, epoch, tp.Topic, tp.Partition, e)
}
