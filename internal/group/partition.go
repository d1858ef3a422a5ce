package group

import "github.com/strata-io/strata/internal/coordkey"

// PartitionFor returns the __consumer_offsets partition of groupID, as
// Kafka computes it (coordkey.Partition).
func PartitionFor(groupID string, numPartitions int32) int32 {
	return coordkey.Partition(groupID, numPartitions)
}
