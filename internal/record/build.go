package record

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Build encodes records into a complete batch using h's fields (BaseOffset,
// PartitionLeaderEpoch, Attributes incl. codec, LastOffsetDelta,
// BaseTimestamp, MaxTimestamp, ProducerID/Epoch, BaseSequence); it fills
// BatchLength, Magic, NumRecords and CRC. Records keep their deltas as given.
func Build(h BatchHeader, recs []Record) ([]byte, error) {
	c := Compression(h.Attributes & AttrCompressionMask)
	if c > Zstd {
		return nil, fmt.Errorf("record: build: unknown compression codec %d", c)
	}
	if len(recs) > math.MaxInt32 {
		return nil, fmt.Errorf("record: build: %d records exceed int32", len(recs))
	}
	size := HeaderSize
	if c == None {
		size += EncodedSize(recs)
	}
	out := make([]byte, HeaderSize, size)
	if c == None {
		out = AppendRecords(out, recs)
	} else if len(recs) > 0 {
		compressed, err := Compress(c, AppendRecords(nil, recs))
		if err != nil {
			return nil, fmt.Errorf("record: build: %w", err)
		}
		out = append(out, compressed...)
	}
	if len(out)-LogOverhead > math.MaxInt32 {
		return nil, fmt.Errorf("record: build: batch of %d bytes too large", len(out))
	}
	h.BatchLength = int32(len(out) - LogOverhead)
	h.Magic = MagicV2
	h.NumRecords = int32(len(recs))
	putHeader(out, &h)
	Batch(out).SetCRC()
	return out, nil
}

// BuildNumbered is Build for records as a producer or a coordinator writes
// them: it numbers recs in place (OffsetDelta i), sets LastOffsetDelta to
// len(recs)-1 and MaxTimestamp to BaseTimestamp plus the largest
// TimestampDelta; the other header fields are h's.
func BuildNumbered(h BatchHeader, recs []Record) ([]byte, error) {
	var maxDelta int64
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
		maxDelta = max(maxDelta, recs[i].TimestampDelta)
	}
	h.LastOffsetDelta = int32(len(recs) - 1)
	h.MaxTimestamp = h.BaseTimestamp + maxDelta
	return Build(h, recs)
}

// putHeader writes every header field except the CRC into b[:HeaderSize].
func putHeader(b []byte, h *BatchHeader) {
	be.PutUint64(b[posBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(b[posBatchLength:], uint32(h.BatchLength))
	be.PutUint32(b[posLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[posMagic] = byte(h.Magic)
	be.PutUint16(b[posAttributes:], uint16(h.Attributes))
	be.PutUint32(b[posLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[posBaseTimestamp:], uint64(h.BaseTimestamp))
	be.PutUint64(b[posMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(b[posProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[posProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[posBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[posNumRecords:], uint32(h.NumRecords))
}

// EncodedSize is the size of recs encoded as an uncompressed records section.
func EncodedSize(recs []Record) int {
	n := 0
	for i := range recs {
		body := bodySize(&recs[i])
		n += varintSize(int64(body)) + body
	}
	return n
}

// AppendRecords appends recs encoded as an uncompressed records section.
func AppendRecords(dst []byte, recs []Record) []byte {
	for i := range recs {
		dst = appendRecord(dst, &recs[i])
	}
	return dst
}

// bodySize is the encoded size of r after its length varint.
func bodySize(r *Record) int {
	n := 1 + varintSize(r.TimestampDelta) + varintSize(int64(r.OffsetDelta))
	n += bytesSize(r.Key) + bytesSize(r.Value) + varintSize(int64(len(r.Headers)))
	for i := range r.Headers {
		n += varintSize(int64(len(r.Headers[i].Key))) + len(r.Headers[i].Key) + bytesSize(r.Headers[i].Value)
	}
	return n
}

// bytesSize is the encoded size of a nullable byte field.
func bytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintSize(int64(len(b))) + len(b)
}

// appendRecord appends one record: length varint, then its body.
func appendRecord(dst []byte, r *Record) []byte {
	dst = binary.AppendVarint(dst, int64(bodySize(r)))
	dst = append(dst, byte(r.Attributes))
	dst = binary.AppendVarint(dst, r.TimestampDelta)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for i := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(r.Headers[i].Key)))
		dst = append(dst, r.Headers[i].Key...)
		dst = appendBytes(dst, r.Headers[i].Value)
	}
	return dst
}

// appendBytes appends a nullable byte field (-1 length for nil).
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}
