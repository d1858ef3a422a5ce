package record

import (
	"encoding/binary"
	"hash/crc32"
)

// Byte positions of the v2 header fields (Kafka's DefaultRecordBatch).
const (
	posBaseOffset      = 0
	posBatchLength     = 8
	posLeaderEpoch     = 12
	posMagic           = 16
	posCRC             = 17
	posAttributes      = 21
	posLastOffsetDelta = 23
	posBaseTimestamp   = 27
	posMaxTimestamp    = 35
	posProducerID      = 43
	posProducerEpoch   = 51
	posBaseSequence    = 53
	posNumRecords      = 57
)

// castagnoli is the CRC-32C table; it is built once and only read.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var be = binary.BigEndian

// BaseOffset is the offset of the first record in the batch.
func (b Batch) BaseOffset() int64 { return int64(be.Uint64(b[posBaseOffset:])) }

// SetBaseOffset rewrites the base offset in place (outside the CRC).
func (b Batch) SetBaseOffset(o int64) { be.PutUint64(b[posBaseOffset:], uint64(o)) }

// BatchLength is the number of bytes after the batchLength field.
func (b Batch) BatchLength() int32 { return int32(be.Uint32(b[posBatchLength:])) }

// Size is the whole batch size in bytes: LogOverhead + BatchLength.
func (b Batch) Size() int { return LogOverhead + int(b.BatchLength()) }

// PartitionLeaderEpoch is the leader epoch stamped by the leader (-1 none).
func (b Batch) PartitionLeaderEpoch() int32 { return int32(be.Uint32(b[posLeaderEpoch:])) }

// SetPartitionLeaderEpoch rewrites the leader epoch in place (outside the CRC).
func (b Batch) SetPartitionLeaderEpoch(e int32) { be.PutUint32(b[posLeaderEpoch:], uint32(e)) }

// Magic is the format version byte (2 for record batch v2).
func (b Batch) Magic() int8 { return int8(b[posMagic]) }

// CRC is the stored CRC-32C.
func (b Batch) CRC() uint32 { return be.Uint32(b[posCRC:]) }

// Attributes is the raw attributes field.
func (b Batch) Attributes() int16 { return int16(be.Uint16(b[posAttributes:])) }

// Compression is the codec in attribute bits 0-2.
func (b Batch) Compression() Compression { return Compression(b.Attributes() & AttrCompressionMask) }

// IsLogAppendTime reports whether the timestamp type is LogAppendTime.
func (b Batch) IsLogAppendTime() bool { return b.Attributes()&AttrLogAppendTime != 0 }

// IsTransactional reports whether the batch is part of a transaction.
func (b Batch) IsTransactional() bool { return b.Attributes()&AttrTransactional != 0 }

// IsControl reports whether the batch is a control batch (txn marker etc.).
func (b Batch) IsControl() bool { return b.Attributes()&AttrControl != 0 }

// HasDeleteHorizon reports whether baseTimestamp holds a delete horizon (KIP-534).
func (b Batch) HasDeleteHorizon() bool { return b.Attributes()&AttrHasDeleteHorizon != 0 }

// LastOffsetDelta is lastOffset - baseOffset.
func (b Batch) LastOffsetDelta() int32 { return int32(be.Uint32(b[posLastOffsetDelta:])) }

// LastOffset is BaseOffset + LastOffsetDelta.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// BaseTimestamp is the first record's timestamp, or the delete horizon when
// HasDeleteHorizon, or -1 for an empty batch.
func (b Batch) BaseTimestamp() int64 { return int64(be.Uint64(b[posBaseTimestamp:])) }

// MaxTimestamp is the largest record timestamp (or the log append time).
func (b Batch) MaxTimestamp() int64 { return int64(be.Uint64(b[posMaxTimestamp:])) }

// ProducerID is the idempotent/transactional producer id (-1 none).
func (b Batch) ProducerID() int64 { return int64(be.Uint64(b[posProducerID:])) }

// ProducerEpoch is the producer epoch (-1 none).
func (b Batch) ProducerEpoch() int16 { return int16(be.Uint16(b[posProducerEpoch:])) }

// BaseSequence is the first record's sequence number (-1 none).
func (b Batch) BaseSequence() int32 { return int32(be.Uint32(b[posBaseSequence:])) }

// NumRecords is the record count stored in the header.
func (b Batch) NumRecords() int32 { return int32(be.Uint32(b[posNumRecords:])) }

// Header decodes all header fields.
func (b Batch) Header() BatchHeader {
	return BatchHeader{
		BaseOffset:           b.BaseOffset(),
		BatchLength:          b.BatchLength(),
		PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
		Magic:                b.Magic(),
		CRC:                  b.CRC(),
		Attributes:           b.Attributes(),
		LastOffsetDelta:      b.LastOffsetDelta(),
		BaseTimestamp:        b.BaseTimestamp(),
		MaxTimestamp:         b.MaxTimestamp(),
		ProducerID:           b.ProducerID(),
		ProducerEpoch:        b.ProducerEpoch(),
		BaseSequence:         b.BaseSequence(),
		NumRecords:           b.NumRecords(),
	}
}

// ComputeCRC returns the CRC-32C of bytes [21, end).
func (b Batch) ComputeCRC() uint32 { return crc32.Checksum(b[posAttributes:], castagnoli) }

// SetCRC recomputes the CRC and stores it in place.
func (b Batch) SetCRC() { be.PutUint32(b[posCRC:], b.ComputeCRC()) }

// SetLogAppendTime sets the timestamp-type bit, maxTimestamp = ts, and
// recomputes the CRC in place.
func (b Batch) SetLogAppendTime(ts int64) {
	be.PutUint16(b[posAttributes:], uint16(b.Attributes()|AttrLogAppendTime))
	be.PutUint64(b[posMaxTimestamp:], uint64(ts))
	b.SetCRC()
}

// SetMaxTimestamp sets maxTimestamp and recomputes the CRC in place.
func (b Batch) SetMaxTimestamp(ts int64) {
	be.PutUint64(b[posMaxTimestamp:], uint64(ts))
	b.SetCRC()
}

// String names the codec as Kafka does ("none", "gzip", ...).
func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return "unknown"
}
