package cleaner

import (
	"errors"
	"fmt"

	"github.com/strata-io/strata/internal/record"
	"github.com/twmb/franz-go/pkg/kerr"
)

// rawRecord is one record of a batch's (decompressed) records section,
// located without copying or allocating: the cleaner only needs the key,
// whether the value is null, the deltas, and the encoded bytes to copy a
// kept record into a rebuilt batch unchanged.
type rawRecord struct {
	raw         []byte // the whole record, length prefix included
	bodyStart   int    // index in raw of the attributes byte
	tsStart     int    // index in raw of the timestampDelta varlong
	tsEnd       int    // index in raw just after it
	TsDelta     int64
	OffsetDelta int32
	Key         []byte // nil = null key
	NullValue   bool
}

var errBadRecord = errors.New("malformed record")

// uvarint decodes an unsigned LEB128 value of at most maxBytes bytes.
func uvarint(b []byte, p int, maxBytes int) (uint64, int, error) {
	var x uint64
	var s uint
	for i := 0; i < maxBytes; i++ {
		if p >= len(b) {
			return 0, p, errBadRecord
		}
		c := b[p]
		p++
		x |= uint64(c&0x7f) << s
		if c < 0x80 {
			return x, p, nil
		}
		s += 7
	}
	return 0, p, errBadRecord
}

func varlong(b []byte, p int) (int64, int, error) {
	u, p, err := uvarint(b, p, 10)
	return int64(u>>1) ^ -int64(u&1), p, err
}

func varint(b []byte, p int) (int32, int, error) {
	u, p, err := uvarint(b, p, 5)
	if u > 0xffffffff {
		return 0, p, errBadRecord
	}
	v := uint32(u)
	return int32(v>>1) ^ -int32(v&1), p, err
}

func appendVarlong(dst []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// scanRecords decodes each of the n records of data into *r (caller-owned
// scratch, so nothing escapes to the heap) and calls fn. r.raw aliases
// data.
func scanRecords(data []byte, n int, r *rawRecord, fn func(rec *rawRecord) error) error {
	p := 0
	for i := 0; i < n; i++ {
		start := p
		length, q, err := varint(data, p)
		if err != nil || length < 1 || int(length) > len(data)-q {
			return fmt.Errorf("record %d: bad length: %w", i, kerr.CorruptMessage)
		}
		end := q + int(length)
		body := data[:end] // bound every read below by the record's end
		r.raw = data[start:end]
		r.bodyStart = q - start
		q++ // attributes
		r.tsStart = q - start
		if r.TsDelta, q, err = varlong(body, q); err != nil {
			return fmt.Errorf("record %d: timestamp delta: %w", i, kerr.CorruptMessage)
		}
		r.tsEnd = q - start
		if r.OffsetDelta, q, err = varint(body, q); err != nil {
			return fmt.Errorf("record %d: offset delta: %w", i, kerr.CorruptMessage)
		}
		kl, q2, err := varint(body, q)
		if err != nil || kl < -1 || int(kl) > len(body)-q2 {
			return fmt.Errorf("record %d: key length: %w", i, kerr.CorruptMessage)
		}
		q = q2
		r.Key = nil
		if kl >= 0 {
			r.Key = body[q : q+int(kl) : q+int(kl)]
			q += int(kl)
		}
		vl, q2, err := varint(body, q)
		if err != nil || vl < -1 || int(vl) > len(body)-q2 {
			return fmt.Errorf("record %d: value length: %w", i, kerr.CorruptMessage)
		}
		r.NullValue = vl < 0
		if err := fn(r); err != nil {
			return err
		}
		p = end
	}
	if p != len(data) {
		return fmt.Errorf("%d bytes after %d records: %w", len(data)-p, n, kerr.CorruptMessage)
	}
	return nil
}

// batchRecords returns b's records section, decompressed if needed.
func batchRecords(b record.Batch) ([]byte, error) {
	data := []byte(b[record.HeaderSize:])
	if c := b.Compression(); c != record.None && len(data) > 0 {
		return record.Decompress(c, data)
	}
	return data, nil
}

// appendWithTsDelta appends rec re-encoded with a new timestamp delta.
func appendWithTsDelta(dst []byte, rec *rawRecord, delta int64) []byte {
	var tmp [10]byte
	enc := appendVarlong(tmp[:0], delta)
	bodyLen := len(rec.raw) - rec.bodyStart - (rec.tsEnd - rec.tsStart) + len(enc)
	dst = appendVarlong(dst, int64(int32(bodyLen)))
	dst = append(dst, rec.raw[rec.bodyStart:rec.tsStart]...)
	dst = append(dst, enc...)
	return append(dst, rec.raw[rec.tsEnd:]...)
}
