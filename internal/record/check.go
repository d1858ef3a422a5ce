package record

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
)

// CheckRecords is the broker's record-level check of a batch it is asked to
// store, after Validate has checked the header and the CRC. It reads every
// record the way Kafka's LogValidator does (validateMessagesAndAssignOffsets
// iterating DefaultRecordBatch's record iterators, which throw
// InvalidRecordException):
//
//   - the records present are exactly numRecords: fewer ("Incorrect declared
//     batch size, premature EOF reached") or bytes left after the last one
//     ("records still remaining") is INVALID_RECORD;
//   - every record's length varint matches the bytes its fields use
//     (DefaultRecord.readFrom "Invalid record size"), key, value and header
//     lengths fit in the record, header keys are not null, the header count
//     is not negative: otherwise INVALID_RECORD;
//   - offset deltas are 0, 1, ... numRecords-1 in order. Kafka rebuilds a
//     compressed batch whose inner offsets are not sequential and never
//     looks at them in an uncompressed one; Strata stores batches as they
//     come, so it refuses both (INVALID_RECORD): consumers compute a
//     record's offset from its delta, and a batch whose deltas disagree with
//     its header would show them offsets the log never assigned.
//
// Compressed records are decompressed as a stream through a fixed-size
// buffer and their keys, values and headers skipped, not kept (Kafka's
// skipKeyValueIterator), so a batch that inflates without bound (a "zip
// bomb") is refused with INVALID_RECORD once its records pass
// MaxDecompressedSize bytes, without that much memory ever being
// allocated. Zstandard frames may use windows of at most MaxZstdWindow. An
// undecodable compressed stream is CORRUPT_MESSAGE.
//
// It allocates nothing for an uncompressed batch whose records all have
// keys and timestamps within opts.
func CheckRecords(b Batch, opts CheckOptions) (RecordsInfo, error) {
	info := RecordsInfo{MaxTimestamp: -1}
	if len(b) < HeaderSize || b.Size() != len(b) {
		return info, fmt.Errorf("record: batch of %d bytes with batchLength %d: %w", len(b), b.BatchLength(), kerr.CorruptMessage)
	}
	n := b.NumRecords()
	if n < 0 {
		return info, fmt.Errorf("record: found invalid record count %d: %w", n, kerr.InvalidRecord)
	}
	if n == 0 {
		return info, nil // Kafka's iterators read nothing after a zero count
	}
	w := walker{n: n, base: b.BaseTimestamp(), opts: &opts, info: &info}
	data := []byte(b[HeaderSize:])
	c := b.Compression()
	if c == None {
		return info, w.slice(data)
	}
	if c > Zstd {
		return info, fmt.Errorf("record: unknown compression codec %d: %w", c, kerr.CorruptMessage)
	}
	// Every record takes at least minRecordSize bytes decompressed, so a
	// count beyond the bound cannot be honest.
	if int64(n) > MaxDecompressedSize/minRecordSize {
		return info, fmt.Errorf("record: numRecords %d cannot fit in %d decompressed bytes: %w", n, MaxDecompressedSize, kerr.InvalidRecord)
	}
	src, done, err := openStream(c, data)
	if err != nil {
		return info, fmt.Errorf("record: decompress %s: %v: %w", c, err, kerr.CorruptMessage)
	}
	defer done()
	err = w.stream(src)
	var se streamError
	if errors.As(err, &se) {
		return info, fmt.Errorf("record: decompress %s: %v: %w", c, se.err, kerr.CorruptMessage)
	}
	return info, err
}

// CheckOptions selects the per-record checks of CheckRecords besides the
// structural ones.
type CheckOptions struct {
	// CheckTimestamps lists in RecordsInfo.BadTimestamps the records whose
	// timestamp (baseTimestamp + timestampDelta; -1, no timestamp, is not
	// checked) is more than BeforeMs before NowMs or more than AfterMs after
	// it: Kafka's message.timestamp.before.max.ms and after.max.ms on
	// CreateTime topics.
	CheckTimestamps          bool
	NowMs, BeforeMs, AfterMs int64
	// CollectNullKeys lists in RecordsInfo.NullKeys the records with a
	// null key (compacted topics refuse them).
	CollectNullKeys bool
}

// RecordsInfo is what CheckRecords learned from the records.
type RecordsInfo struct {
	// MaxTimestamp is the largest record timestamp, -1 when none has one.
	MaxTimestamp int64
	// NullKeys are the indexes of the records with a null key (only with
	// CheckOptions.CollectNullKeys).
	NullKeys []int32
	// BadTimestamps are the indexes of the records outside the timestamp
	// bounds (only with CheckOptions.CheckTimestamps).
	BadTimestamps []int32
}

// MaxZstdWindow is the largest zstd window CheckRecords decodes: a frame
// asking for more is CORRUPT_MESSAGE. The Zstandard format recommends that
// decoders support 8 MiB; Kafka producers stay within it up to level 19
// (Kafka's default level is 3).
const MaxZstdWindow = 8 << 20

// walker checks records one after the other.
type walker struct {
	n    int32 // numRecords
	base int64 // baseTimestamp
	opts *CheckOptions
	info *RecordsInfo
}

// invalid builds an INVALID_RECORD error for record i.
func invalid(i int32, format string, args ...any) error {
	return fmt.Errorf("record %d: %s: %w", i, fmt.Sprintf(format, args...), kerr.InvalidRecord)
}

// record applies the per-record checks to record i's decoded fields.
func (w *walker) record(i, offsetDelta int32, tsDelta int64, nullKey bool) error {
	if offsetDelta != i {
		return invalid(i, "offset delta %d, want %d (deltas must run 0..numRecords-1 in order)", offsetDelta, i)
	}
	ts := w.base + tsDelta
	if ts > w.info.MaxTimestamp {
		w.info.MaxTimestamp = ts
	}
	if nullKey && w.opts.CollectNullKeys {
		w.info.NullKeys = append(w.info.NullKeys, i)
	}
	if o := w.opts; o.CheckTimestamps && ts != -1 && !timestampWithin(ts, o.NowMs, o.BeforeMs, o.AfterMs) {
		w.info.BadTimestamps = append(w.info.BadTimestamps, i)
	}
	return nil
}

// timestampWithin reports whether now-before <= ts <= now+after without
// overflowing (before and after are >= 0; either may be MaxInt64).
func timestampWithin(ts, now, before, after int64) bool {
	if ts < now {
		return uint64(now)-uint64(ts) <= uint64(before)
	}
	return uint64(ts)-uint64(now) <= uint64(after)
}

// varintAt decodes the zig-zag varint at b[q:], returning its value and
// length (<= 0 when malformed, as binary.Varint). One-byte values, most of
// a record's fields, take the inlined fast path.
func varintAt(b []byte, q int) (int64, int) {
	if q < len(b) && b[q] < 0x80 {
		c := int64(b[q])
		return c>>1 ^ -(c & 1), 1
	}
	if q >= len(b) {
		return 0, 0
	}
	return binary.Varint(b[q:])
}

// slice checks the records of an uncompressed records section.
func (w *walker) slice(data []byte) error {
	p := 0
	for i := int32(0); i < w.n; i++ {
		if p >= len(data) {
			return invalid(i, "incorrect declared batch size, premature end after %d of %d records", i, w.n)
		}
		length, k := varintAt(data, p)
		if k <= 0 || length < minRecordSize-1 || length > int64(len(data)-p-k) {
			return invalid(i, "record length %d with %d bytes left", length, len(data)-p-max(k, 0))
		}
		p += k
		body := data[p : p+int(length)]
		p += int(length)
		q := 1 // attributes
		tsDelta, k := varintAt(body, q)
		if k <= 0 {
			return invalid(i, "bad timestamp delta")
		}
		q += k
		offDelta, k := varintAt(body, q)
		if k <= 0 || offDelta < math.MinInt32 || offDelta > math.MaxInt32 {
			return invalid(i, "bad offset delta")
		}
		q += k
		keyLen, q, err := skipField(body, q, i, "key", true)
		if err != nil {
			return err
		}
		if _, q, err = skipField(body, q, i, "value", true); err != nil {
			return err
		}
		count, k := varintAt(body, q)
		if k <= 0 || count < 0 || count > int64(len(body)-q-k) {
			return invalid(i, "found invalid number of record headers %d", count)
		}
		q += k
		for h := int64(0); h < count; h++ {
			if _, q, err = skipField(body, q, i, "header key", false); err != nil {
				return err
			}
			if _, q, err = skipField(body, q, i, "header value", true); err != nil {
				return err
			}
		}
		if q != len(body) {
			return invalid(i, "invalid record size: expected to read %d bytes in record payload, but instead read %d", len(body), q)
		}
		if err := w.record(i, int32(offDelta), tsDelta, keyLen < 0); err != nil {
			return err
		}
	}
	if p != len(data) {
		return invalid(w.n-1, "incorrect declared batch size, %d bytes remain after the last record", len(data)-p)
	}
	return nil
}

// skipField reads a length varint at body[q:] and skips that many bytes;
// -1 (null) is allowed when nullable. It returns the length and the new
// position.
func skipField(body []byte, q int, i int32, what string, nullable bool) (int64, int, error) {
	n, k := varintAt(body, q)
	if k <= 0 || n < -1 || (n == -1 && !nullable) || n > int64(len(body)-q-k) {
		return 0, 0, invalid(i, "%s length %d with %d bytes left in the record", what, n, len(body)-q-max(k, 0))
	}
	q += k
	if n > 0 {
		q += int(n)
	}
	return n, q, nil
}

// streamError marks a failure of the decompressor itself (not of the
// records it produced).
type streamError struct{ err error }

func (e streamError) Error() string { return e.err.Error() }

// byteSource is the decompressed stream with the bound on its size.
type byteSource struct {
	r    *bufio.Reader
	left int64
}

var errBomb = errors.New("too large")

func (s *byteSource) readByte() (byte, error) {
	c, err := s.r.ReadByte()
	if err != nil {
		return 0, err
	}
	s.left--
	if s.left < 0 {
		return 0, errBomb
	}
	return c, nil
}

func (s *byteSource) varint() (int64, int, error) {
	var ux uint64
	for k := 0; k < binary.MaxVarintLen64; k++ {
		c, err := s.readByte()
		if err != nil {
			return 0, 0, err
		}
		if c < 0x80 {
			if k == binary.MaxVarintLen64-1 && c > 1 {
				return 0, 0, errBadVarint
			}
			ux |= uint64(c) << (7 * k)
			x := int64(ux >> 1)
			if ux&1 != 0 {
				x = ^x
			}
			return x, k + 1, nil
		}
		ux |= uint64(c&0x7f) << (7 * k)
	}
	return 0, 0, errBadVarint
}

func (s *byteSource) skip(n int64) error {
	if n > s.left {
		return errBomb
	}
	d, err := s.r.Discard(int(n))
	s.left -= int64(d)
	if err == nil && int64(d) < n {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// stream checks the records of a decompressed stream.
func (w *walker) stream(r *bufio.Reader) error {
	s := &byteSource{r: r, left: MaxDecompressedSize}
	for i := int32(0); i < w.n; i++ {
		if err := w.streamRecord(s, i); err != nil {
			return w.streamErr(i, err)
		}
	}
	if _, err := s.readByte(); err != io.EOF {
		if err == nil {
			return invalid(w.n-1, "incorrect declared batch size, records still remaining after the last record")
		}
		return w.streamErr(w.n-1, err)
	}
	return nil
}

// streamErr classifies an error met reading record i from the stream.
func (w *walker) streamErr(i int32, err error) error {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return err
	case errors.Is(err, errBomb):
		return invalid(i, "records decompress to more than %d bytes", MaxDecompressedSize)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return invalid(i, "incorrect declared batch size, premature EOF reached")
	case errors.Is(err, errBadVarint):
		return invalid(i, "%v", err)
	}
	var se streamError
	if errors.As(err, &se) {
		return se
	}
	return streamError{err}
}

var errBadVarint = errors.New("varint longer than 64 bits")

// streamRecord reads record i from s.
func (w *walker) streamRecord(s *byteSource, i int32) error {
	length, _, err := s.varint()
	if err != nil {
		return err
	}
	if length < minRecordSize-1 || length > s.left {
		if length > s.left && length <= MaxDecompressedSize {
			return errBomb
		}
		return invalid(i, "record length %d", length)
	}
	used := int64(0)
	field := func() (int64, error) {
		v, k, err := s.varint()
		used += int64(k)
		return v, err
	}
	if _, err := s.readByte(); err != nil { // attributes
		return err
	}
	used++
	tsDelta, err := field()
	if err != nil {
		return err
	}
	offDelta, err := field()
	if err != nil {
		return err
	}
	if offDelta < math.MinInt32 || offDelta > math.MaxInt32 {
		return invalid(i, "bad offset delta")
	}
	skip := func(what string, nullable bool) (int64, error) {
		n, err := field()
		if err != nil {
			return 0, err
		}
		if n < -1 || (n == -1 && !nullable) || n > length-used {
			return 0, invalid(i, "%s length %d with %d bytes left in the record", what, n, length-used)
		}
		if n > 0 {
			if err := s.skip(n); err != nil {
				return 0, err
			}
			used += n
		}
		return n, nil
	}
	keyLen, err := skip("key", true)
	if err != nil {
		return err
	}
	if _, err := skip("value", true); err != nil {
		return err
	}
	count, err := field()
	if err != nil {
		return err
	}
	if count < 0 || count > length-used {
		return invalid(i, "found invalid number of record headers %d", count)
	}
	for h := int64(0); h < count; h++ {
		if _, err := skip("header key", false); err != nil {
			return err
		}
		if _, err := skip("header value", true); err != nil {
			return err
		}
	}
	if used != length {
		return invalid(i, "invalid record size: expected to read %d bytes in record payload, but instead read %d", length, used)
	}
	return w.record(i, int32(offDelta), tsDelta, keyLen < 0)
}

// Streaming decompressors for CheckRecords, pooled: none of them starts a
// goroutine (zstd decoders with concurrency 1 decode synchronously).
var (
	checkBufs       = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}
	checkGzip       sync.Pool // *gzip.Reader
	checkLZ4        = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	checkZstd       sync.Pool // *zstd.Decoder
	checkSnappyBufs = sync.Pool{New: func() any { return new([]byte) }}
)

// openStream returns a buffered reader of the decompressed records and a
// function returning the pooled state.
func openStream(c Compression, data []byte) (*bufio.Reader, func(), error) {
	var r io.Reader
	var release func()
	switch c {
	case Gzip:
		in := bytes.NewReader(data)
		var g *gzip.Reader
		if v := checkGzip.Get(); v != nil {
			g = v.(*gzip.Reader)
			if err := g.Reset(in); err != nil {
				checkGzip.Put(g)
				return nil, nil, err
			}
		} else {
			var err error
			if g, err = gzip.NewReader(in); err != nil {
				return nil, nil, err
			}
		}
		r, release = g, func() { checkGzip.Put(g) }
	case Snappy:
		buf := checkSnappyBufs.Get().(*[]byte)
		r, release = &snappyStream{data: data, buf: buf}, func() { checkSnappyBufs.Put(buf) }
	case LZ4:
		l := checkLZ4.Get().(*lz4.Reader)
		l.Reset(bytes.NewReader(data))
		r, release = l, func() { l.Reset(nil); checkLZ4.Put(l) }
	case Zstd:
		var d *zstd.Decoder
		if v := checkZstd.Get(); v != nil {
			d = v.(*zstd.Decoder)
			if err := d.Reset(bytes.NewReader(data)); err != nil {
				checkZstd.Put(d)
				return nil, nil, err
			}
		} else {
			var err error
			d, err = zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxWindow(MaxZstdWindow), zstd.WithDecoderMaxMemory(MaxDecompressedSize))
			if err != nil {
				return nil, nil, err
			}
		}
		r, release = d, func() { _ = d.Reset(nil); checkZstd.Put(d) }
	}
	br := checkBufs.Get().(*bufio.Reader)
	br.Reset(errReader{r})
	return br, func() { br.Reset(nil); checkBufs.Put(br); release() }, nil
}

// errReader marks the decompressor's errors, so that they are told apart
// from the walker's own.
type errReader struct{ r io.Reader }

func (e errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		err = streamError{err}
	}
	return n, err
}

// snappyStream decodes raw snappy (one block) or xerial-framed snappy
// block by block into a reused buffer. A block's declared length is
// checked against what its compressed size can produce (snappy expands at
// most 64 bytes per 3-byte copy) before anything is allocated.
type snappyStream struct {
	data   []byte // compressed input not yet decoded
	buf    *[]byte
	out    []byte // decoded, not yet read
	xerial bool
	begun  bool
}

func (s *snappyStream) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if err := s.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// next decodes the next block into s.out.
func (s *snappyStream) next() error {
	if !s.begun {
		s.begun = true
		if bytes.HasPrefix(s.data, xerialMagic) {
			if len(s.data) < xerialHeaderSize {
				return errors.New("xerial header truncated")
			}
			s.xerial = true
			s.data = s.data[xerialHeaderSize:]
		} else {
			block := s.data
			s.data = nil
			return s.decode(block)
		}
	}
	if !s.xerial || len(s.data) == 0 {
		return io.EOF
	}
	if len(s.data) < 4 {
		return errors.New("xerial block length truncated")
	}
	n := int(be.Uint32(s.data))
	if n > len(s.data)-4 {
		return fmt.Errorf("xerial block of %d bytes, only %d left", n, len(s.data)-4)
	}
	block := s.data[4 : 4+n]
	s.data = s.data[4+n:]
	return s.decode(block)
}

func (s *snappyStream) decode(block []byte) error {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return err
	}
	if n > 32*len(block)+32 || n > MaxDecompressedSize {
		return fmt.Errorf("snappy block of %d bytes declares %d decoded bytes", len(block), n)
	}
	if cap(*s.buf) < n {
		*s.buf = make([]byte, n)
	}
	out, err := snappy.Decode((*s.buf)[:n], block)
	if err != nil {
		return err
	}
	s.out = out
	return nil
}
