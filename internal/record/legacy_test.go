package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// legacyMsg is a legacy message to encode in tests.
type legacyMsg struct {
	offset     int64
	magic      int8
	attributes int8
	timestamp  int64
	key, value []byte
}

// appendLegacy encodes m (with a correct CRC) onto dst.
func appendLegacy(dst []byte, m legacyMsg) []byte {
	var body []byte
	body = append(body, 0, 0, 0, 0, byte(m.magic), byte(m.attributes))
	if m.magic == 1 {
		body = binary.BigEndian.AppendUint64(body, uint64(m.timestamp))
	}
	for _, b := range [][]byte{m.key, m.value} {
		if b == nil {
			body = binary.BigEndian.AppendUint32(body, 0xFFFFFFFF)
			continue
		}
		body = binary.BigEndian.AppendUint32(body, uint32(len(b)))
		body = append(body, b...)
	}
	binary.BigEndian.PutUint32(body, crc32.ChecksumIEEE(body[4:]))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}

// legacySet encodes msgs as a message set.
func legacySet(msgs []legacyMsg) []byte {
	var out []byte
	for _, m := range msgs {
		out = appendLegacy(out, m)
	}
	return out
}

// legacyInner returns five messages covering null and empty keys/values,
// with inner offsets as the given magic's producer writes them (absolute
// for magic 0, relative for magic 1).
func legacyInner(magic int8) []legacyMsg {
	msgs := []legacyMsg{
		{key: []byte("k0"), value: []byte("v0")},
		{key: nil, value: []byte("no key")},
		{key: []byte{}, value: nil},
		{key: []byte("k3"), value: []byte{}},
		{key: bytes.Repeat([]byte("K"), 300), value: bytes.Repeat([]byte("value "), 20000)},
	}
	for i := range msgs {
		msgs[i].offset = int64(i)
		msgs[i].magic = magic
		if magic == 1 {
			msgs[i].timestamp = 1_700_000_000_000 + int64(i*7%5) // not monotonic
		}
	}
	return msgs
}

// compressLegacy compresses raw as a client writing magic would, including
// Kafka's broken LZ4 header checksum for magic 0, and raw (unframed)
// snappy when rawSnappy is set.
func compressLegacy(t testing.TB, magic int8, c Compression, raw []byte, rawSnappy bool) []byte {
	t.Helper()
	if c == Snappy && rawSnappy {
		return snappyEncodeRaw(raw)
	}
	out, err := Compress(c, raw)
	if err != nil {
		t.Fatal(err)
	}
	if c == LZ4 && magic == 0 {
		out = append([]byte(nil), out...)
		breakLZ4HeaderChecksum(t, out)
	}
	return out
}

// breakLZ4HeaderChecksum rewrites a frame's descriptor checksum the way
// Kafka's magic 0 writer computed it: over the frame magic too (KAFKA-3160).
func breakLZ4HeaderChecksum(t testing.TB, frame []byte) {
	t.Helper()
	if frame[4]&(lz4FlagContentSize|lz4FlagDictID) != 0 {
		t.Fatal("test frames carry no content size or dict id")
	}
	broken := byte(xxh32Short(frame[:6]) >> 8)
	if broken == frame[6] {
		t.Fatal("broken checksum equals the right one; pick other data")
	}
	frame[6] = broken
}

// resetCRC recomputes the CRC of the first message of set.
func resetCRC(set []byte) {
	end := 12 + int(binary.BigEndian.Uint32(set[8:]))
	binary.BigEndian.PutUint32(set[12:], crc32.ChecksumIEEE(set[16:end]))
}

// wrap returns a compressed wrapper message holding inner.
func wrap(t testing.TB, magic int8, c Compression, inner []legacyMsg, rawSnappy bool) legacyMsg {
	t.Helper()
	w := legacyMsg{
		offset:     int64(len(inner) - 1),
		magic:      magic,
		attributes: int8(c),
		value:      compressLegacy(t, magic, c, legacySet(inner), rawSnappy),
	}
	if magic == 1 {
		for _, m := range inner {
			w.timestamp = max(w.timestamp, m.timestamp)
		}
	}
	return w
}

// convertCheck converts set and checks the batch against want.
func convertCheck(t *testing.T, set []byte, codec Compression, want []legacyMsg, wantTS []int64) {
	t.Helper()
	out, err := ConvertLegacy(set)
	if err != nil {
		t.Fatalf("ConvertLegacy: %v", err)
	}
	if err := Validate(out); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	b := Batch(out)
	h := b.Header()
	if h.BaseOffset != 0 || h.PartitionLeaderEpoch != -1 || h.ProducerID != -1 || h.ProducerEpoch != -1 ||
		h.BaseSequence != -1 || h.Attributes != int16(codec) || h.NumRecords != int32(len(want)) ||
		h.LastOffsetDelta != int32(len(want)-1) {
		t.Fatalf("header %+v (codec %v, %d records wanted)", h, codec, len(want))
	}
	recs, err := b.Records()
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	maxTS := wantTS[0]
	for i, r := range recs {
		maxTS = max(maxTS, wantTS[i])
		if r.OffsetDelta != int32(i) || h.BaseTimestamp+r.TimestampDelta != wantTS[i] || len(r.Headers) != 0 {
			t.Fatalf("record %d: offset delta %d timestamp %d headers %d, want timestamp %d",
				i, r.OffsetDelta, h.BaseTimestamp+r.TimestampDelta, len(r.Headers), wantTS[i])
		}
		if (r.Key == nil) != (want[i].key == nil) || !bytes.Equal(r.Key, want[i].key) ||
			(r.Value == nil) != (want[i].value == nil) || !bytes.Equal(r.Value, want[i].value) {
			t.Fatalf("record %d: key %q value %.20q, want %q %.20q", i, r.Key, r.Value, want[i].key, want[i].value)
		}
	}
	if h.MaxTimestamp != maxTS {
		t.Fatalf("max timestamp %d, want %d", h.MaxTimestamp, maxTS)
	}
}

func timestampsOf(msgs []legacyMsg) []int64 {
	ts := make([]int64, len(msgs))
	for i, m := range msgs {
		ts[i] = m.timestamp
		if m.magic == 0 {
			ts[i] = -1
		}
	}
	return ts
}

func TestConvertLegacyUncompressed(t *testing.T) {
	for _, magic := range []int8{0, 1} {
		t.Run(fmt.Sprintf("magic%d", magic), func(t *testing.T) {
			msgs := legacyInner(magic)
			set := legacySet(msgs)
			if !IsLegacy(set) {
				t.Fatal("IsLegacy = false")
			}
			convertCheck(t, set, None, msgs, timestampsOf(msgs))
		})
	}
}

func TestConvertLegacyCompressed(t *testing.T) {
	for _, magic := range []int8{0, 1} {
		for _, c := range []Compression{Gzip, Snappy, LZ4} {
			for _, rawSnappy := range []bool{false, true} {
				if rawSnappy && c != Snappy {
					continue
				}
				name := fmt.Sprintf("magic%d/%v", magic, c)
				if rawSnappy {
					name += "-raw"
				}
				t.Run(name, func(t *testing.T) {
					inner := legacyInner(magic)
					set := legacySet([]legacyMsg{wrap(t, magic, c, inner, rawSnappy)})
					convertCheck(t, set, c, inner, timestampsOf(inner))
				})
			}
		}
	}
}

// TestConvertLegacyMixed covers a set of plain messages and two wrappers
// (the batch takes the last wrapper's codec, as Kafka's validator does).
func TestConvertLegacyMixed(t *testing.T) {
	a, b := legacyInner(1), legacyInner(1)[:2]
	plain := legacyMsg{magic: 0, key: []byte("plain"), value: []byte("v")}
	set := legacySet([]legacyMsg{wrap(t, 1, Gzip, a, false), plain, wrap(t, 1, LZ4, b, false)})
	want := append(append(append([]legacyMsg(nil), a...), plain), b...)
	convertCheck(t, set, LZ4, want, timestampsOf(want))
}

// TestConvertLegacyLogAppendTime: a magic 1 wrapper with the LogAppendTime
// bit gives its timestamp to every inner message.
func TestConvertLegacyLogAppendTime(t *testing.T) {
	inner := legacyInner(1)
	w := wrap(t, 1, Gzip, inner, false)
	w.attributes |= legacyAttrLogAppend
	w.timestamp = 1_800_000_000_000
	ts := make([]int64, len(inner))
	for i := range ts {
		ts[i] = w.timestamp
	}
	convertCheck(t, legacySet([]legacyMsg{w}), Gzip, inner, ts)
}

// TestConvertLegacyLZ4HeaderChecksum: the KAFKA-3160 checksum is accepted
// for magic 0 only; a correct one is accepted for both.
func TestConvertLegacyLZ4HeaderChecksum(t *testing.T) {
	inner := legacyInner(1)
	w := wrap(t, 1, LZ4, inner, false)
	breakLZ4HeaderChecksum(t, w.value)
	if _, err := ConvertLegacy(legacySet([]legacyMsg{w})); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("magic 1 with a broken LZ4 header checksum: err %v, want CORRUPT_MESSAGE", err)
	}
	inner0 := legacyInner(0)
	w0 := legacyMsg{magic: 0, attributes: int8(LZ4), value: compressLegacy(t, 1, LZ4, legacySet(inner0), false)}
	convertCheck(t, legacySet([]legacyMsg{w0}), LZ4, inner0, timestampsOf(inner0))
}

// TestXXH32Short checks the descriptor checksum against the LZ4 encoder's.
func TestXXH32Short(t *testing.T) {
	for _, raw := range [][]byte{nil, []byte("a"), bytes.Repeat([]byte("xyz"), 100000)} {
		frame, err := Compress(LZ4, raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := byte(xxh32Short(frame[4:6]) >> 8); got != frame[6] {
			t.Fatalf("descriptor checksum %02x, encoder wrote %02x", got, frame[6])
		}
	}
	// Published xxHash32 vectors (seed 0).
	for in, want := range map[string]uint32{"": 0x02CC5D05, "a": 0x550D7456, "abc": 0x32D153FF} {
		if got := xxh32Short([]byte(in)); got != want {
			t.Fatalf("xxh32(%q) = %08x, want %08x", in, got, want)
		}
	}
}

func TestConvertLegacyErrors(t *testing.T) {
	good := legacySet(legacyInner(1)[:2])
	gz := legacySet([]legacyMsg{wrap(t, 1, Gzip, legacyInner(1)[:2], false)})
	flip := func(b []byte, i int) []byte {
		b = append([]byte(nil), b...)
		b[i] ^= 0x40
		return b
	}
	innerBadCRC := func() []byte {
		raw := flip(legacySet(legacyInner(0)[:2]), 25)
		return legacySet([]legacyMsg{{magic: 0, attributes: int8(Gzip), value: compressLegacy(t, 0, Gzip, raw, false)}})
	}()
	nested := legacySet([]legacyMsg{wrap(t, 1, Gzip, []legacyMsg{wrap(t, 1, Gzip, legacyInner(1)[:1], false)}, false)})
	mixedMagic := legacySet([]legacyMsg{wrap(t, 1, Gzip, legacyInner(0)[:1], false)})
	emptyWrapper := legacySet([]legacyMsg{{magic: 1, attributes: int8(Gzip), value: compressLegacy(t, 1, Gzip, nil, false)}})
	nullWrapper := legacySet([]legacyMsg{{magic: 1, attributes: int8(Gzip)}})
	zstdWrapper := legacySet([]legacyMsg{wrap(t, 1, Zstd, legacyInner(1)[:1], false)})
	codec5 := legacySet([]legacyMsg{{magic: 1, attributes: 5, value: []byte("x")}})
	badGzip := legacySet([]legacyMsg{{magic: 1, attributes: int8(Gzip), value: []byte("not gzip at all")}})
	magic2 := append(append([]byte(nil), good...), mustBuild(t, sampleHeader(None), sampleRecords()[:1])...)
	one := legacySet(legacyInner(1)[:1]) // "k0" -> "v0", 38 bytes
	hugeSize := append([]byte(nil), one...)
	binary.BigEndian.PutUint32(hugeSize[8:], 0x7FFFFFFF)
	smallSize := append([]byte(nil), one[:12+10]...)
	binary.BigEndian.PutUint32(smallSize[8:], 10)
	hugeKey := append([]byte(nil), one...)
	binary.BigEndian.PutUint32(hugeKey[12+14:], 0x7FFFFFF0) // magic 1 key length
	resetCRC(hugeKey)
	negKey := append([]byte(nil), one...)
	binary.BigEndian.PutUint32(negKey[12+14:], 0xFFFFFFFE)
	resetCRC(negKey)
	trailing := append(append([]byte(nil), one...), 0)
	binary.BigEndian.PutUint32(trailing[8:], binary.BigEndian.Uint32(trailing[8:])+1)
	resetCRC(trailing)
	shortV1 := appendLegacy(nil, legacyMsg{magic: 0})
	shortV1[16] = 1
	resetCRC(shortV1)
	magic3 := append([]byte(nil), one...)
	magic3[16] = 3
	resetCRC(magic3)

	cases := []struct {
		name string
		set  []byte
		want *kerr.Error
	}{
		{"empty", nil, kerr.InvalidRecord},
		{"bad CRC", flip(good, 17), kerr.CorruptMessage},
		{"bad CRC in value", flip(good, 36), kerr.CorruptMessage},
		{"bad CRC of inner message", innerBadCRC, kerr.CorruptMessage},
		{"bad CRC of wrapper", flip(gz, len(gz)-3), kerr.CorruptMessage},
		{"truncated overhead", good[:7], kerr.CorruptMessage},
		{"truncated message", good[:len(good)-1], kerr.CorruptMessage},
		{"truncated wrapper", gz[:len(gz)-5], kerr.CorruptMessage},
		{"size below minimum", smallSize, kerr.CorruptMessage},
		{"magic 1 size below minimum", shortV1, kerr.CorruptMessage},
		{"magic 3", magic3, kerr.CorruptMessage},
		{"negative key length", negKey, kerr.CorruptMessage},
		{"huge size", hugeSize, kerr.CorruptMessage},
		{"huge key length", hugeKey, kerr.CorruptMessage},
		{"bytes after value", trailing, kerr.CorruptMessage},
		{"magic 2 after legacy", magic2, kerr.CorruptMessage},
		{"nested compression", nested, kerr.InvalidRecord},
		{"inner magic differs", mixedMagic, kerr.InvalidRecord},
		{"empty wrapper", emptyWrapper, kerr.InvalidRecord},
		{"null wrapper value", nullWrapper, kerr.CorruptMessage},
		{"zstd", zstdWrapper, kerr.UnsupportedCompressionType},
		{"codec 5", codec5, kerr.CorruptMessage},
		{"bad gzip", badGzip, kerr.CorruptMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ConvertLegacy(tc.set)
			t.Log(err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v (out %d bytes), want %v", err, len(out), tc.want)
			}
		})
	}
}

// TestConvertLegacyInflateCap: many wrappers that each stay under the
// per-codec cap are refused once their total passes MaxDecompressedSize.
func TestConvertLegacyInflateCap(t *testing.T) {
	zeros := make([]byte, MaxDecompressedSize/4+1)
	w := legacyMsg{magic: 1, attributes: int8(Gzip), value: compressLegacy(t, 1, Gzip,
		legacySet([]legacyMsg{{magic: 1, value: zeros}}), false)}
	set := legacySet([]legacyMsg{w, w, w, w})
	if _, err := ConvertLegacy(set); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("err %v, want CORRUPT_MESSAGE", err)
	}
	if _, err := ConvertLegacy(set[:len(set)/4*3]); err != nil {
		t.Fatalf("three wrappers: %v", err)
	}
}

func TestIsLegacy(t *testing.T) {
	v2 := mustBuild(t, sampleHeader(None), sampleRecords()[:1])
	for _, tc := range []struct {
		b    []byte
		want bool
	}{
		{nil, false},
		{make([]byte, 16), false},
		{make([]byte, 17), true},
		{legacySet(legacyInner(1)[:1]), true},
		{v2, false},
		{append(make([]byte, 16), 0xFF), false},
	} {
		if got := IsLegacy(tc.b); got != tc.want {
			t.Fatalf("IsLegacy(%x) = %v", tc.b, got)
		}
	}
}

func FuzzConvertLegacy(f *testing.F) {
	f.Add([]byte{})
	for _, magic := range []int8{0, 1} {
		inner := legacyInner(magic)[:4]
		f.Add(legacySet(inner))
		for _, c := range []Compression{Gzip, Snappy, LZ4} {
			f.Add(legacySet([]legacyMsg{wrap(f, magic, c, inner, false)}))
		}
		f.Add(legacySet([]legacyMsg{wrap(f, magic, Snappy, inner, true)}))
	}
	f.Fuzz(func(t *testing.T, set []byte) {
		out, err := ConvertLegacy(set)
		if err != nil {
			if !errors.Is(err, kerr.CorruptMessage) && !errors.Is(err, kerr.InvalidRecord) &&
				!errors.Is(err, kerr.UnsupportedCompressionType) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if err := Validate(out); err != nil {
			t.Fatalf("converted batch invalid: %v", err)
		}
		recs, err := Batch(out).Records()
		if err != nil || len(recs) != int(Batch(out).NumRecords()) {
			t.Fatalf("converted batch records: %d, %v", len(recs), err)
		}
	})
}

func BenchmarkConvertLegacy(b *testing.B) {
	var inner []legacyMsg
	for i := range 100 {
		inner = append(inner, legacyMsg{offset: int64(i), magic: 1, timestamp: 1_700_000_000_000 + int64(i),
			key: fmt.Appendf(nil, "key-%d", i), value: bytes.Repeat([]byte{byte(i)}, 200)})
	}
	for _, c := range []Compression{None, Gzip, Snappy, LZ4} {
		set := legacySet(inner)
		if c != None {
			set = legacySet([]legacyMsg{wrap(b, 1, c, inner, false)})
		}
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(set)))
			for b.Loop() {
				if _, err := ConvertLegacy(set); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
