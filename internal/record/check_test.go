package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
)

// hostileBatch frames records (an uncompressed records section, compressed
// here with c) with any numRecords and lastOffsetDelta and a valid CRC, so
// that only the records can be wrong.
func hostileBatch(t testing.TB, c Compression, numRecords, lastOffsetDelta int32, records []byte) Batch {
	t.Helper()
	data := records
	if c != None {
		var err error
		if data, err = Compress(c, records); err != nil {
			t.Fatal(err)
		}
	}
	return frameBatch(c, numRecords, lastOffsetDelta, data)
}

// frameBatch puts a header in front of an already encoded records section.
func frameBatch(c Compression, numRecords, lastOffsetDelta int32, data []byte) Batch {
	out := make([]byte, HeaderSize, HeaderSize+len(data))
	h := BatchHeader{Attributes: int16(c), LastOffsetDelta: lastOffsetDelta, BaseTimestamp: 1000, MaxTimestamp: 1000,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1,
		BatchLength: int32(HeaderSize - LogOverhead + len(data)), Magic: MagicV2, NumRecords: numRecords}
	putHeader(out, &h)
	out = append(out, data...)
	Batch(out).SetCRC()
	return out
}

// rec encodes one record with the given offset delta and value.
func rec(offsetDelta int32, value string) []byte {
	return appendRecord(nil, &Record{OffsetDelta: offsetDelta, Key: []byte("k"), Value: []byte(value)})
}

// rawRec encodes a record whose length prefix is taken from body as given.
func rawRec(body []byte) []byte {
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// body builds a record body: attributes, timestamp delta, offset delta,
// then the rest as given.
func body(offsetDelta int64, rest ...[]byte) []byte {
	b := []byte{0}
	b = binary.AppendVarint(b, 0)
	b = binary.AppendVarint(b, offsetDelta)
	for _, r := range rest {
		b = append(b, r...)
	}
	return b
}

func vi(v int64) []byte { return binary.AppendVarint(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestCheckRecordsHostile: every batch whose records disagree with its
// header is refused with INVALID_RECORD, for every codec (Kafka's
// LogValidator reading DefaultRecordBatch's iterators).
func TestCheckRecordsHostile(t *testing.T) {
	three := cat(rec(0, "a"), rec(1, "b"), rec(2, "c"))
	cases := []struct {
		name    string
		n, last int32
		records []byte
	}{
		{"fewer records than numRecords", 5, 4, three},
		{"numRecords MaxInt32", math.MaxInt32, math.MaxInt32 - 1, three},
		{"records after the last one", 2, 1, three},
		{"trailing garbage", 3, 2, cat(three, []byte{1, 2, 3})},
		{"offset deltas out of order", 3, 2, cat(rec(0, "a"), rec(2, "b"), rec(1, "c"))},
		{"offset deltas not from 0", 3, 2, cat(rec(1, "a"), rec(2, "b"), rec(3, "c"))},
		{"repeated offset delta", 3, 2, cat(rec(0, "a"), rec(0, "b"), rec(1, "c"))},
		{"record length longer than its fields", 1, 0, rawRec(body(0, vi(-1), vi(1), []byte("x"), vi(0), []byte{0, 0}))},
		{"record length shorter than its fields", 1, 0, cat(vi(7), body(0, vi(-1), vi(3), []byte("xyz"), vi(0)))},
		{"record length beyond the section", 1, 0, cat(vi(1000), body(0, vi(-1), vi(1), []byte("x"), vi(0)))},
		{"negative record length", 1, 0, cat(vi(-5), body(0, vi(-1), vi(-1), vi(0)))},
		{"key length beyond the record", 1, 0, rawRec(body(0, vi(50), []byte("k"), vi(-1), vi(0)))},
		{"key length -2", 1, 0, rawRec(body(0, vi(-2), vi(-1), vi(0)))},
		{"value length beyond the record", 1, 0, rawRec(body(0, vi(-1), vi(90), []byte("v"), vi(0)))},
		{"negative header count", 1, 0, rawRec(body(0, vi(-1), vi(-1), vi(-1)))},
		{"header count beyond the record", 1, 0, rawRec(body(0, vi(-1), vi(-1), vi(40), vi(0), vi(0)))},
		{"null header key", 1, 0, rawRec(body(0, vi(-1), vi(-1), vi(1), vi(-1), vi(-1)))},
		{"header value beyond the record", 1, 0, rawRec(body(0, vi(-1), vi(-1), vi(1), vi(1), []byte("h"), vi(30)))},
		{"offset delta beyond int32", 1, 0, rawRec(body(1<<40, vi(-1), vi(-1), vi(0)))},
		{"unterminated varint", 1, 0, cat(vi(12), []byte{0}, bytes.Repeat([]byte{0xff}, 11))},
		{"empty records section", 2, 1, nil},
	}
	for _, c := range allCodecs {
		for _, tc := range cases {
			t.Run(c.String()+"/"+tc.name, func(t *testing.T) {
				b := hostileBatch(t, c, tc.n, tc.last, tc.records)
				if err := Validate(b); err != nil && !errors.Is(err, kerr.InvalidRecord) {
					t.Fatalf("Validate: %v", err)
				}
				_, err := CheckRecords(b, CheckOptions{})
				if !errors.Is(err, kerr.InvalidRecord) {
					t.Fatalf("CheckRecords = %v, want INVALID_RECORD", err)
				}
			})
		}
	}
}

// TestCheckRecordsValid: well-formed batches of every codec pass and
// report their null keys, maximum timestamp and out-of-bounds timestamps.
func TestCheckRecordsValid(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			h := sampleHeader(c)
			b := mustBuild(t, h, sampleRecords())
			info, err := CheckRecords(b, CheckOptions{CollectNullKeys: true, CheckTimestamps: true,
				NowMs: h.BaseTimestamp, BeforeMs: 0, AfterMs: 5})
			if err != nil {
				t.Fatal(err)
			}
			if len(info.NullKeys) != 1 || info.NullKeys[0] != 1 {
				t.Errorf("null keys %v, want [1]", info.NullKeys)
			}
			if want := h.BaseTimestamp + 1<<40; info.MaxTimestamp != want {
				t.Errorf("max timestamp %d, want %d", info.MaxTimestamp, want)
			}
			// Deltas 0, 5, -7, 1<<40, 9 against [now-0, now+5].
			if got := info.BadTimestamps; len(got) != 3 || got[0] != 2 || got[1] != 3 || got[2] != 4 {
				t.Errorf("bad timestamps %v, want [2 3 4]", got)
			}
			if info, err := CheckRecords(b, CheckOptions{}); err != nil || info.NullKeys != nil || info.BadTimestamps != nil {
				t.Errorf("without options: %+v %v", info, err)
			}
		})
	}
	empty, _ := Build(BatchHeader{BaseTimestamp: -1, LastOffsetDelta: 3}, nil)
	if _, err := CheckRecords(empty, CheckOptions{}); err != nil {
		t.Errorf("empty batch: %v", err)
	}
}

// TestCheckRecordsCorruptStream: a compressed section that does not
// decompress is CORRUPT_MESSAGE, as before.
func TestCheckRecordsCorruptStream(t *testing.T) {
	for _, c := range allCodecs[1:] {
		z, err := Compress(c, cat(rec(0, "a"), rec(1, "b")))
		if err != nil {
			t.Fatal(err)
		}
		z[len(z)/2] ^= 0xff
		z = z[:len(z)-1]
		_, err = CheckRecords(frameBatch(c, 2, 1, z), CheckOptions{})
		if !errors.Is(err, kerr.CorruptMessage) && !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("%s: %v, want CORRUPT_MESSAGE or INVALID_RECORD", c, err)
		}
	}
}

// bombRecords writes one record whose value is size zero bytes to w: its
// encoding is tiny once compressed, and huge once decompressed.
func bombRecords(w io.Writer, size int64) error {
	hdr := cat([]byte{0}, vi(0), vi(0), vi(-1), vi(size))
	if _, err := w.Write(cat(vi(int64(len(hdr))+size+1), hdr)); err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(zeros)) {
		if _, err := w.Write(zeros[:min(left, int64(len(zeros)))]); err != nil {
			return err
		}
	}
	_, err := w.Write(vi(0)) // no headers
	return err
}

// bomb compresses a record twice as large as MaxDecompressedSize with c,
// streaming, so the test itself stays small.
func bomb(t *testing.T, c Compression) []byte {
	t.Helper()
	var out bytes.Buffer
	var w io.WriteCloser
	size := int64(2 * MaxDecompressedSize)
	switch c {
	case Gzip:
		w, _ = gzip.NewWriterLevel(&out, gzip.BestSpeed)
	case LZ4:
		w = lz4.NewWriter(&out)
	case Zstd:
		var err error
		if w, err = zstd.NewWriter(&out, zstd.WithWindowSize(1<<20)); err != nil {
			t.Fatal(err)
		}
	case Snappy:
		w = &xerialWriter{out: &out}
	}
	if err := bombRecords(w, size); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// xerialWriter frames what it is given as xerial snappy, 32 KiB per block.
type xerialWriter struct {
	out     *bytes.Buffer
	pending []byte
	begun   bool
}

func (x *xerialWriter) Write(p []byte) (int, error) {
	if !x.begun {
		x.begun = true
		x.out.Write(xerialMagic)
		x.out.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
	}
	x.pending = append(x.pending, p...)
	for len(x.pending) >= xerialBlockSize {
		x.block(x.pending[:xerialBlockSize])
		x.pending = x.pending[xerialBlockSize:]
	}
	return len(p), nil
}

func (x *xerialWriter) block(raw []byte) {
	z := snappy.Encode(nil, raw)
	x.out.Write(be.AppendUint32(nil, uint32(len(z))))
	x.out.Write(z)
}

func (x *xerialWriter) Close() error {
	if len(x.pending) > 0 {
		x.block(x.pending)
	}
	return nil
}

// TestCheckRecordsZipBomb: a batch whose records inflate far beyond
// MaxDecompressedSize is refused with INVALID_RECORD, and checking it
// allocates a small fraction of what it decompresses to.
func TestCheckRecordsZipBomb(t *testing.T) {
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			b := frameBatch(c, 1, 0, bomb(t, c))
			if _, err := CheckRecords(b, CheckOptions{}); !errors.Is(err, kerr.InvalidRecord) {
				t.Fatalf("warm-up: %v, want INVALID_RECORD", err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := CheckRecords(b, CheckOptions{})
			runtime.ReadMemStats(&after)
			if !errors.Is(err, kerr.InvalidRecord) {
				t.Fatalf("compressed batch of %d bytes: %v, want INVALID_RECORD", len(b), err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > MaxDecompressedSize/8 {
				t.Errorf("checking a %d-byte bomb allocated %d bytes", len(b), alloc)
			}
		})
	}
	// A raw snappy block declaring far more than it can hold is refused
	// before its output is allocated.
	lie := append(binary.AppendUvarint(nil, MaxDecompressedSize), 0)
	if _, err := CheckRecords(frameBatch(Snappy, 1, 0, lie), CheckOptions{}); !errors.Is(err, kerr.CorruptMessage) {
		t.Errorf("snappy length lie: %v, want CORRUPT_MESSAGE", err)
	}
}

// TestCheckRecordsZstdWindow: a zstd frame asking for a window above
// MaxZstdWindow is CORRUPT_MESSAGE; one within it decodes. The frames are
// written by hand: one raw block after a header with a window descriptor
// (RFC 8878 §3.1.1.1.2: windowLog = 10 + exponent).
func TestCheckRecordsZstdWindow(t *testing.T) {
	raw := AppendRecords(nil, sampleRecords())
	for _, tc := range []struct {
		windowLog byte
		ok        bool
	}{{23, true}, {24, false}} {
		frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (tc.windowLog - 10) << 3}
		hdr := uint32(len(raw))<<3 | 1 // last block, raw
		frame = append(frame, byte(hdr), byte(hdr>>8), byte(hdr>>16))
		frame = append(frame, raw...)
		_, err := CheckRecords(frameBatch(Zstd, 5, 4, frame), CheckOptions{})
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, kerr.CorruptMessage)) {
			t.Errorf("window 2^%d: %v", tc.windowLog, err)
		}
	}
}

// FuzzCheckRecords: no panic, only the documented errors, and agreement
// with the full decoder on what a valid batch holds.
func FuzzCheckRecords(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < HeaderSize || Batch(b).Size() != len(b) {
			return
		}
		info, err := CheckRecords(b, CheckOptions{CollectNullKeys: true})
		if err != nil {
			if !errors.Is(err, kerr.CorruptMessage) && !errors.Is(err, kerr.InvalidRecord) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		recs, err := Batch(b).Records()
		if err != nil {
			t.Fatalf("CheckRecords accepted what Records refuses: %v", err)
		}
		nulls := 0
		for i, r := range recs {
			if r.OffsetDelta != int32(i) {
				t.Fatalf("record %d has offset delta %d", i, r.OffsetDelta)
			}
			if r.Key == nil {
				nulls++
			}
		}
		if nulls != len(info.NullKeys) {
			t.Fatalf("%d null keys, CheckRecords saw %d", nulls, len(info.NullKeys))
		}
	})
}
