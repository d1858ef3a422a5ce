package record

import (
	"bytes"
	"fmt"
	"math"
	"testing"
)

// benchRecords returns n records of valueSize bytes each.
func benchRecords(n, valueSize int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(fmt.Sprint("key-", i)),
			Value: bytes.Repeat([]byte{byte(i)}, valueSize)}
	}
	return recs
}

// bench16K builds a ~16 KiB batch (64 records of 240-byte values).
func bench16K(b *testing.B, c Compression) Batch {
	recs := benchRecords(64, 240)
	out, err := Build(BatchHeader{Attributes: int16(c), LastOffsetDelta: 63}, recs)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func BenchmarkValidate16K(b *testing.B) {
	batch := bench16K(b, None)
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if err := Validate(batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecords16K(b *testing.B) {
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			batch := bench16K(b, c)
			b.SetBytes(int64(EncodedSize(benchRecords(64, 240))))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := batch.Records(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkForEachRecord16K(b *testing.B) {
	batch := bench16K(b, None)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if err := batch.ForEachRecord(func(*Record) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuild16K(b *testing.B) {
	recs := benchRecords(64, 240)
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(EncodedSize(recs)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(BatchHeader{Attributes: int16(c), LastOffsetDelta: 63}, recs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckRecords16K is the per-record check every produced batch now
// gets (CheckRecords), per codec, next to Validate (CRC and header) of the
// same batch: the ratio of the two is the added cost of reading every
// record on the produce path.
func BenchmarkCheckRecords16K(b *testing.B) {
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			batch := bench16K(b, c)
			b.SetBytes(int64(EncodedSize(benchRecords(64, 240))))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CheckRecords(batch, CheckOptions{CheckTimestamps: true, NowMs: 1, BeforeMs: math.MaxInt64, AfterMs: math.MaxInt64}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
