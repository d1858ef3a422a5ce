package cleaner

import (
	"bytes"
	"testing"

	"github.com/strata-io/strata/internal/record"
)

// FuzzScanRecords checks the cleaner's allocation-free record scanner
// against the record package's decoder on arbitrary records sections, and
// that re-encoding a record with a new timestamp delta decodes back to the
// same record with only that delta changed.
func FuzzScanRecords(f *testing.F) {
	b := mkBatch(f, 0, record.None, -1, 5, kv{[]byte("a"), []byte("1")}, kv{nil, nil}, kv{[]byte(""), []byte("")})
	f.Add([]byte(b[record.HeaderSize:]), 3, int64(-7))
	f.Add([]byte{0x02, 0, 0}, 1, int64(1<<40))
	f.Add([]byte{0x02, 0, 0, 0, 0, 0, 0}, 1, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, n int, delta int64) {
		if n < 1 || n > 1000 { // the cleaner never scans an empty batch
			return
		}
		h := record.BatchHeader{LastOffsetDelta: int32(max(n-1, 0)), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		hdr, err := record.Build(h, nil)
		if err != nil {
			t.Fatal(err)
		}
		batch := append(hdr[:record.HeaderSize:record.HeaderSize], data...)
		bt := record.Batch(batch)
		be := func(p int, v uint32) {
			batch[p], batch[p+1], batch[p+2], batch[p+3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		}
		be(8, uint32(len(batch)-record.LogOverhead))
		be(57, uint32(n))
		var want []record.Record
		errWant := bt.ForEachRecord(func(r *record.Record) error {
			want = append(want, record.Record{TimestampDelta: r.TimestampDelta, OffsetDelta: r.OffsetDelta, Key: r.Key, Value: r.Value})
			return nil
		})
		var got []rawRecord
		var scratch rawRecord
		errGot := scanRecords(data, n, &scratch, func(r *rawRecord) error {
			got = append(got, *r)
			return nil
		})
		if errWant != nil {
			return // the scanner may accept what the full decoder rejects (it skips headers)
		}
		if errGot != nil {
			t.Fatalf("scanner rejects a valid section: %v", errGot)
		}
		if len(got) != len(want) {
			t.Fatalf("%d records, want %d", len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.TsDelta != w.TimestampDelta || g.OffsetDelta != w.OffsetDelta || !bytes.Equal(g.Key, w.Key) ||
				(g.Key == nil) != (w.Key == nil) || g.NullValue != (w.Value == nil) {
				t.Fatalf("record %d: got %+v want %+v", i, g, w)
			}
			re := appendWithTsDelta(nil, &g, delta)
			var back []rawRecord
			if err := scanRecords(re, 1, &scratch, func(r *rawRecord) error { back = append(back, *r); return nil }); err != nil {
				t.Fatalf("re-encoded record: %v", err)
			}
			if back[0].TsDelta != delta || back[0].OffsetDelta != g.OffsetDelta || !bytes.Equal(back[0].Key, g.Key) ||
				!bytes.Equal(back[0].raw[back[0].tsEnd:], g.raw[g.tsEnd:]) {
				t.Fatalf("re-encoded record differs: %+v vs %+v", back[0], g)
			}
		}
	})
}
