package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Legacy message sets (message format v0 and v1, "magic 0/1") are what
// Produce v0-v2 carry. Each message is
//
//	offset int64, messageSize int32,
//	crc uint32 (CRC-32 IEEE over magic..end), magic int8, attributes int8,
//	timestamp int64 (magic 1 only), key bytes, value bytes
//
// where bytes are an int32 length (-1 null) and the data. A compressed
// message (attribute bits 0-2 != 0) is a wrapper whose value is a
// compressed inner message set (Kafka's LegacyRecord layout).
const (
	legacyLogOverhead    = 12 // offset + messageSize
	legacyMinSizeV0      = 14 // crc, magic, attributes, key length, value length
	legacyMinSizeV1      = legacyMinSizeV0 + 8
	legacyAttrLogAppend  = 0x08     // timestamp type bit (magic 1)
	legacyNoTimestamp    = -1       // Kafka's NO_TIMESTAMP, used for magic 0 messages
	legacyMagicPos       = posMagic // the magic byte sits where a v2 batch has it
	legacyMagicInMessage = 4        // magic's position after messageSize
	legacyTimestampInMsg = 6
	legacyKeyInMessageV0 = 6
	legacyKeyInMessageV1 = 14
	lz4FrameMagic        = 0x184D2204
	lz4FlagContentSize   = 0x08
	lz4FlagDictID        = 0x01
)

// IsLegacy reports whether records starts with a legacy message (magic 0
// or 1) rather than a v2 record batch. It looks only at the magic byte.
func IsLegacy(records []byte) bool {
	return len(records) > legacyMagicPos && records[legacyMagicPos] < MagicV2
}

// ConvertLegacy up-converts a legacy message set (magic 0 and/or 1,
// compressed or not) into one v2 record batch, as Kafka does when it
// stores old-format produce data in message format v2: base offset 0,
// offset deltas 0..n-1, no producer id/epoch/sequence, no headers, keys
// and values unchanged (null stays null), timestamps kept for magic 1
// (a LogAppendTime wrapper's timestamp for its inner messages) and -1
// (NO_TIMESTAMP) for magic 0. The batch is compressed with the codec of
// the set's (last) compressed wrapper, or not at all.
//
// Every CRC is checked and every length bounded by the bytes present; the
// total decompressed size is capped at MaxDecompressedSize. Errors wrap
// kerr.CorruptMessage (bad framing, CRC, codec data), kerr.InvalidRecord
// (nested compression, empty wrappers, mixed magic in a wrapper) or
// kerr.UnsupportedCompressionType (zstd, which needs message format v2).
func ConvertLegacy(records []byte) ([]byte, error) {
	var c legacyConverter
	if err := c.addSet(records, nil); err != nil {
		return nil, err
	}
	if len(c.recs) == 0 {
		return nil, fmt.Errorf("record: empty legacy message set: %w", kerr.InvalidRecord)
	}
	h := BatchHeader{
		PartitionLeaderEpoch: -1,
		Attributes:           int16(c.codec),
		LastOffsetDelta:      int32(len(c.recs) - 1),
		BaseTimestamp:        c.ts[0],
		MaxTimestamp:         c.ts[0],
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}
	for i := range c.recs {
		h.MaxTimestamp = max(h.MaxTimestamp, c.ts[i])
		c.recs[i].TimestampDelta = c.ts[i] - h.BaseTimestamp
		c.recs[i].OffsetDelta = int32(i)
	}
	out, err := Build(h, c.recs)
	if err != nil {
		return nil, fmt.Errorf("record: convert legacy message set: %w", err)
	}
	return out, nil
}

// legacyMessage is one decoded legacy message.
type legacyMessage struct {
	magic      int8
	attributes int8
	timestamp  int64
	key, value []byte
}

func (m *legacyMessage) codec() Compression { return Compression(m.attributes & 0x07) }

// legacyConverter collects the records of a message set, depth first.
type legacyConverter struct {
	recs     []Record
	ts       []int64 // absolute timestamp of recs[i]
	codec    Compression
	inflated int // total decompressed bytes so far
}

// addSet appends the records of set. wrapper is the compressed message set
// is nested in, or nil at the top level.
func (c *legacyConverter) addSet(set []byte, wrapper *legacyMessage) error {
	for len(set) > 0 {
		m, rest, err := nextLegacyMessage(set)
		if err != nil {
			return err
		}
		set = rest
		if wrapper != nil {
			if m.codec() != None {
				return fmt.Errorf("record: compressed message inside a compressed wrapper: %w", kerr.InvalidRecord)
			}
			if m.magic != wrapper.magic {
				return fmt.Errorf("record: inner message magic %d in a magic %d wrapper: %w", m.magic, wrapper.magic, kerr.InvalidRecord)
			}
			if wrapper.magic == 1 && wrapper.attributes&legacyAttrLogAppend != 0 {
				m.timestamp = wrapper.timestamp
			}
		} else if m.codec() != None {
			if err := c.addWrapper(&m); err != nil {
				return err
			}
			continue
		}
		c.recs = append(c.recs, Record{Key: m.key, Value: m.value})
		c.ts = append(c.ts, m.timestamp)
	}
	return nil
}

// addWrapper decompresses a compressed wrapper message and adds its inner
// messages.
func (c *legacyConverter) addWrapper(m *legacyMessage) error {
	codec := m.codec()
	switch {
	case codec == Zstd:
		return fmt.Errorf("record: zstd needs message format v2, got magic %d: %w", m.magic, kerr.UnsupportedCompressionType)
	case codec > Zstd:
		return fmt.Errorf("record: unknown compression codec %d: %w", codec, kerr.CorruptMessage)
	case m.value == nil:
		return fmt.Errorf("record: compressed wrapper message with a null value: %w", kerr.CorruptMessage)
	}
	data := m.value
	if codec == LZ4 && m.magic == 0 {
		data = fixLZ4HeaderChecksum(data)
	}
	raw, err := Decompress(codec, data)
	if err != nil {
		return fmt.Errorf("record: legacy wrapper: %w", err)
	}
	if c.inflated += len(raw); c.inflated > MaxDecompressedSize {
		return fmt.Errorf("record: legacy message set decompresses to more than %d bytes: %w", MaxDecompressedSize, kerr.CorruptMessage)
	}
	before := len(c.recs)
	if err := c.addSet(raw, m); err != nil {
		return err
	}
	if len(c.recs) == before {
		return fmt.Errorf("record: compressed wrapper message with no inner messages: %w", kerr.InvalidRecord)
	}
	c.codec = codec
	return nil
}

// nextLegacyMessage decodes the first message of buf, checking its CRC.
func nextLegacyMessage(buf []byte) (m legacyMessage, rest []byte, err error) {
	if len(buf) < legacyLogOverhead {
		return m, nil, fmt.Errorf("record: legacy message truncated: %d bytes, shorter than the %d-byte log overhead: %w", len(buf), legacyLogOverhead, kerr.CorruptMessage)
	}
	size := int64(int32(be.Uint32(buf[8:])))
	if size < legacyMinSizeV0 {
		return m, nil, fmt.Errorf("record: legacy message size %d below minimum %d: %w", size, legacyMinSizeV0, kerr.CorruptMessage)
	}
	if size > int64(len(buf)-legacyLogOverhead) {
		return m, nil, fmt.Errorf("record: legacy message truncated: size %d, only %d bytes left: %w", size, len(buf)-legacyLogOverhead, kerr.CorruptMessage)
	}
	msg := buf[legacyLogOverhead : legacyLogOverhead+int(size)]
	rest = buf[legacyLogOverhead+int(size):]
	m.magic = int8(msg[legacyMagicInMessage])
	m.attributes = int8(msg[legacyMagicInMessage+1])
	p := legacyKeyInMessageV0
	switch m.magic {
	case 0:
		m.timestamp = legacyNoTimestamp
	case 1:
		if size < legacyMinSizeV1 {
			return m, nil, fmt.Errorf("record: magic 1 message size %d below minimum %d: %w", size, legacyMinSizeV1, kerr.CorruptMessage)
		}
		m.timestamp = int64(be.Uint64(msg[legacyTimestampInMsg:]))
		p = legacyKeyInMessageV1
	default:
		return m, nil, fmt.Errorf("record: magic %d in a legacy message set: %w", m.magic, kerr.CorruptMessage)
	}
	if stored, computed := be.Uint32(msg), crc32.ChecksumIEEE(msg[legacyMagicInMessage:]); stored != computed {
		return m, nil, fmt.Errorf("record: legacy message CRC mismatch (stored %08x, computed %08x): %w", stored, computed, kerr.CorruptMessage)
	}
	if m.key, err = legacyBytes(msg, &p, "key"); err != nil {
		return m, nil, err
	}
	if m.value, err = legacyBytes(msg, &p, "value"); err != nil {
		return m, nil, err
	}
	if p != len(msg) {
		return m, nil, fmt.Errorf("record: %d bytes after a legacy message's value: %w", len(msg)-p, kerr.CorruptMessage)
	}
	return m, rest, nil
}

// legacyBytes reads an int32-length-prefixed nullable byte field at *p.
func legacyBytes(msg []byte, p *int, what string) ([]byte, error) {
	if len(msg)-*p < 4 {
		return nil, fmt.Errorf("record: legacy message %s length truncated: %w", what, kerr.CorruptMessage)
	}
	n := int64(int32(be.Uint32(msg[*p:])))
	*p += 4
	switch {
	case n == -1:
		return nil, nil
	case n < -1:
		return nil, fmt.Errorf("record: legacy message %s length %d: %w", what, n, kerr.CorruptMessage)
	case n > int64(len(msg)-*p):
		return nil, fmt.Errorf("record: legacy message %s of %d bytes, only %d left: %w", what, n, len(msg)-*p, kerr.CorruptMessage)
	}
	b := msg[*p : *p+int(n) : *p+int(n)]
	*p += int(n)
	return b, nil
}

// fixLZ4HeaderChecksum returns data with its LZ4 frame descriptor checksum
// recomputed. Kafka before message format v1 (and librdkafka writing magic
// 0) hashed the frame magic number into that checksum (KAFKA-3160), which
// standard decoders reject; Kafka accepts it for magic 0, and so do we.
// Data that is not a well-formed frame start is returned unchanged, for the
// decoder to reject.
func fixLZ4HeaderChecksum(data []byte) []byte {
	if len(data) < 7 || binary.LittleEndian.Uint32(data) != lz4FrameMagic {
		return data
	}
	end := 6 // past FLG and BD
	if data[4]&lz4FlagContentSize != 0 {
		end += 8
	}
	if data[4]&lz4FlagDictID != 0 {
		end += 4
	}
	if len(data) <= end {
		return data
	}
	hc := byte(xxh32Short(data[4:end]) >> 8)
	if data[end] == hc {
		return data
	}
	fixed := append([]byte(nil), data...)
	fixed[end] = hc
	return fixed
}

// xxHash32 (seed 0) primes.
const (
	xxhPrime1 uint32 = 2654435761
	xxhPrime2 uint32 = 2246822519
	xxhPrime3 uint32 = 3266489917
	xxhPrime4 uint32 = 668265263
	xxhPrime5 uint32 = 374761393
)

// xxh32Short is xxHash32 with seed 0 for inputs shorter than 16 bytes (an
// LZ4 frame descriptor is at most 14), which skip the 16-byte stripe loop.
func xxh32Short(b []byte) uint32 {
	h := xxhPrime5 + uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * xxhPrime3
		h = bits.RotateLeft32(h, 17) * xxhPrime4
	}
	for _, c := range b {
		h += uint32(c) * xxhPrime5
		h = bits.RotateLeft32(h, 11) * xxhPrime1
	}
	h ^= h >> 15
	h *= xxhPrime2
	h ^= h >> 13
	h *= xxhPrime3
	h ^= h >> 16
	return h
}
