// Package storage is Strata's partition log engine: Kafka's on-disk
// layout (segments of record batches with sparse offset and time indexes),
// group-commit durability, crash recovery, retention, idempotent-producer
// state and the segment-swap API used by the cleaner. See docs/storage.md.
package storage

import "time"

// Config holds one partition's resolved topic settings (Kafka's topic
// config names in the comments). The broker builds it from the topic's
// configs over the broker defaults; UpdateConfig swaps it at run time.
type Config struct {
	SegmentBytes         int64         // segment.bytes (1073741824)
	SegmentMs            time.Duration // segment.ms (7d)
	SegmentJitterMs      time.Duration // segment.jitter.ms (0)
	SegmentIndexBytes    int32         // segment.index.bytes (10485760)
	IndexIntervalBytes   int32         // index.interval.bytes (4096)
	RetentionMs          int64         // retention.ms (604800000; -1 = infinite)
	RetentionBytes       int64         // retention.bytes (-1 = infinite)
	FileDeleteDelay      time.Duration // file.delete.delay.ms (60000)
	FlushMessages        int64         // flush.messages (MaxInt64 = never by count)
	FlushMs              int64         // flush.ms (MaxInt64 = never by time)
	MaxMessageBytes      int32         // max.message.bytes (1048588)
	LogAppendTime        bool          // message.timestamp.type=LogAppendTime
	Preallocate          bool          // preallocate
	Compact              bool          // cleanup.policy contains compact
	Delete               bool          // cleanup.policy contains delete
	MaxCompactionLagMs   int64         // max.compaction.lag.ms (caps segment.ms for compacted logs)
	TimestampBeforeMaxMs int64         // message.timestamp.before.max.ms
	TimestampAfterMaxMs  int64         // message.timestamp.after.max.ms
	// Compaction settings, read by the cleaner.
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio (0.5)
	DeleteRetentionMs      int64   // delete.retention.ms (86400000)
	MinCompactionLagMs     int64   // min.compaction.lag.ms (0)
	// Durable: when true (the default), HighWatermark only advances over
	// fsynced bytes and WaitDurable waits for the group commit. When false
	// (flush.* knobs set), the high watermark follows the log end offset.
	Durable bool
}

// Chunk is a byte range of one segment file holding whole batches. The
// network layer sends it with sendfile (File.Fd) or ReadAt. Release must be
// called once the bytes are sent; the file stays readable until then even
// if the segment is deleted or swapped out meanwhile.
type Chunk struct {
	File *SegmentFile
	Pos  int64
	Len  int64
}

// ReadResult is the answer to Read.
type ReadResult struct {
	Chunks         []Chunk // in offset order; total length <= maxBytes unless minOneBatch forced a larger first batch
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	// LastStableOffset is the log's last stable offset when the read ran
	// (min of the open transactions' first offsets and the high watermark).
	LastStableOffset int64
	// What a waiting fetch could read from here, as Kafka's
	// DelayedFetch.tryComplete measures it: OlderSegment is set when the
	// read starts in a segment older than the one holding the read's end
	// (the high watermark; the last stable offset for ReadCommitted), and
	// Readable is otherwise the bytes from the read's first batch to that
	// end. Both are zero when the read is at the end.
	OlderSegment bool
	Readable     int64
}

// Release releases every chunk.
func (r *ReadResult) Release() {
	for _, c := range r.Chunks {
		c.File.Release()
	}
	r.Chunks = nil
}

// SegmentInfo describes one segment for the cleaner and admin views.
type SegmentInfo struct {
	BaseOffset       int64
	NextOffset       int64 // base of the following segment, or LEO for the active one
	Size             int64
	LargestTimestamp int64 // max record timestamp (or file mtime when none)
	FirstTimestamp   int64 // max timestamp of the first batch, -1 when none
	Active           bool
}

// AbortedTxn is one .txnindex entry (Kafka's AbortedTxn: version int16 = 0 |
// producerId int64 | firstOffset int64 | lastOffset int64 |
// lastStableOffset int64; 34 bytes, big endian, no header). LastOffset is
// the offset of the ABORT marker; LastStableOffset the partition's last
// stable offset right after the abort completed.
type AbortedTxn struct{ ProducerID, FirstOffset, LastOffset, LastStableOffset int64 }

// ProducerInfo is one producer's live state (DescribeProducers).
type ProducerInfo struct {
	ProducerID            int64
	Epoch                 int16
	LastSequence          int32 // -1 when no data batch is remembered
	LastTimestamp         int64
	CoordinatorEpoch      int32 // -1 until a marker was written
	CurrentTxnStartOffset int64 // -1 = no open transaction
}
