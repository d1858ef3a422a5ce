package txn

import "github.com/strata-io/strata/internal/coordkey"

// PartitionFor returns the __transaction_state partition of a
// transactional id, as Kafka's TransactionStateManager.partitionFor
// computes it (coordkey.Partition).
func PartitionFor(transactionalID string, numPartitions int32) int32 {
	return coordkey.Partition(transactionalID, numPartitions)
}
