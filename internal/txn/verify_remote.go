package txn

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleAddPartitionsBatched answers AddPartitionsToTxn v4+, the
// broker-to-broker form of KIP-890 part 1: a partition leader asks the
// coordinator, with VerifyOnly, whether a transactional produce's
// partition is in the producer's ongoing transaction
// (TransactionCoordinator.handleVerifyPartitionsInTransaction). Each
// partition gets VerifyProduce's answer: NONE when added, else
// INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH,
// CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE, or the coordinator's own
// state (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...). A
// transaction without VerifyOnly adds its partitions as v3 does (Kafka
// serves batched adds to brokers the same way).
func (c *Coordinator) handleAddPartitionsBatched(r *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range r.Transactions {
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = t.TransactionalID
		var addErr *kerr.Error
		if !t.VerifyOnly {
			var parts []TopicPartition
			for _, tt := range t.Topics {
				for _, p := range tt.Partitions {
					parts = append(parts, TopicPartition{Topic: tt.Topic, Partition: p})
				}
			}
			addErr = c.addPartitions(t.TransactionalID, t.ProducerID, t.ProducerEpoch, parts)
		}
		for _, tt := range t.Topics {
			rtt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rtt.Topic = tt.Topic
			for _, p := range tt.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition = p
				if t.VerifyOnly {
					rp.ErrorCode = verifyCode(c.VerifyProduce(t.TransactionalID, t.ProducerID, t.ProducerEpoch,
						TopicPartition{Topic: tt.Topic, Partition: p}))
				} else {
					rp.ErrorCode = code(addErr)
				}
				rtt.Partitions = append(rtt.Partitions, rp)
			}
			rt.Topics = append(rt.Topics, rtt)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp
}

// verifyCode is the Kafka code VerifyProduce's error wraps.
func verifyCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
