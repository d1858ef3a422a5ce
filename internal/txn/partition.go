package txn

import "unicode/utf16"

// javaStringHashCode is Java's String.hashCode over the UTF-16 code units
// of s, with int32 overflow.
func javaStringHashCode(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// PartitionFor returns the __transaction_state partition of a
// transactional id, as Kafka's TransactionStateManager.partitionFor
// computes it: Utils.abs(transactionalId.hashCode) % numPartitions, where
// Utils.abs maps Integer.MIN_VALUE to 0.
func PartitionFor(transactionalID string, numPartitions int32) int32 {
	h := javaStringHashCode(transactionalID)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % numPartitions
}
