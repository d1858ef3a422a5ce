package record

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka varints are zig-zag encoded (protobuf sint32/sint64), the same
// encoding as encoding/binary's Varint; int32 varints are at most 5 bytes.

// readVarlong decodes a zig-zag varlong from buf at *p and advances *p.
func readVarlong(buf []byte, p *int) (int64, error) {
	v, n := binary.Varint(buf[*p:])
	if n <= 0 {
		return 0, fmt.Errorf("record: bad varlong at byte %d: %w", *p, kerr.CorruptMessage)
	}
	*p += n
	return v, nil
}

// readVarint decodes a zig-zag varint that must fit in an int32.
func readVarint(buf []byte, p *int) (int32, error) {
	v, n := binary.Varint(buf[*p:])
	if n <= 0 || n > 5 || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("record: bad varint at byte %d: %w", *p, kerr.CorruptMessage)
	}
	*p += n
	return int32(v), nil
}

// varintSize is the encoded size of v as a zig-zag varint.
func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
