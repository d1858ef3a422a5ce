package record

import (
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// fuzzSeeds returns valid batches of every codec plus some damaged ones.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, c := range allCodecs {
		h := sampleHeader(c)
		h.LastOffsetDelta = 3
		b, err := Build(h, sampleRecords()[:4])
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	empty, _ := Build(BatchHeader{BaseTimestamp: -1, LastOffsetDelta: 3}, nil)
	seeds = append(seeds, empty, seeds[0][:30], append(append([]byte(nil), seeds[0]...), seeds[1]...), []byte{})
	return seeds
}

// checkErr fails if err is neither nil nor one of the documented kinds.
func checkErr(t *testing.T, err error) {
	if err == nil || errors.Is(err, ErrTruncated) || errors.Is(err, io.EOF) ||
		errors.Is(err, kerr.CorruptMessage) || errors.Is(err, kerr.InvalidRecord) {
		return
	}
	t.Fatalf("unexpected error kind: %v", err)
}

func FuzzNext(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		for {
			b, rest, err := Next(buf)
			checkErr(t, err)
			if err != nil {
				return
			}
			if len(b)+len(rest) != len(buf) || b.Size() != len(b) || len(b) < HeaderSize {
				t.Fatalf("Next split %d into %d + %d", len(buf), len(b), len(rest))
			}
			buf = rest
		}
	})
}

func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Validate(b)
		checkErr(t, err)
		checkErr(t, ValidateStored(b))
		if err == nil {
			if Batch(b).ComputeCRC() != Batch(b).CRC() {
				t.Fatal("Validate accepted a bad CRC")
			}
		}
	})
}

func FuzzRecords(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Skip the CRC so the fuzzer explores the record decoder itself.
		if len(b) >= HeaderSize {
			Batch(b).SetCRC()
		}
		recs, err := Batch(b).Records()
		checkErr(t, err)
		n := 0
		err2 := Batch(b).ForEachRecord(func(*Record) error { n++; return nil })
		checkErr(t, err2)
		if (err == nil) != (err2 == nil) || err == nil && n != len(recs) {
			t.Fatalf("Records (%d, %v) and ForEachRecord (%d, %v) disagree", len(recs), err, n, err2)
		}
		if err != nil {
			return
		}
		// Re-encoding what was decoded must decode to the same records.
		h := Batch(b).Header()
		h.Attributes &^= AttrCompressionMask
		again, err := Build(h, recs)
		if err != nil {
			t.Fatalf("Build of decoded records: %v", err)
		}
		recs2, err := Batch(again).Records()
		if err != nil {
			t.Fatalf("Records of rebuilt batch: %v", err)
		}
		assertRecordsEqual(t, recs2, recs)
	})
}

// FuzzDecompress feeds arbitrary bytes to every codec: no panics, output
// within the cap, errors wrap CorruptMessage. Seeds are valid streams of
// each codec (incl. raw snappy) and a xerial header with a huge block.
func FuzzDecompress(f *testing.F) {
	raw := AppendRecords(nil, sampleRecords())
	for _, c := range allCodecs[1:] {
		z, err := Compress(c, raw)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(int8(c), z)
	}
	f.Add(int8(Snappy), snappyEncodeRaw(raw))
	f.Add(int8(Snappy), append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff))
	f.Fuzz(func(t *testing.T, c int8, data []byte) {
		out, err := Decompress(Compression(c&7), data)
		if err != nil && !errors.Is(err, kerr.CorruptMessage) {
			t.Fatalf("error kind: %v", err)
		}
		if len(out) > MaxDecompressedSize {
			t.Fatalf("output of %d bytes beyond the cap", len(out))
		}
	})
}
