package record

// CONTRACT STUB written by the lead: the record helper replaces these bodies
// with real implementations and may split this file, but must keep every
// exported name and signature below (others code against them).

import "errors"

// Batch header layout (all big-endian). See kafka-internals.md §2.1.
const (
	HeaderSize  = 61 // RECORD_BATCH_OVERHEAD
	LogOverhead = 12 // baseOffset + batchLength
	MagicV2     = 2
)

// Compression is the codec in attribute bits 0-2.
type Compression int8

// Compression codecs.
const (
	None   Compression = 0
	Gzip   Compression = 1
	Snappy Compression = 2
	LZ4    Compression = 3
	Zstd   Compression = 4
)

// Attribute bits.
const (
	AttrCompressionMask  int16 = 0x07
	AttrLogAppendTime    int16 = 1 << 3
	AttrTransactional    int16 = 1 << 4
	AttrControl          int16 = 1 << 5
	AttrHasDeleteHorizon int16 = 1 << 6
)

// Errors returned by validation. Each wraps the matching kerr error so the
// protocol layer can map it with errors.As(err, new(*kerr.Error)).
var (
	ErrTruncated = errors.New("record: truncated batch") // partial batch at end of buffer (torn tail), not corruption
)

// Batch is a view over exactly one record batch's bytes, from baseOffset to
// the end of its records. It does not copy. Setters write in place.
type Batch []byte

// BatchHeader is the decoded 61-byte header.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Header is one record header. Value nil means a null header value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one decoded record. Key nil means a null key (distinct from an
// empty, non-nil key); Value nil means a null value (a tombstone).
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte
	Value          []byte
	Headers        []Header
}

func (b Batch) BaseOffset() int64               { panic("stub") }
func (b Batch) SetBaseOffset(o int64)           { panic("stub") }
func (b Batch) BatchLength() int32              { panic("stub") }
func (b Batch) Size() int                       { panic("stub") } // LogOverhead + BatchLength
func (b Batch) PartitionLeaderEpoch() int32     { panic("stub") }
func (b Batch) SetPartitionLeaderEpoch(e int32) { panic("stub") }
func (b Batch) Magic() int8                     { panic("stub") }
func (b Batch) CRC() uint32                     { panic("stub") }
func (b Batch) Attributes() int16               { panic("stub") }
func (b Batch) Compression() Compression        { panic("stub") }
func (b Batch) IsLogAppendTime() bool           { panic("stub") }
func (b Batch) IsTransactional() bool           { panic("stub") }
func (b Batch) IsControl() bool                 { panic("stub") }
func (b Batch) HasDeleteHorizon() bool          { panic("stub") }
func (b Batch) LastOffsetDelta() int32          { panic("stub") }
func (b Batch) LastOffset() int64               { panic("stub") }
func (b Batch) BaseTimestamp() int64            { panic("stub") }
func (b Batch) MaxTimestamp() int64             { panic("stub") }
func (b Batch) ProducerID() int64               { panic("stub") }
func (b Batch) ProducerEpoch() int16            { panic("stub") }
func (b Batch) BaseSequence() int32             { panic("stub") }
func (b Batch) NumRecords() int32               { panic("stub") }
func (b Batch) Header() BatchHeader             { panic("stub") }

// ComputeCRC returns the CRC-32C of bytes [21, end).
func (b Batch) ComputeCRC() uint32 { panic("stub") }

// SetLogAppendTime sets the timestamp-type bit, maxTimestamp = ts, and
// recomputes the CRC in place.
func (b Batch) SetLogAppendTime(ts int64) { panic("stub") }

// Records decompresses (if needed) and decodes every record. Key/Value
// slices may alias b (uncompressed) or a fresh buffer (compressed).
func (b Batch) Records() ([]Record, error) { panic("stub") }

// ForEachRecord decodes records one by one without building a slice.
func (b Batch) ForEachRecord(fn func(r *Record) error) error { panic("stub") }

// Validate checks one batch as a broker must before accepting it: length
// fields agree with len(b), size >= HeaderSize, magic 2, CRC-32C matches,
// NumRecords == LastOffsetDelta+1 (for non-empty batches). It does not
// decompress. Errors wrap kerr.CorruptMessage or kerr.InvalidRecord.
func Validate(b []byte) error { panic("stub") }

// Next splits the first batch off buf. At a partial batch at the end of buf
// it returns ErrTruncated; a batchLength below the minimum is corruption
// (wraps kerr.CorruptMessage). It checks framing only, not the CRC.
func Next(buf []byte) (batch Batch, rest []byte, err error) { panic("stub") }

// Build encodes records into a complete batch using h's fields (BaseOffset,
// PartitionLeaderEpoch, Attributes incl. codec, LastOffsetDelta,
// BaseTimestamp, MaxTimestamp, ProducerID/Epoch, BaseSequence); it fills
// BatchLength, Magic, NumRecords and CRC. Records keep their deltas as given.
func Build(h BatchHeader, recs []Record) ([]byte, error) { panic("stub") }

// Compress and Decompress implement the codecs with Kafka's framing
// (gzip, snappy in xerial framing when reading, lz4 frame, zstd).
func Compress(c Compression, raw []byte) ([]byte, error)    { panic("stub") }
func Decompress(c Compression, data []byte) ([]byte, error) { panic("stub") }
