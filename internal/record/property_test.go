package record

import (
	"testing"

	"pgregory.net/rapid"
)

// nullableBytes draws nil or a (possibly empty) byte slice.
func nullableBytes(t *rapid.T, label string) []byte {
	if rapid.Bool().Draw(t, label+"Null") {
		return nil
	}
	return rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, label)
}

// TestPropertyBuildThenParse: for any header and records, Build then
// Validate/Records returns exactly the input (null vs empty preserved).
func TestPropertyBuildThenParse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 20).Draw(t, "n")
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = Record{
				TimestampDelta: rapid.Int64().Draw(t, "tsDelta"),
				OffsetDelta:    int32(i),
				Key:            nullableBytes(t, "key"),
				Value:          nullableBytes(t, "value"),
			}
			for j := rapid.IntRange(0, 3).Draw(t, "headers"); j > 0; j-- {
				recs[i].Headers = append(recs[i].Headers, Header{
					Key:   rapid.String().Draw(t, "hkey"),
					Value: nullableBytes(t, "hvalue"),
				})
			}
		}
		c := Compression(rapid.IntRange(0, 4).Draw(t, "codec"))
		h := BatchHeader{
			BaseOffset:           rapid.Int64Min(0).Draw(t, "base"),
			PartitionLeaderEpoch: rapid.Int32().Draw(t, "epoch"),
			Attributes:           int16(c) | int16(rapid.IntRange(0, 15).Draw(t, "flags"))<<3,
			LastOffsetDelta:      int32(max(n-1, 0)),
			BaseTimestamp:        rapid.Int64().Draw(t, "baseTs"),
			MaxTimestamp:         rapid.Int64().Draw(t, "maxTs"),
			ProducerID:           rapid.Int64().Draw(t, "pid"),
			ProducerEpoch:        rapid.Int16().Draw(t, "pepoch"),
			BaseSequence:         rapid.Int32().Draw(t, "seq"),
		}
		b, err := Build(h, recs)
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		if err := Validate(b); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		got := Batch(b).Header()
		h.BatchLength, h.Magic, h.NumRecords, h.CRC = int32(len(b)-LogOverhead), MagicV2, int32(n), got.CRC
		if got != h {
			t.Fatalf("header %+v, want %+v", got, h)
		}
		out, err := Batch(b).Records()
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		assertRecordsEqual(t, out, recs)
	})
}
