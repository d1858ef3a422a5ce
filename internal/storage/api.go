package storage

// CONTRACT STUB written by the lead. The storage helper replaces the bodies
// (and may split the file), keeping every exported name and signature here:
// the broker, protocol, cleaner and group packages code against them. Adding
// exported API is fine; changing a signature means updating every caller in
// the repository in the same commit.

import (
	"context"
	"log/slog"
	"time"

	"github.com/strata-io/strata/internal/vfs"
)

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

// DefaultConfig returns Kafka's topic defaults.
func DefaultConfig() Config { panic("stub") }

// Options are the per-log dependencies.
type Options struct {
	FS     vfs.FS
	Syncer *Syncer // group commit shared by every log of a log dir
	Logger *slog.Logger
	Now    func() time.Time // nil = time.Now
	// ProducerIDExpiration is producer.id.expiration.ms (24h).
	ProducerIDExpiration time.Duration
}

// Syncer batches fdatasync calls: one fsync round covers every write
// appended to any log of the dir meanwhile (group commit). Owned by the log
// manager of a dir; Close stops its goroutine.
type Syncer struct{}

// NewSyncer starts a group-commit syncer.
func NewSyncer(logger *slog.Logger) *Syncer { panic("stub") }

// Close stops the syncer after a final round.
func (s *Syncer) Close() error { panic("stub") }

// Log is one topic partition's append-only log on disk: a directory
// "<topic>-<partition>" of segments named by 20-digit base offsets. One
// writer at a time (Append is serialised internally); readers run
// concurrently and take no lock across disk I/O.
type Log struct{}

// Open opens (creating if absent) the partition directory dir, runs crash
// recovery when the log dir was not shut down cleanly (cleanShutdown=false),
// completes or rolls back interrupted segment swaps, and loads producer
// state. topicID is written to partition.metadata.
func Open(dir string, topicID [16]byte, cfg Config, cleanShutdown bool, opts Options) (*Log, error) {
	panic("stub")
}

// AppendOptions carry per-request data for Append.
type AppendOptions struct {
	LeaderEpoch int32 // stamped into partitionLeaderEpoch of each batch
	// RequireKeys rejects (kerr.InvalidRecord, nothing appended) any record
	// with a null key: set for compacted topics.
	RequireKeys bool
}

// AppendResult describes where a produce landed.
type AppendResult struct {
	BaseOffset     int64 // offset of the first record appended
	LastOffset     int64
	LogAppendTime  int64 // -1 unless LogAppendTime
	LogStartOffset int64
	// Duplicate is true when an idempotent producer resent batches that were
	// already appended; the offsets are the original ones and nothing new was
	// written.
	Duplicate bool
	// RecordErrors lists the bad records (index within batch, message) when
	// the append was rejected because of individual records (Produce v8+).
	RecordErrors []RecordError
}

// RecordError is one rejected record.
type RecordError struct {
	Index   int32
	Message string
}

// Append validates records (one or more v2 batches as received from a
// producer), assigns offsets in place, and writes them. It either appends
// everything or nothing. Errors wrap kerr codes: CorruptMessage,
// MessageTooLarge, RecordListTooLarge, InvalidRecord, InvalidTimestamp,
// OutOfOrderSequenceNumber, InvalidProducerEpoch, DuplicateSequenceNumber,
// KafkaStorageError. It returns once the bytes are written to the file
// (acks=1 meaning); call WaitDurable for acks=all.
func (l *Log) Append(records []byte, opts AppendOptions) (AppendResult, error) { panic("stub") }

// WaitDurable blocks until every offset < upTo is fsynced (group commit) and
// the high watermark has advanced past it, or ctx ends.
func (l *Log) WaitDurable(ctx context.Context, upTo int64) error { panic("stub") }

// HighWatermarkChanged returns a channel closed the next time the high
// watermark advances (for long-poll fetches).
func (l *Log) HighWatermarkChanged() <-chan struct{} { panic("stub") }

// Chunk is a byte range of one segment file holding whole batches. The
// network layer sends it with sendfile (File.Fd) or ReadAt. Release must be
// called once the bytes are sent; the file stays readable until then even
// if the segment is deleted or swapped out meanwhile.
type Chunk struct {
	File *SegmentFile
	Pos  int64
	Len  int64
}

// SegmentFile is a reference-counted open segment .log file.
type SegmentFile struct{}

// File returns the open file (implements vfs.FDFile on the real disk).
func (f *SegmentFile) File() vfs.File { panic("stub") }

// Release drops one reference.
func (f *SegmentFile) Release() { panic("stub") }

// ReadResult is the answer to Read.
type ReadResult struct {
	Chunks         []Chunk // in offset order; total length <= maxBytes unless minOneBatch forced a larger first batch
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
}

// Release releases every chunk.
func (r *ReadResult) Release() { panic("stub") }

// Read returns whole batches starting with the batch that contains offset
// (or the next surviving batch after a compacted gap), never past the high
// watermark, at most maxBytes unless minOneBatch and the first batch is
// larger (KIP-74). offset < LogStartOffset or > LogEndOffset wraps
// kerr.OffsetOutOfRange. offset == high watermark returns no chunks.
func (l *Log) Read(offset int64, maxBytes int64, minOneBatch bool) (ReadResult, error) {
	panic("stub")
}

// OffsetForTimestamp returns the first offset whose record timestamp >= ts
// and that timestamp (ListOffsets by time); found=false past the end.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error) {
	panic("stub")
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets -3), or (-1, -1) for an empty log.
func (l *Log) MaxTimestamp() (offset int64, timestamp int64, err error) { panic("stub") }

// LogStartOffset is the first offset still readable.
func (l *Log) LogStartOffset() int64 { panic("stub") }

// LogEndOffset is the next offset to be assigned.
func (l *Log) LogEndOffset() int64 { panic("stub") }

// HighWatermark is the end of the readable (durable) prefix.
func (l *Log) HighWatermark() int64 { panic("stub") }

// Size is the total bytes of all segment files of the log.
func (l *Log) Size() int64 { panic("stub") }

// DeleteRecords advances the log start offset to before (-1 = high
// watermark); whole segments below it are removed by retention. before >
// high watermark wraps kerr.OffsetOutOfRange.
func (l *Log) DeleteRecords(before int64) (newLogStart int64, err error) { panic("stub") }

// ApplyRetention deletes whole closed segments, oldest first, breaching
// retention.ms / retention.bytes (when cfg.Delete) or the log start offset;
// they are renamed .deleted and unlinked after file.delete.delay.ms.
func (l *Log) ApplyRetention(now time.Time) (deleted int, err error) { panic("stub") }

// MaybeRoll rolls the active segment if it is non-empty and older than
// segment.ms (Strata rolls idle segments; Kafka only rolls on append).
func (l *Log) MaybeRoll(now time.Time) (rolled bool, err error) { panic("stub") }

// Roll closes the active segment and starts a new one (no-op if empty).
func (l *Log) Roll() error { panic("stub") }

// UpdateConfig applies changed topic settings from the next operation on.
func (l *Log) UpdateConfig(cfg Config) { panic("stub") }

// Config returns the settings in force.
func (l *Log) Config() Config { panic("stub") }

// Flush fsyncs everything written so far and advances the recovery point.
func (l *Log) Flush() error { panic("stub") }

// Close flushes, writes producer snapshot, trims indexes, closes files.
func (l *Log) Close() error { panic("stub") }

// Delete closes the log and removes its directory.
func (l *Log) Delete() error { panic("stub") }

// RecoveryPoint is the offset below which data is known fsynced.
func (l *Log) RecoveryPoint() int64 { panic("stub") }

// Dir returns the partition directory path.
func (l *Log) Dir() string { panic("stub") }

// ---- API for the cleaner (compaction) ----

// SegmentInfo describes one segment for the cleaner and admin views.
type SegmentInfo struct {
	BaseOffset       int64
	NextOffset       int64 // base of the following segment, or LEO for the active one
	Size             int64
	LargestTimestamp int64 // max record timestamp (or file mtime when none)
	FirstTimestamp   int64 // max timestamp of the first batch, -1 when none
	Active           bool
}

// Segments lists the segments in offset order.
func (l *Log) Segments() []SegmentInfo { panic("stub") }

// OpenSegment returns a reader over a closed or active segment's .log bytes
// [0, size) as of now; release the file when done.
func (l *Log) OpenSegment(baseOffset int64) (f *SegmentFile, size int64, err error) { panic("stub") }

// SegmentWriter writes a new segment (the cleaner's output) as .cleaned
// files with offset and time indexes built as batches are appended.
type SegmentWriter struct{}

// NewCleanedSegment starts a cleaner output segment with the given base.
func (l *Log) NewCleanedSegment(baseOffset int64) (*SegmentWriter, error) { panic("stub") }

// Append writes one already-final batch (offsets assigned) to the segment.
func (w *SegmentWriter) Append(batch []byte) error { panic("stub") }

// Size returns the bytes written so far.
func (w *SegmentWriter) Size() int64 { panic("stub") }

// Abort deletes the .cleaned files.
func (w *SegmentWriter) Abort() error { panic("stub") }

// ReplaceSegments atomically (crash-safe: .cleaned fsynced -> .swap ->
// originals .deleted -> strip .swap) replaces the closed segments whose
// base offsets are in old with the finished writers' segments. Readers
// holding old files keep reading them until released.
func (l *Log) ReplaceSegments(old []int64, replacements []*SegmentWriter) error { panic("stub") }

// ActiveProducerLastBatches returns, per producer id with live state, the
// last offset of its last data batch: the cleaner keeps those batches.
func (l *Log) ActiveProducerLastBatches() map[int64]int64 { panic("stub") }
