// Package coordkey maps a coordinator key (a group id, a transactional id)
// to the partition of the internal topic that holds its state, exactly as
// Kafka does, so a topic written by Strata reads the same to Kafka tools.
package coordkey

import "unicode/utf16"

// Partition returns Utils.abs(key.hashCode()) % numPartitions, Kafka's
// partitionFor in GroupMetadataManager and TransactionStateManager: Java's
// String.hashCode over the UTF-16 code units with int32 overflow, and
// Utils.abs mapping Integer.MIN_VALUE to 0.
func Partition(key string, numPartitions int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(key)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % numPartitions
}
