// Package cleaner implements key-based log compaction for partitions whose
// cleanup.policy contains "compact", following Kafka's log cleaner rules:
// only closed segments below the high watermark are cleaned, each round
// builds a bounded key -> latest-offset map over the dirty section and
// recopies the log prefix keeping, for every key, records at or after its
// latest offset; offsets, timestamps and headers are never changed;
// tombstones get a KIP-534 delete horizon on the first cleaning that keeps
// them and are removed by a later cleaning after it. The output goes through
// storage's crash-safe segment swap (Log.NewCleanedSegment and
// Log.ReplaceSegments); the cleaner owns the cleaner-offset-checkpoint file.
//
// See docs/compaction.md for the guarantees and the differences from Kafka.
package cleaner
