package record

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"reflect"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var allCodecs = []Compression{None, Gzip, Snappy, LZ4, Zstd}

// sampleRecords covers null vs empty keys/values, headers with null values
// and negative timestamp deltas.
func sampleRecords() []Record {
	return []Record{
		{TimestampDelta: 0, OffsetDelta: 0, Key: []byte("k0"), Value: []byte("v0")},
		{TimestampDelta: 5, OffsetDelta: 1, Key: nil, Value: []byte("no key")},
		{TimestampDelta: -7, OffsetDelta: 2, Key: []byte{}, Value: nil},
		{TimestampDelta: 1 << 40, OffsetDelta: 3, Key: []byte("k3"), Value: []byte{},
			Headers: []Header{{Key: "h1", Value: []byte("x")}, {Key: "", Value: nil}, {Key: "h3", Value: []byte{}}}},
		{TimestampDelta: 9, OffsetDelta: 4, Key: bytes.Repeat([]byte("K"), 300), Value: bytes.Repeat([]byte("value "), 5000)},
	}
}

func sampleHeader(c Compression) BatchHeader {
	return BatchHeader{
		BaseOffset:           1234,
		PartitionLeaderEpoch: 7,
		Attributes:           int16(c),
		LastOffsetDelta:      4,
		BaseTimestamp:        1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_009,
		ProducerID:           42,
		ProducerEpoch:        3,
		BaseSequence:         100,
	}
}

func mustBuild(t testing.TB, h BatchHeader, recs []Record) Batch {
	t.Helper()
	b, err := Build(h, recs)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return Batch(b)
}

func TestBuildRoundTripAllCodecs(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			h := sampleHeader(c)
			want := sampleRecords()
			b := mustBuild(t, h, want)
			if err := Validate(b); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := b.Header()
			h.BatchLength, h.Magic, h.NumRecords, h.CRC = int32(len(b)-LogOverhead), MagicV2, 5, b.ComputeCRC()
			if got != h {
				t.Fatalf("header = %+v, want %+v", got, h)
			}
			if b.Compression() != c || b.Size() != len(b) || b.LastOffset() != 1238 {
				t.Fatalf("accessors: codec %v size %d last %d", b.Compression(), b.Size(), b.LastOffset())
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			assertRecordsEqual(t, recs, want)
			var n int
			err = b.ForEachRecord(func(r *Record) error {
				assertRecordsEqual(t, []Record{*r}, want[n:n+1])
				n++
				return nil
			})
			if err != nil || n != len(want) {
				t.Fatalf("ForEachRecord: n=%d err=%v", n, err)
			}
		})
	}
}

// assertRecordsEqual compares records including the nil vs empty distinction.
func assertRecordsEqual(t fataler, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Attributes != w.Attributes || g.TimestampDelta != w.TimestampDelta || g.OffsetDelta != w.OffsetDelta {
			t.Fatalf("record %d: %+v, want %+v", i, g, w)
		}
		sameBytes(t, "key", g.Key, w.Key)
		sameBytes(t, "value", g.Value, w.Value)
		if len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range g.Headers {
			if g.Headers[j].Key != w.Headers[j].Key {
				t.Fatalf("record %d header %d key %q, want %q", i, j, g.Headers[j].Key, w.Headers[j].Key)
			}
			sameBytes(t, "header value", g.Headers[j].Value, w.Headers[j].Value)
		}
	}
}

func sameBytes(t fataler, what string, got, want []byte) {
	t.Helper()
	if (got == nil) != (want == nil) || !bytes.Equal(got, want) {
		t.Fatalf("%s = %q (nil %v), want %q (nil %v)", what, got, got == nil, want, want == nil)
	}
}

// TestBuildMatchesKmsg compares Build's uncompressed output byte for byte
// with a batch encoded by franz-go's kmsg (the encoder kgo uses).
func TestBuildMatchesKmsg(t *testing.T) {
	recs := sampleRecords()
	var section []byte
	for _, r := range recs {
		kr := kmsg.Record{Attributes: r.Attributes, TimestampDelta64: r.TimestampDelta, OffsetDelta: r.OffsetDelta, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // with Length 0 the length varint is one byte
		section = kr.AppendTo(section)
	}
	h := sampleHeader(None)
	kb := kmsg.RecordBatch{
		FirstOffset: h.BaseOffset, PartitionLeaderEpoch: h.PartitionLeaderEpoch, Magic: 2,
		Attributes: h.Attributes, LastOffsetDelta: h.LastOffsetDelta, FirstTimestamp: h.BaseTimestamp,
		MaxTimestamp: h.MaxTimestamp, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
		FirstSequence: h.BaseSequence, NumRecords: int32(len(recs)), Records: section,
	}
	kb.Length = int32(HeaderSize - LogOverhead + len(section))
	want := kb.AppendTo(nil)
	be.PutUint32(want[17:], crc32.Checksum(want[21:], crc32.MakeTable(crc32.Castagnoli)))

	got := mustBuild(t, h, recs)
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("Build differs from kmsg encoding at byte %d (len %d vs %d)", i, len(got), len(want))
	}
	var back kmsg.RecordBatch
	if err := back.ReadFrom(got); err != nil {
		t.Fatalf("kmsg cannot read our batch: %v", err)
	}
}

func TestEmptyAndControlBatches(t *testing.T) {
	// An empty batch as the cleaner writes it: count 0, baseTimestamp -1,
	// lastOffsetDelta preserved.
	h := BatchHeader{BaseOffset: 50, LastOffsetDelta: 9, BaseTimestamp: -1, MaxTimestamp: 77, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b := mustBuild(t, h, nil)
	if len(b) != HeaderSize || b.NumRecords() != 0 || b.LastOffset() != 59 {
		t.Fatalf("empty batch: len %d count %d last %d", len(b), b.NumRecords(), b.LastOffset())
	}
	if err := Validate(b); err != nil {
		t.Fatalf("Validate empty: %v", err)
	}
	if recs, err := b.Records(); err != nil || len(recs) != 0 {
		t.Fatalf("Records empty: %v %v", recs, err)
	}
	// A COMMIT marker.
	ch := BatchHeader{Attributes: AttrControl | AttrTransactional, ProducerID: 5, ProducerEpoch: 1, BaseSequence: -1}
	key := []byte{0, 0, 0, 1}
	val := []byte{0, 0, 0, 0, 0, 3}
	cb := mustBuild(t, ch, []Record{{Key: key, Value: val}})
	if !cb.IsControl() || !cb.IsTransactional() || cb.IsLogAppendTime() || cb.HasDeleteHorizon() {
		t.Fatalf("control flags wrong: attrs %x", cb.Attributes())
	}
	// Delete horizon batch with negative deltas.
	dh := BatchHeader{Attributes: AttrHasDeleteHorizon, BaseTimestamp: 2_000, LastOffsetDelta: 1}
	db := mustBuild(t, dh, []Record{{TimestampDelta: -500, Key: []byte("a")}, {TimestampDelta: -1000, OffsetDelta: 1, Key: []byte("b")}})
	recs, err := db.Records()
	if err != nil || !db.HasDeleteHorizon() || recs[1].TimestampDelta != -1000 {
		t.Fatalf("delete horizon batch: %v %+v", err, recs)
	}
}

func TestSetters(t *testing.T) {
	b := mustBuild(t, sampleHeader(None), sampleRecords())
	crc := b.CRC()
	b.SetBaseOffset(99)
	b.SetPartitionLeaderEpoch(12)
	if b.BaseOffset() != 99 || b.PartitionLeaderEpoch() != 12 || b.CRC() != crc || Validate(b) != nil {
		t.Fatalf("in-place offset/epoch rewrite broke the batch")
	}
	b.SetLogAppendTime(555)
	if !b.IsLogAppendTime() || b.MaxTimestamp() != 555 || Validate(b) != nil || b.CRC() == crc {
		t.Fatalf("SetLogAppendTime: lat %v max %d err %v", b.IsLogAppendTime(), b.MaxTimestamp(), Validate(b))
	}
}

func TestValidateErrors(t *testing.T) {
	good := mustBuild(t, sampleHeader(None), sampleRecords())
	mut := func(f func(b []byte) []byte) []byte {
		c := append([]byte(nil), good...)
		return f(c)
	}
	fixCRC := func(b []byte) []byte { Batch(b).SetCRC(); return b }
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", good[:HeaderSize-1], kerr.CorruptMessage},
		{"length mismatch", good[:len(good)-1], kerr.CorruptMessage},
		{"bad magic", mut(func(b []byte) []byte { b[16] = 1; return b }), kerr.CorruptMessage},
		{"bad crc", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), kerr.CorruptMessage},
		{"count mismatch", mut(func(b []byte) []byte { be.PutUint32(b[57:], 3); return fixCRC(b) }), kerr.InvalidRecord},
		{"negative count", mut(func(b []byte) []byte { be.PutUint32(b[57:], 0xffffffff); return fixCRC(b) }), kerr.CorruptMessage},
		{"codec 7", mut(func(b []byte) []byte { b[22] |= 7; return fixCRC(b) }), kerr.CorruptMessage},
		{"ok", good, nil},
	}
	for _, tc := range cases {
		err := Validate(tc.b)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: Validate = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Stored (compacted) batches may have fewer records than the offset span.
	compacted := mut(func(b []byte) []byte { be.PutUint32(b[23:], 10); return fixCRC(b) })
	if err := ValidateStored(compacted); err != nil {
		t.Errorf("ValidateStored compacted: %v", err)
	}
	if err := Validate(compacted); !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("Validate compacted: %v, want InvalidRecord", err)
	}
}

func TestNext(t *testing.T) {
	a := mustBuild(t, sampleHeader(None), sampleRecords())
	b := mustBuild(t, sampleHeader(Zstd), sampleRecords())
	buf := append(append([]byte(nil), a...), b...)
	first, rest, err := Next(buf)
	if err != nil || !bytes.Equal(first, a) {
		t.Fatalf("Next first: %v", err)
	}
	second, rest, err := Next(rest)
	if err != nil || !bytes.Equal(second, b) || len(rest) != 0 {
		t.Fatalf("Next second: %v", err)
	}
	if _, _, err := Next(rest); err != io.EOF {
		t.Fatalf("Next empty: %v, want io.EOF", err)
	}
	for _, n := range []int{1, 11, 12, 60, len(a) - 1} {
		if _, _, err := Next(a[:n]); !errors.Is(err, ErrTruncated) {
			t.Errorf("Next(%d bytes) = %v, want ErrTruncated", n, err)
		}
	}
	bad := append([]byte(nil), a...)
	be.PutUint32(bad[8:], 13)
	if _, _, err := Next(bad); !errors.Is(err, kerr.CorruptMessage) {
		t.Errorf("Next short batchLength = %v, want CorruptMessage", err)
	}
}

func TestRecordsRejectsMalformed(t *testing.T) {
	h := BatchHeader{LastOffsetDelta: 0}
	good := mustBuild(t, h, []Record{{Key: []byte("key"), Value: []byte("value")}})
	withSection := func(section []byte, count int32) Batch {
		b := append(append([]byte(nil), good[:HeaderSize]...), section...)
		be.PutUint32(b[8:], uint32(len(b)-LogOverhead))
		be.PutUint32(b[57:], uint32(count))
		Batch(b).SetCRC()
		return b
	}
	cases := map[string]Batch{
		"huge key length":    withSection([]byte{20, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0x0f, 0, 0}, 1),
		"huge record length": withSection([]byte{0xfe, 0xff, 0xff, 0xff, 0x07, 0}, 1),
		"too many records":   withSection(good[HeaderSize:], 1<<30),
		"trailing bytes":     withSection(append(append([]byte(nil), good[HeaderSize:]...), 0), 1),
		"huge header count":  withSection([]byte{12, 0, 0, 0, 1, 1, 0xfe, 0xff, 0xff, 0xff, 0x07, 0, 0}, 1),
		"null header key":    withSection([]byte{10, 0, 0, 0, 1, 1, 2, 1, 1, 0, 0}, 1),
		"bad varint":         withSection([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1),
		"length too small":   withSection([]byte{2, 0, 0, 0, 0, 0, 0}, 1),
		"bad zstd":           withCodec(withSection([]byte("not zstd at all"), 1), Zstd),
	}
	for name, b := range cases {
		if _, err := b.Records(); !errors.Is(err, kerr.CorruptMessage) {
			t.Errorf("%s: Records = %v, want CorruptMessage", name, err)
		}
	}
}

func withCodec(b Batch, c Compression) Batch {
	be.PutUint16(b[21:], uint16(b.Attributes()&^AttrCompressionMask|int16(c)))
	b.SetCRC()
	return b
}

func TestDecompressCapsOutput(t *testing.T) {
	bomb := make([]byte, MaxDecompressedSize+1)
	for _, c := range []Compression{Gzip, Snappy, LZ4, Zstd} {
		z, err := Compress(c, bomb)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if _, err := Decompress(c, z); !errors.Is(err, kerr.CorruptMessage) {
			t.Errorf("%v: Decompress of %d-byte bomb = %v, want CorruptMessage", c, len(z), err)
		}
	}
	z, err := zstdStream(bomb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decompress(Zstd, z); !errors.Is(err, kerr.CorruptMessage) {
		t.Errorf("zstd stream without content size: Decompress = %v, want CorruptMessage", err)
	}
	if ok, err := zstdStream([]byte("small")); err != nil {
		t.Fatal(err)
	} else if out, err := Decompress(Zstd, ok); err != nil || string(out) != "small" {
		t.Errorf("zstd stream: %q %v", out, err)
	}
}

func TestSnappyRawAndXerial(t *testing.T) {
	raw := bytes.Repeat([]byte("abcdefgh"), 20000) // > one xerial block
	framed, _ := Compress(Snappy, raw)
	if !bytes.HasPrefix(framed, xerialMagic) {
		t.Fatalf("snappy output not xerial framed")
	}
	for name, in := range map[string][]byte{"xerial": framed, "raw": snappyEncodeRaw(raw)} {
		out, err := Decompress(Snappy, in)
		if err != nil || !bytes.Equal(out, raw) {
			t.Fatalf("%s: err %v, equal %v", name, err, bytes.Equal(out, raw))
		}
	}
}

func TestRecordsDoNotAliasAcrossCalls(t *testing.T) {
	b := mustBuild(t, sampleHeader(Gzip), sampleRecords())
	r1, _ := b.Records()
	r2, _ := b.Records()
	r1[0].Key[0] = 'X'
	if r2[0].Key[0] == 'X' || !reflect.DeepEqual(r2[1].Value, []byte("no key")) {
		t.Fatalf("compressed records share buffers between calls")
	}
}

func TestControlRecords(t *testing.T) {
	b := mustBuild(t, BatchHeader{Attributes: AttrControl | AttrTransactional, ProducerID: 9, BaseSequence: -1},
		[]Record{EndTxnMarker(ControlAbort, 17)})
	recs, err := b.Records()
	if err != nil || len(recs) != 1 {
		t.Fatalf("Records: %v", err)
	}
	typ, err := ParseControlKey(recs[0].Key)
	if err != nil || typ != ControlAbort || typ.String() != "ABORT" {
		t.Fatalf("ParseControlKey: %v %v", typ, err)
	}
	epoch, err := ParseEndTxnMarker(recs[0].Value)
	if err != nil || epoch != 17 {
		t.Fatalf("ParseEndTxnMarker: %d %v", epoch, err)
	}
	if _, err := ParseControlKey([]byte{0, 1, 0, 0}); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("bad version accepted: %v", err)
	}
	if _, err := ParseEndTxnMarker(nil); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("short marker accepted: %v", err)
	}
	if ControlType(42).String() != "UNKNOWN(42)" || ControlKRaftVoters.String() != "KRAFT_VOTERS" {
		t.Fatal("ControlType names")
	}
}

// TestBuildNumbered: the records are numbered from 0 and the header's
// last offset delta and max timestamp follow them; the batch validates and
// reads back.
func TestBuildNumbered(t *testing.T) {
	recs := []Record{{Key: []byte("a"), OffsetDelta: 7}, {Key: []byte("b"), TimestampDelta: 30}, {Key: []byte("c"), TimestampDelta: 5}}
	b, err := BuildNumbered(BatchHeader{BaseTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(b); err != nil {
		t.Fatal(err)
	}
	h := Batch(b).Header()
	if h.LastOffsetDelta != 2 || h.MaxTimestamp != 1030 || h.NumRecords != 3 {
		t.Fatalf("header %+v", h)
	}
	got, err := Batch(b).Records()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r.OffsetDelta != int32(i) || !bytes.Equal(r.Key, recs[i].Key) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
}

// TestSnappyDeclaredLength: a raw snappy block declaring more decoded
// bytes than snappy can expand its size to is refused before the
// declared length is allocated (a 4-byte block declaring 36 MB cost the
// cleaner seconds; FuzzFilterControl), while the most compressible input
// (zeros: 3-byte copies of 64) still decodes, raw and xerial-framed.
func TestSnappyDeclaredLength(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Decompress(Snappy, []byte("\x8e\xb3\xb3\x11"))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("4-byte block declaring 36 MB: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("refusing it allocated %d bytes", n)
	}
	zeros := make([]byte, 4<<20)
	framed, _ := Compress(Snappy, zeros)
	for name, in := range map[string][]byte{"xerial": framed, "raw": snappyEncodeRaw(zeros)} {
		out, err := Decompress(Snappy, in)
		if err != nil || !bytes.Equal(out, zeros) {
			t.Fatalf("%s zeros (%d bytes compressed): %v", name, len(in), err)
		}
	}
}
