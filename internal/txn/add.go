package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleAddPartitions answers AddPartitionsToTxn v0-3. As in KafkaApis, a
// partition that does not exist fails with UNKNOWN_TOPIC_OR_PARTITION (one
// of an internal topic with TOPIC_AUTHORIZATION_FAILED) and then none is
// added (the others get OPERATION_NOT_ATTEMPTED); otherwise
// every partition gets the coordinator's answer. PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH before v2.
func (c *Coordinator) handleAddPartitions(r *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	missing := map[TopicPartition]*kerr.Error{}
	var parts []TopicPartition
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{Topic: t.Topic, Partition: p}
			parts = append(parts, tp)
			switch {
			case internalTopic(t.Topic):
				// KafkaApis never authorizes WRITE on internal topics
				// for clients (AddOffsetsToTxn is the way in).
				missing[tp] = kerr.TopicAuthorizationFailed
			case !c.deps.PartitionExists(t.Topic, p):
				missing[tp] = kerr.UnknownTopicOrPartition
			}
		}
	}
	var e *kerr.Error
	if len(missing) == 0 {
		e = fenced(c.addPartitions(r.TransactionalID, r.ProducerID, r.ProducerEpoch, parts), r.Version, 2)
	}
	for _, t := range r.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			switch me := missing[TopicPartition{Topic: t.Topic, Partition: p}]; {
			case me != nil:
				rp.ErrorCode = me.Code
			case len(missing) > 0:
				rp.ErrorCode = kerr.OperationNotAttempted.Code
			default:
				rp.ErrorCode = code(e)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// handleAddOffsetsToTxn answers AddOffsetsToTxn v0-3: the group's
// __consumer_offsets partition joins the transaction (KafkaApis hands it
// to handleAddPartitionsToTransaction).
func (c *Coordinator) handleAddOffsets(r *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	tp := TopicPartition{Topic: groupTopic, Partition: c.deps.GroupPartition(r.Group)}
	e := c.addPartitions(r.TransactionalID, r.ProducerID, r.ProducerEpoch, []TopicPartition{tp})
	resp.ErrorCode = code(fenced(e, r.Version, 2))
	return resp
}

// addPartitions is Kafka's handleAddPartitionsToTransaction.
func (c *Coordinator) addPartitions(id string, pid int64, epoch int16, parts []TopicPartition) *kerr.Error {
	if id == "" {
		return kerr.InvalidRequest
	}
	if e := c.availability(id); e != nil {
		return e
	}
	c.mu.Lock()
	m := c.txns[id]
	var e *kerr.Error
	switch {
	case m == nil && c.availability(id) != nil:
		e = c.availability(id) // unloaded meanwhile
	case m == nil || m.producerID != pid:
		e = kerr.InvalidProducerIDMapping
	case m.epoch != epoch:
		e = kerr.ProducerFenced
	case m.hasPending, m.state == statePrepareCommit, m.state == statePrepareAbort:
		e = kerr.ConcurrentTransactions
	case m.state == stateOngoing && m.hasAll(parts):
		// Already in the transaction: nothing to write.
		c.mu.Unlock()
		return nil
	}
	if e != nil {
		c.mu.Unlock()
		return e
	}
	// Kafka's prepareAddPartitions: a new transaction starts now.
	now := c.nowMs()
	start := m.startMs
	if m.state == stateEmpty || m.state == stateCompleteCommit || m.state == stateCompleteAbort {
		start = now
	}
	all := make(map[TopicPartition]struct{}, len(m.parts)+len(parts))
	for tp := range m.parts {
		all[tp] = struct{}{}
	}
	for _, tp := range parts {
		all[tp] = struct{}{}
	}
	tr := m.to(stateOngoing, sortedParts(all), start, now)
	if !m.prepare(tr) {
		c.mu.Unlock()
		c.logger.Error("illegal transition to Ongoing", "transactional_id", id, "state", m.state)
		return kerr.UnknownServerError
	}
	c.mu.Unlock()
	return c.write(m, tr)
}

// hasAll reports whether every partition is in m's transaction.
func (m *txnMeta) hasAll(parts []TopicPartition) bool {
	for _, tp := range parts {
		if _, ok := m.parts[tp]; !ok {
			return false
		}
	}
	return true
}

// internalTopic reports whether topic is one of Kafka's internal topics
// (Topic.isInternal).
func internalTopic(topic string) bool {
	return topic == groupTopic || topic == "__transaction_state"
}
