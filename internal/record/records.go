package record

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// minRecordSize is the smallest encoding of one record: length, attributes,
// timestampDelta, offsetDelta, keyLength, valueLength, headersCount, each
// at least one byte. It bounds how many records a buffer can hold.
const minRecordSize = 7

// Records decompresses (if needed) and decodes every record. Key/Value
// slices may alias b (uncompressed) or a fresh buffer (compressed).
func (b Batch) Records() ([]Record, error) {
	data, n, err := b.recordsSection()
	if err != nil {
		return nil, err
	}
	recs := make([]Record, 0, n)
	err = decodeRecords(data, n, func(r *Record) error {
		recs = append(recs, *r)
		return nil
	}, false)
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// ForEachRecord decodes records one by one without building a slice.
// The *Record passed to fn is reused between calls (copy it to keep it);
// its Key, Value and Headers stay valid after fn returns. An error from fn
// stops the iteration and is returned unchanged.
func (b Batch) ForEachRecord(fn func(r *Record) error) error {
	data, n, err := b.recordsSection()
	if err != nil {
		return err
	}
	return decodeRecords(data, n, fn, true)
}

// recordsSection returns the decompressed records section and the record
// count, checked against what the section can hold.
func (b Batch) recordsSection() ([]byte, int, error) {
	if len(b) < HeaderSize {
		return nil, 0, fmt.Errorf("record: batch of %d bytes, shorter than the %d-byte header: %w", len(b), HeaderSize, kerr.CorruptMessage)
	}
	if b.Size() != len(b) {
		return nil, 0, fmt.Errorf("record: batchLength %d disagrees with batch size %d: %w", b.BatchLength(), len(b), kerr.CorruptMessage)
	}
	n := b.NumRecords()
	if n < 0 {
		return nil, 0, fmt.Errorf("record: negative numRecords %d: %w", n, kerr.CorruptMessage)
	}
	if n == 0 {
		// Like Kafka's DefaultRecordBatch iterator: a count of 0 means no
		// records, whatever follows the header (not even decompressed).
		return nil, 0, nil
	}
	data := []byte(b[HeaderSize:])
	if c := b.Compression(); c != None {
		var err error
		if data, err = Decompress(c, data); err != nil {
			return nil, 0, err
		}
	}
	if int64(n)*minRecordSize > int64(len(data)) {
		return nil, 0, fmt.Errorf("record: numRecords %d cannot fit in %d bytes: %w", n, len(data), kerr.CorruptMessage)
	}
	return data, int(n), nil
}

// decodeRecords decodes exactly n records from data, calling fn for each.
// With reuse, one Record value is reused across calls.
func decodeRecords(data []byte, n int, fn func(*Record) error, reuse bool) error {
	var r Record
	p := 0
	for i := 0; i < n; i++ {
		if p >= len(data) {
			return fmt.Errorf("record: records section ends after %d of %d records: %w", i, n, kerr.CorruptMessage)
		}
		if !reuse {
			r = Record{}
		}
		if err := decodeRecord(data, &p, &r); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	if p != len(data) {
		return fmt.Errorf("record: %d bytes left after %d records: %w", len(data)-p, n, kerr.CorruptMessage)
	}
	return nil
}

// decodeRecord decodes the record at data[*p:] into r and advances *p.
func decodeRecord(data []byte, p *int, r *Record) error {
	length, err := readVarint(data, p)
	if err != nil {
		return err
	}
	if length < minRecordSize-1 || int(length) > len(data)-*p {
		return fmt.Errorf("record: record length %d with %d bytes left: %w", length, len(data)-*p, kerr.CorruptMessage)
	}
	end := *p + int(length)
	body := data[:end] // every read below is bounded by the record's own length
	r.Attributes = int8(body[*p])
	*p++
	if r.TimestampDelta, err = readVarlong(body, p); err != nil {
		return err
	}
	if r.OffsetDelta, err = readVarint(body, p); err != nil {
		return err
	}
	if r.Key, err = readBytes(body, p, "key"); err != nil {
		return err
	}
	if r.Value, err = readBytes(body, p, "value"); err != nil {
		return err
	}
	count, err := readVarint(body, p)
	if err != nil {
		return err
	}
	// Each header takes at least two bytes (key length, value length).
	if count < 0 || int(count) > (end-*p)/2 {
		return fmt.Errorf("record: header count %d with %d bytes left: %w", count, end-*p, kerr.CorruptMessage)
	}
	r.Headers = nil
	if count > 0 {
		r.Headers = make([]Header, count)
		for i := range r.Headers {
			k, err := readBytes(body, p, "header key")
			if err != nil {
				return err
			}
			if k == nil {
				return fmt.Errorf("record: null header key: %w", kerr.CorruptMessage)
			}
			r.Headers[i].Key = string(k)
			if r.Headers[i].Value, err = readBytes(body, p, "header value"); err != nil {
				return err
			}
		}
	}
	if *p != end {
		return fmt.Errorf("record: record length %d but fields use %d bytes: %w", length, int(length)-(end-*p), kerr.CorruptMessage)
	}
	return nil
}

// readBytes reads a varint length (-1 = null) and that many bytes. A
// non-null empty field is returned as a non-nil empty slice.
func readBytes(buf []byte, p *int, what string) ([]byte, error) {
	n, err := readVarint(buf, p)
	if err != nil {
		return nil, err
	}
	if n == -1 {
		return nil, nil
	}
	if n < 0 || int(n) > len(buf)-*p {
		return nil, fmt.Errorf("record: %s length %d with %d bytes left: %w", what, n, len(buf)-*p, kerr.CorruptMessage)
	}
	v := buf[*p : *p+int(n) : *p+int(n)]
	*p += int(n)
	return v, nil
}
