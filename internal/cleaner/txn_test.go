package cleaner

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

// txnBatch builds a transactional data batch of producer pid at base.
func txnBatch(t testing.TB, base int64, codec record.Compression, pid int64, kvs ...kv) record.Batch {
	t.Helper()
	recs := make([]record.Record, len(kvs))
	for i, x := range kvs {
		recs[i] = record.Record{TimestampDelta: int64(i), Key: x.key, Value: x.val}
	}
	return recordtest.Batch(record.BatchHeader{
		BaseOffset: base, PartitionLeaderEpoch: 2, Attributes: int16(codec) | record.AttrTransactional,
		BaseTimestamp: 5000, ProducerID: pid, ProducerEpoch: 4, BaseSequence: 7,
	}, recs...)
}

// markerBatch builds a COMMIT or ABORT marker of producer pid at off.
func markerBatch(t testing.TB, off, pid int64, epoch int16, commit bool) record.Batch {
	t.Helper()
	return recordtest.Marker(record.BatchHeader{BaseOffset: off, PartitionLeaderEpoch: 2, BaseTimestamp: 6000, ProducerID: pid, ProducerEpoch: epoch}, commit, 9)
}

// keysOf returns the keys of b's records.
func keysOf(t testing.TB, b record.Batch) []string {
	t.Helper()
	var out []string
	if err := b.ForEachRecord(func(r *record.Record) error {
		out = append(out, string(r.Key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The log of these tests: producer 1 commits [10,11] (marker 12),
// producer 2 aborts [13,14] (marker 15), a plain batch at 16.
func txnLog(t testing.TB) []record.Batch {
	return []record.Batch{
		txnBatch(t, 10, record.Zstd, 1, kv{s("a"), s("c1")}, kv{s("b"), s("c2")}),
		markerBatch(t, 12, 1, 4, true),
		txnBatch(t, 13, record.None, 2, kv{s("a"), s("x1")}, kv{s("c"), s("x2")}),
		markerBatch(t, 15, 2, 4, false),
		mkBatch(t, 16, record.None, -1, 7000, kv{s("b"), s("p")}),
	}
}

func txnFilter(t testing.TB) *filter {
	// The map as the map build leaves it: aborted records are not in it.
	f := newTestFilter(t, map[string]int64{"a": 10, "b": 16}, 16)
	f.upper = 100
	f.txn = newTxnTracker([]abortedTxn{{ProducerID: 2, FirstOffset: 13, LastOffset: 15, LastStableOffset: 16}})
	f.producerEpoch = map[int64]int16{}
	return f
}

func TestFilterTransactions(t *testing.T) {
	f := txnFilter(t)
	log := txnLog(t)
	var out []record.Batch
	for _, b := range log {
		o, err := f.apply(b)
		if err != nil {
			t.Fatal(err)
		}
		if o != nil {
			out = append(out, append(record.Batch(nil), o...))
		}
	}
	// Committed data deduplicated (b superseded by 16), rebuilt with its
	// transactional and producer fields; aborted data dropped although
	// its key c has no other record; both markers kept.
	if len(out) != 4 {
		t.Fatalf("got %d batches, want 4", len(out))
	}
	c := out[0]
	if err := record.ValidateStored(c); err != nil {
		t.Fatal(err)
	}
	if c.BaseOffset() != 10 || c.LastOffset() != 11 || !c.IsTransactional() || c.ProducerID() != 1 ||
		c.ProducerEpoch() != 4 || c.BaseSequence() != 7 || c.Compression() != record.Zstd ||
		c.PartitionLeaderEpoch() != 2 {
		t.Fatalf("rebuilt committed batch header %+v", c.Header())
	}
	if k := keysOf(t, c); len(k) != 1 || k[0] != "a" {
		t.Fatalf("committed batch keeps %v, want [a]", k)
	}
	if !bytes.Equal(out[1], log[1]) || !bytes.Equal(out[2], log[3]) || !bytes.Equal(out[3], log[4]) {
		t.Fatal("markers or plain batch changed")
	}
	if f.stats.AbortedRemoved != 2 || f.stats.RecordsRemoved != 3 {
		t.Fatalf("stats %+v", f.stats)
	}
}

func TestFilterAbortedBatchOfActiveProducerKeptEmpty(t *testing.T) {
	f := txnFilter(t)
	f.producerLast[2] = 14
	log := txnLog(t)
	for _, b := range log[:2] {
		if _, err := f.apply(b); err != nil {
			t.Fatal(err)
		}
	}
	out, err := f.apply(log[2])
	if err != nil {
		t.Fatal(err)
	}
	o := record.Batch(out)
	if len(out) != record.HeaderSize || o.NumRecords() != 0 || !o.IsTransactional() || o.ProducerID() != 2 ||
		o.BaseOffset() != 13 || o.LastOffset() != 14 {
		t.Fatalf("want the empty form of the aborted batch, got %d bytes %+v", len(out), o.Header())
	}
}

// TestFilterMarkerRemoval follows Kafka's rule: a COMMIT marker whose
// transaction has no batch left is stamped with a delete horizon, then
// removed by a round after the horizon; an ABORT marker stays while a
// batch of its transaction is met, and ABORT markers are kept when the
// policy says so.
func TestFilterMarkerRemoval(t *testing.T) {
	commit := markerBatch(t, 12, 1, 4, true)
	abort := markerBatch(t, 15, 2, 4, false)
	aborted := []abortedTxn{{ProducerID: 2, FirstOffset: 13, LastOffset: 15, LastStableOffset: 16}}
	round := func(now int64, policy markerPolicy, batches ...record.Batch) []record.Batch {
		f := newTestFilter(t, nil, 16)
		f.nowMs = now
		f.upper = 100
		f.txn = newTxnTracker(aborted)
		f.producerEpoch = map[int64]int16{}
		f.markers = policy
		var out []record.Batch
		for _, b := range batches {
			o, err := f.apply(b)
			if err != nil {
				t.Fatal(err)
			}
			if o != nil {
				out = append(out, append(record.Batch(nil), o...))
			}
		}
		return out
	}
	all := markerPolicy{commit: true, abort: true}
	// The committed data is still there: nothing is eligible.
	data := txnBatch(t, 10, record.None, 1, kv{s("a"), s("c1")}, kv{s("b"), s("c2")})
	if out := round(1_000_000, all, data, commit); len(out) != 2 || !bytes.Equal(out[1], commit) {
		t.Fatal("COMMIT marker of a transaction with data changed")
	}
	// The aborted data met in this pass keeps the ABORT marker.
	adata := txnBatch(t, 13, record.None, 2, kv{s("a"), s("x")}, kv{s("c"), s("y")})
	if out := round(1_000_000, all, adata, abort); len(out) != 1 || !bytes.Equal(out[0], abort) {
		t.Fatalf("ABORT marker with its data in the pass: %d batches", len(out))
	}
	// No data left: the first round stamps horizons.
	out := round(1_000_000, all, commit, abort)
	if len(out) != 2 {
		t.Fatalf("got %d batches", len(out))
	}
	for i, o := range out {
		if err := record.ValidateStored(o); err != nil {
			t.Fatal(err)
		}
		if !o.HasDeleteHorizon() || o.BaseTimestamp() != 1_001_000 || !o.IsControl() || !o.IsTransactional() ||
			o.MaxTimestamp() != 6000 || o.NumRecords() != 1 {
			t.Fatalf("marker %d not stamped: %+v", i, o.Header())
		}
		if err := o.ForEachRecord(func(r *record.Record) error {
			if o.BaseTimestamp()+r.TimestampDelta != 6000 {
				t.Fatalf("marker timestamp changed")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Before the horizon: unchanged. After: removed.
	if again := round(1_000_500, all, out...); len(again) != 2 || !bytes.Equal(again[0], out[0]) {
		t.Fatal("stamped markers changed before the horizon")
	}
	if gone := round(1_001_000, all, out...); len(gone) != 0 {
		t.Fatalf("%d markers left after the horizon", len(gone))
	}
	// Policy keeps ABORT markers: only the COMMIT marker is stamped.
	out = round(1_000_000, markerPolicy{commit: true}, commit, abort)
	if len(out) != 2 || !out[0].HasDeleteHorizon() || !bytes.Equal(out[1], abort) {
		t.Fatal("ABORT marker touched although the policy keeps it")
	}
	if gone := round(2_000_000, markerPolicy{commit: true}, out...); len(gone) != 1 || !bytes.Equal(gone[0], abort) {
		t.Fatal("want only the ABORT marker left")
	}
	// The zero policy keeps every marker.
	if out := round(1_000_000, markerPolicy{}, commit, abort); len(out) != 2 ||
		!bytes.Equal(out[0], commit) || !bytes.Equal(out[1], abort) {
		t.Fatal("markers changed by the keep-all policy")
	}
}

// A removed marker carrying the current epoch of an active producer with
// no data batch in its state stays as an empty batch (fencing), as does
// the batch ending the round; other empty control batches go.
func TestFilterMarkerKeptEmptyForFencing(t *testing.T) {
	commit := markerBatch(t, 12, 1, 4, true)
	f := newTestFilter(t, nil, 16)
	f.upper = 100
	f.txn = newTxnTracker(nil)
	f.markers = markerPolicy{commit: true}
	f.producerEpoch = map[int64]int16{1: 4}
	stamped, err := f.apply(commit)
	if err != nil {
		t.Fatal(err)
	}
	stamped = append([]byte(nil), stamped...)
	f.nowMs += 10_000
	f.txn = newTxnTracker(nil)
	out, err := f.apply(stamped)
	if err != nil {
		t.Fatal(err)
	}
	o := record.Batch(out)
	if len(out) != record.HeaderSize || !o.IsControl() || o.ProducerEpoch() != 4 || o.BaseOffset() != 12 {
		t.Fatalf("want an empty marker, got %d bytes", len(out))
	}
	empty := append(record.Batch(nil), o...)
	if again, _ := f.apply(empty); !bytes.Equal(again, empty) {
		t.Fatal("empty marker of an active producer dropped")
	}
	f.producerEpoch[1] = 5 // a later epoch: this marker is not its latest state
	if again, _ := f.apply(empty); again != nil {
		t.Fatal("stale empty marker kept")
	}
	f.producerEpoch[1] = 4
	f.producerLast[1] = 40 // the producer has a data batch: not needed
	if again, _ := f.apply(empty); again != nil {
		t.Fatal("empty marker kept although the producer has data")
	}
}

func TestTxnTrackerAbortedSpansPasses(t *testing.T) {
	// An aborted transaction starting before the pass: its batches in the
	// pass are aborted; a later transaction of the same producer is not.
	tr := newTxnTracker([]abortedTxn{{ProducerID: 5, FirstOffset: 3, LastOffset: 21}})
	if !tr.dataBatch(txnBatch(t, 20, record.None, 5, kv{s("k"), s("v")})) {
		t.Fatal("batch of the aborted transaction not aborted")
	}
	if typ, removable, ok := tr.controlBatch(markerBatch(t, 21, 5, 4, false)); !ok || typ != record.ControlAbort || removable {
		t.Fatalf("ABORT marker: %v %v %v", typ, removable, ok)
	}
	if tr.dataBatch(txnBatch(t, 22, record.None, 5, kv{s("k"), s("v")})) {
		t.Fatal("next transaction taken as aborted")
	}
	if _, removable, _ := tr.controlBatch(markerBatch(t, 23, 5, 4, true)); removable {
		t.Fatal("COMMIT marker of a transaction with data removable")
	}
	if _, removable, _ := tr.controlBatch(markerBatch(t, 24, 5, 4, true)); !removable {
		t.Fatal("COMMIT marker without data not removable")
	}
	// A non-transactional batch does not count.
	tr.dataBatch(mkBatch(t, 25, record.None, 5, 1, kv{s("k"), s("v")}))
	if _, removable, _ := tr.controlBatch(markerBatch(t, 26, 5, 4, true)); !removable {
		t.Fatal("plain batch counted as transactional")
	}
}

// FuzzFilterControl feeds arbitrary records sections, as control or
// transactional batches with a valid CRC, through a transaction-aware
// filter: it must never panic, and whatever it returns must be a valid
// batch with the input's offsets.
func FuzzFilterControl(f *testing.F) {
	m := markerBatch(f, 0, 1, 0, true)
	f.Add([]byte(m[record.HeaderSize:]), int16(record.AttrControl|record.AttrTransactional), 1, true)
	d := txnBatch(f, 0, record.None, 1, kv{s("a"), s("b")})
	f.Add([]byte(d[record.HeaderSize:]), int16(record.AttrTransactional), 1, false)
	f.Add([]byte{0x02, 0, 0, 0, 0, 0, 0}, int16(record.AttrControl|record.AttrTransactional), 1, false)
	om, err := NewOffsetMap(1<<12, DefaultLoadFactor)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(om.Free)
	om.SetLatest(100)
	f.Fuzz(func(t *testing.T, data []byte, attrs int16, n int, stamped bool) {
		if n < 0 || n > 100 {
			return
		}
		attrs &= record.AttrControl | record.AttrTransactional | record.AttrCompressionMask
		if stamped {
			attrs |= record.AttrHasDeleteHorizon
		}
		h := record.BatchHeader{BaseOffset: 50, LastOffsetDelta: int32(max(n-1, 0)), Attributes: attrs,
			ProducerID: 1, ProducerEpoch: 0, BaseSequence: -1, BaseTimestamp: 10, MaxTimestamp: 10}
		hdr, err := record.Build(h, nil)
		if err != nil {
			t.Skip()
		}
		batch := append(hdr[:record.HeaderSize:record.HeaderSize], data...)
		be := binary.BigEndian
		be.PutUint32(batch[8:], uint32(len(batch)-record.LogOverhead))
		be.PutUint32(batch[57:], uint32(n))
		be.PutUint32(batch[17:], record.Batch(batch).ComputeCRC())
		for _, pol := range []markerPolicy{{}, {commit: true, abort: true}} {
			fl := &filter{m: om, nowMs: 1_000_000, deleteRetentionMs: 1000, producerLast: map[int64]int64{}, upper: 1000}
			fl.txn = newTxnTracker([]abortedTxn{{ProducerID: 1, FirstOffset: 40, LastOffset: 60}})
			fl.producerEpoch = map[int64]int16{1: 0}
			fl.markers = pol
			out, err := fl.apply(record.Batch(batch))
			if err != nil || out == nil {
				continue
			}
			ob := record.Batch(out)
			if err := record.ValidateStored(ob); err != nil {
				t.Fatalf("output batch invalid: %v", err)
			}
			if ob.BaseOffset() != 50 || ob.LastOffset() != 50+int64(max(n-1, 0)) {
				t.Fatalf("offsets changed: %d-%d", ob.BaseOffset(), ob.LastOffset())
			}
		}
	})
}

// BenchmarkFilterTxn is BenchmarkFilter over a committed transaction's
// batch with the transaction tracker on.
func BenchmarkFilterTxn(b *testing.B) {
	kvs := make([]kv, 16)
	val := bytes.Repeat([]byte("v"), 1000)
	for i := range kvs {
		kvs[i] = kv{[]byte{byte(i), 'k', 'e', 'y'}, val}
	}
	batch := txnBatch(b, 0, record.None, 9, kvs...)
	f := newTestFilter(b, nil, 15)
	for i := range kvs {
		f.m.Put(kvs[i].key, int64(i))
	}
	f.upper = 100
	f.txn = newTxnTracker([]abortedTxn{{ProducerID: 8, FirstOffset: 0, LastOffset: 20}})
	f.markers = markerPolicy{commit: true}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.apply(batch); err != nil {
			b.Fatal(err)
		}
	}
}
