package record

import (
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"
)

// minBatchLength is the smallest legal batchLength: a v2 header, no records.
const minBatchLength = HeaderSize - LogOverhead

// Next splits the first batch off buf. At a partial batch at the end of buf
// it returns ErrTruncated; a batchLength below the minimum is corruption
// (wraps kerr.CorruptMessage). It checks framing only, not the CRC.
// An empty buf returns io.EOF, so callers may loop until len(rest) == 0 or
// until io.EOF.
func Next(buf []byte) (batch Batch, rest []byte, err error) {
	if len(buf) == 0 {
		return nil, nil, io.EOF
	}
	if len(buf) < LogOverhead {
		return nil, buf, fmt.Errorf("%w: %d bytes, shorter than the %d-byte log overhead", ErrTruncated, len(buf), LogOverhead)
	}
	length := int32(be.Uint32(buf[posBatchLength:]))
	if length < minBatchLength {
		return nil, buf, fmt.Errorf("record: batchLength %d below minimum %d: %w", length, minBatchLength, kerr.CorruptMessage)
	}
	size := LogOverhead + int(length)
	if size > len(buf) {
		return nil, buf, fmt.Errorf("%w: batch of %d bytes, only %d present", ErrTruncated, size, len(buf))
	}
	return Batch(buf[:size:size]), buf[size:], nil
}

// Validate checks one batch as a broker must before accepting it: length
// fields agree with len(b), size >= HeaderSize, magic 2, CRC-32C matches,
// NumRecords == LastOffsetDelta+1 (for non-empty batches). It does not
// decompress. Errors wrap kerr.CorruptMessage or kerr.InvalidRecord.
func Validate(b []byte) error {
	if err := validateFrame(b); err != nil {
		return err
	}
	bt := Batch(b)
	if n := bt.NumRecords(); n > 0 && int64(n) != int64(bt.LastOffsetDelta())+1 {
		return fmt.Errorf("record: numRecords %d != lastOffsetDelta %d + 1: %w", n, bt.LastOffsetDelta(), kerr.InvalidRecord)
	}
	return nil
}

// ValidateStored checks a batch read back from a log segment. It is Validate
// relaxed for compacted data: the cleaner keeps a batch's lastOffsetDelta
// while removing records, so it requires only NumRecords <= LastOffsetDelta+1.
func ValidateStored(b []byte) error {
	if err := validateFrame(b); err != nil {
		return err
	}
	bt := Batch(b)
	if n := bt.NumRecords(); int64(n) > int64(bt.LastOffsetDelta())+1 {
		return fmt.Errorf("record: numRecords %d > lastOffsetDelta %d + 1: %w", n, bt.LastOffsetDelta(), kerr.InvalidRecord)
	}
	return nil
}

// validateFrame holds the checks shared by Validate and ValidateStored.
func validateFrame(b []byte) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("record: batch of %d bytes, shorter than the %d-byte header: %w", len(b), HeaderSize, kerr.CorruptMessage)
	}
	bt := Batch(b)
	if bt.Size() != len(b) {
		return fmt.Errorf("record: batchLength %d disagrees with batch size %d: %w", bt.BatchLength(), len(b), kerr.CorruptMessage)
	}
	if m := bt.Magic(); m != MagicV2 {
		return fmt.Errorf("record: unsupported magic %d (want %d): %w", m, MagicV2, kerr.CorruptMessage)
	}
	if stored, computed := bt.CRC(), bt.ComputeCRC(); stored != computed {
		return fmt.Errorf("record: CRC mismatch (stored %08x, computed %08x): %w", stored, computed, kerr.CorruptMessage)
	}
	if c := bt.Compression(); c > Zstd {
		return fmt.Errorf("record: unknown compression codec %d: %w", c, kerr.CorruptMessage)
	}
	if n := bt.NumRecords(); n < 0 {
		return fmt.Errorf("record: negative numRecords %d: %w", n, kerr.CorruptMessage)
	}
	if d := bt.LastOffsetDelta(); d < 0 {
		return fmt.Errorf("record: negative lastOffsetDelta %d: %w", d, kerr.InvalidRecord)
	}
	return nil
}
