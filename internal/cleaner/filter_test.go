package cleaner

import (
	"bytes"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

var codecs = []record.Compression{record.None, record.Gzip, record.Snappy, record.LZ4, record.Zstd}

type kv struct {
	key, val []byte // nil = null
}

// mkBatch builds a batch at base with one record per kv, timestamps
// ts0+i, the given codec and producer fields.
func mkBatch(t testing.TB, base int64, codec record.Compression, pid int64, ts0 int64, kvs ...kv) record.Batch {
	t.Helper()
	recs := make([]record.Record, len(kvs))
	for i, x := range kvs {
		recs[i] = record.Record{TimestampDelta: int64(i), Key: x.key, Value: x.val,
			Headers: []record.Header{{Key: "h", Value: []byte{byte(i)}}}}
	}
	h := record.BatchHeader{
		BaseOffset: base, PartitionLeaderEpoch: 3, Attributes: int16(codec), BaseTimestamp: ts0,
		ProducerID: pid, ProducerEpoch: -1, BaseSequence: -1,
	}
	if pid >= 0 {
		h.ProducerEpoch, h.BaseSequence = 1, 10
	}
	return recordtest.Batch(h, recs...)
}

func newTestFilter(t testing.TB, puts map[string]int64, latest int64) *filter {
	m, err := NewOffsetMap(1<<16, DefaultLoadFactor)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Free)
	for k, o := range puts {
		m.Put([]byte(k), o)
	}
	m.SetLatest(latest)
	return &filter{m: m, nowMs: 1_000_000, deleteRetentionMs: 1000, producerLast: map[int64]int64{}, upper: latest + 1}
}

func s(x string) []byte { return []byte(x) }

func TestFilterDedupKeepsOffsetsAndCodec(t *testing.T) {
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			b := mkBatch(t, 100, codec, -1, 5000, kv{s("a"), s("1")}, kv{s("b"), s("2")}, kv{s("a"), s("3")}, kv{s("c"), s("4")})
			f := newTestFilter(t, map[string]int64{"a": 102, "b": 101, "c": 200}, 500)
			f.upper = 1000
			out, err := f.apply(b)
			if err != nil {
				t.Fatal(err)
			}
			ob := record.Batch(out)
			if err := record.ValidateStored(out); err != nil {
				t.Fatal(err)
			}
			if ob.BaseOffset() != 100 || ob.LastOffset() != 103 || ob.Compression() != codec || ob.PartitionLeaderEpoch() != 3 {
				t.Fatalf("header changed: base %d last %d codec %v", ob.BaseOffset(), ob.LastOffset(), ob.Compression())
			}
			recs, err := ob.Records()
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 2 || string(recs[0].Key) != "b" || recs[0].OffsetDelta != 1 || string(recs[1].Key) != "a" || string(recs[1].Value) != "3" || recs[1].OffsetDelta != 2 {
				t.Fatalf("kept %+v", recs)
			}
			if ob.BaseTimestamp()+recs[1].TimestampDelta != 5002 || ob.MaxTimestamp() != 5002 {
				t.Fatalf("timestamps: base %d delta %d max %d", ob.BaseTimestamp(), recs[1].TimestampDelta, ob.MaxTimestamp())
			}
			if len(recs[1].Headers) != 1 || recs[1].Headers[0].Value[0] != 2 {
				t.Fatalf("headers lost: %+v", recs[1].Headers)
			}
			if f.stats.RecordsRemoved != 2 {
				t.Fatalf("removed %d", f.stats.RecordsRemoved)
			}
		})
	}
}

func TestFilterUnchangedBatchIsVerbatim(t *testing.T) {
	b := mkBatch(t, 0, record.LZ4, -1, 1, kv{s("a"), s("1")}, kv{s("b"), s("2")})
	f := newTestFilter(t, map[string]int64{"a": 0, "b": 1}, 10)
	f.upper = 100
	out, err := f.apply(b)
	if err != nil || !bytes.Equal(out, b) || &out[0] != &b[0] {
		t.Fatalf("want the same bytes, err %v", err)
	}
}

func TestFilterRecordsBeyondMapAreKept(t *testing.T) {
	b := mkBatch(t, 10, record.None, -1, 1, kv{s("a"), s("1")}, kv{s("a"), s("2")}, kv{s("a"), s("3")})
	// Map covers up to 11 only (it filled mid-batch); a's latest mapped is 11.
	f := newTestFilter(t, map[string]int64{"a": 11}, 11)
	f.upper = 12
	out, _ := f.apply(b)
	recs, _ := record.Batch(out).Records()
	if len(recs) != 2 || recs[0].OffsetDelta != 1 || recs[1].OffsetDelta != 2 {
		t.Fatalf("kept %+v", recs)
	}
}

func TestFilterNullKeyDroppedEmptyKeyKept(t *testing.T) {
	b := mkBatch(t, 0, record.None, -1, 1, kv{nil, s("x")}, kv{s(""), s("")}, kv{s("k"), s("")})
	f := newTestFilter(t, map[string]int64{"": 1, "k": 2}, 2)
	f.upper = 100
	out, _ := f.apply(b)
	recs, _ := record.Batch(out).Records()
	if len(recs) != 2 || recs[0].Key == nil || len(recs[0].Key) != 0 || recs[0].Value == nil || recs[1].Value == nil {
		t.Fatalf("kept %+v", recs)
	}
	if f.stats.NullKeysRemoved != 1 {
		t.Fatal("null key not counted")
	}
}

func TestFilterTombstoneHorizon(t *testing.T) {
	for _, codec := range codecs {
		b := mkBatch(t, 0, codec, -1, 5000, kv{s("a"), s("1")}, kv{s("b"), nil})
		f := newTestFilter(t, map[string]int64{"a": 0, "b": 1}, 1)
		f.upper = 100
		out, err := f.apply(b)
		if err != nil {
			t.Fatal(err)
		}
		ob := record.Batch(out)
		if !ob.HasDeleteHorizon() || ob.BaseTimestamp() != f.nowMs+f.deleteRetentionMs {
			t.Fatalf("%v: horizon not stamped: attrs %x base %d", codec, ob.Attributes(), ob.BaseTimestamp())
		}
		if f.stats.TombstonesRetained != 1 || f.stats.NextHorizonMs != f.nowMs+f.deleteRetentionMs {
			t.Fatalf("%v: retained %d next horizon %d", codec, f.stats.TombstonesRetained, f.stats.NextHorizonMs)
		}
		recs, _ := ob.Records()
		if len(recs) != 2 || ob.BaseTimestamp()+recs[1].TimestampDelta != 5001 || ob.MaxTimestamp() != 5001 {
			t.Fatalf("%v: timestamps not preserved", codec)
		}
		// Same round again before the horizon: unchanged, verbatim.
		f2 := newTestFilter(t, map[string]int64{}, 1)
		f2.upper = 100
		f2.nowMs = f.nowMs + 999
		out2, _ := f2.apply(ob)
		if !bytes.Equal(out2, out) {
			t.Fatalf("%v: batch changed before horizon", codec)
		}
		if f2.stats.TombstonesRetained != 1 || f2.stats.NextHorizonMs != f.nowMs+f.deleteRetentionMs {
			t.Fatalf("%v: before horizon: retained %d next horizon %d", codec, f2.stats.TombstonesRetained, f2.stats.NextHorizonMs)
		}
		f2.stats = roundStats{}
		// After the horizon the tombstone goes, the value stays.
		f2.nowMs = f.nowMs + 1000
		out3, _ := f2.apply(ob)
		recs3, _ := record.Batch(out3).Records()
		if len(recs3) != 1 || string(recs3[0].Key) != "a" || record.Batch(out3).LastOffset() != 1 || f2.stats.TombstonesRemoved != 1 || f2.stats.TombstonesRetained != 0 {
			t.Fatalf("%v: after horizon kept %+v", codec, recs3)
		}
		if ts := record.Batch(out3).BaseTimestamp() + recs3[0].TimestampDelta; ts != 5000 {
			t.Fatalf("%v: ts %d", codec, ts)
		}
	}
}

func TestFilterTombstoneNotStampedBeyondMap(t *testing.T) {
	b := mkBatch(t, 5, record.None, -1, 1, kv{s("b"), nil})
	f := newTestFilter(t, nil, 4)
	f.upper = 100
	out, _ := f.apply(b)
	if !bytes.Equal(out, b) {
		t.Fatal("tombstone beyond the map must be left alone")
	}
}

func TestFilterEmptyBatches(t *testing.T) {
	b := mkBatch(t, 10, record.Zstd, 7, 1, kv{s("a"), s("1")}, kv{s("a"), s("2")})
	// Superseded entirely; producer 7's last batch -> kept empty.
	f := newTestFilter(t, map[string]int64{"a": 50}, 60)
	f.upper = 100
	f.producerLast[7] = 11
	out, err := f.apply(b)
	if err != nil {
		t.Fatal(err)
	}
	ob := record.Batch(out)
	if len(out) != record.HeaderSize || ob.NumRecords() != 0 || ob.BaseOffset() != 10 || ob.LastOffset() != 11 ||
		ob.ProducerID() != 7 || ob.ProducerEpoch() != 1 || ob.BaseSequence() != 10 || ob.BaseTimestamp() != -1 ||
		ob.Compression() != record.None || ob.MaxTimestamp() != 2 || ob.PartitionLeaderEpoch() != 3 {
		t.Fatalf("bad empty batch %+v", ob.Header())
	}
	if err := record.ValidateStored(out); err != nil {
		t.Fatal(err)
	}
	// An empty batch survives later rounds only while still needed.
	out2, _ := f.apply(ob)
	if !bytes.Equal(out2, out) {
		t.Fatal("retained empty batch changed")
	}
	delete(f.producerLast, 7)
	if out3, _ := f.apply(ob); out3 != nil {
		t.Fatal("stale empty batch not dropped")
	}
	// Not the producer's last batch and not the round end: dropped.
	f.producerLast[7] = 99
	if out4, _ := f.apply(b); out4 != nil {
		t.Fatal("want drop")
	}
	// The batch ending the round is kept empty.
	f.upper = 12
	if out5, _ := f.apply(b); len(out5) != record.HeaderSize {
		t.Fatal("round-end batch not kept")
	}
}

func TestFilterControlBatchUntouched(t *testing.T) {
	h := record.BatchHeader{BaseOffset: 3, Attributes: record.AttrControl | record.AttrTransactional, ProducerID: 1,
		ProducerEpoch: 0, BaseSequence: -1, BaseTimestamp: 1, MaxTimestamp: 1}
	b, err := record.Build(h, []record.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}})
	if err != nil {
		t.Fatal(err)
	}
	f := newTestFilter(t, map[string]int64{string([]byte{0, 0, 0, 1}): 99}, 100)
	out, _ := f.apply(b)
	if !bytes.Equal(out, b) {
		t.Fatal("control batch changed")
	}
}

func BenchmarkFilter(b *testing.B) {
	kvs := make([]kv, 16)
	val := bytes.Repeat([]byte("v"), 1000)
	for i := range kvs {
		kvs[i] = kv{[]byte{byte(i), 'k', 'e', 'y'}, val}
	}
	batch := mkBatch(b, 0, record.None, -1, 1, kvs...)
	f := newTestFilter(b, nil, 15)
	for i := range kvs {
		f.m.Put(kvs[i].key, int64(i))
	}
	f.upper = 100
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.apply(batch); err != nil {
			b.Fatal(err)
		}
	}
}
