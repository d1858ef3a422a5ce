package record

// The exported contract of this package (types, constants, accessors,
// Validate, Next, Build, codecs). Implementations live in batch.go,
// validate.go, records.go, build.go, compress.go and varint.go.

import "errors"

// Batch header layout (all big-endian). See Kafka's DefaultRecordBatch.
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
//
// The accessors read fixed header positions and panic if len(b) <
// HeaderSize; use Next or Validate first on untrusted bytes.
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
