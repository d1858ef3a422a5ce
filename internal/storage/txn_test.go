package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/vfs"
)

// mkTxnBatch builds a transactional producer batch of n records.
func mkTxnBatch(t testing.TB, n int, tag string, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
	}
	return recordtest.Batch(record.BatchHeader{
		PartitionLeaderEpoch: -1, Attributes: record.AttrTransactional, BaseTimestamp: 1,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
	}, recs...)
}

// txnConfig is testConfig without time-based rolls (the test batches
// carry old timestamps, markers the current time).
func txnConfig() Config {
	c := testConfig()
	c.SegmentMs = 100 * 365 * 24 * time.Hour
	return c
}

// mustMarker appends a marker and waits until it is durable.
func mustMarker(t testing.TB, l *Log, pid int64, epoch int16, commit bool) int64 {
	t.Helper()
	off, err := l.AppendMarker(pid, epoch, 1, commit, 1)
	if err != nil {
		t.Fatalf("marker: %v", err)
	}
	if err := l.WaitDurable(context.Background(), off+1); err != nil {
		t.Fatal(err)
	}
	return off
}

// readCommittedAll reads every batch below the last stable offset.
func readCommittedAll(t testing.TB, l *Log) []record.Batch {
	t.Helper()
	var out []record.Batch
	off := l.LogStartOffset()
	for {
		res, err := l.ReadCommitted(off, 1<<16, true)
		if err != nil {
			t.Fatalf("read committed at %d: %v", off, err)
		}
		if len(res.Chunks) == 0 {
			return out
		}
		for _, c := range res.Chunks {
			buf := make([]byte, c.Len)
			if _, err := c.File.File().ReadAt(buf, c.Pos); err != nil {
				t.Fatal(err)
			}
			for len(buf) > 0 {
				b, rest, err := record.Next(buf)
				if err != nil {
					t.Fatalf("chunk at %d: %v", off, err)
				}
				if b.LastOffset() >= res.LastStableOffset {
					t.Fatalf("read committed returned batch [%d,%d] at LSO %d", b.BaseOffset(), b.LastOffset(), res.LastStableOffset)
				}
				out = append(out, append(record.Batch(nil), b...))
				off = b.LastOffset() + 1
				buf = rest
			}
		}
		res.Release()
	}
}

func TestTxnMarkersIndexAndLSO(t *testing.T) {
	fsys := vfs.NewCrashFS()
	dir := "/d/txn-0"
	l := openTest(t, fsys, dir, txnConfig(), false)
	defer func() { l.Close() }()

	a := mustAppend(t, l, mkTxnBatch(t, 3, "a", 1, 0, 0)) // offsets 0-2, txn of producer 1
	mustAppend(t, l, mkBatch(t, 2, "plain", 1))           // 3-4
	if got := l.LastStableOffset(); got != a.BaseOffset {
		t.Fatalf("LSO %d with open txn at %d", got, a.BaseOffset)
	}
	res, err := l.ReadCommitted(0, 1<<20, true)
	if err != nil || len(res.Chunks) != 0 || res.LastStableOffset != 0 || res.HighWatermark != 5 {
		t.Fatalf("read committed below open txn: %v %+v", err, res)
	}
	if res, _ := l.Read(0, 1<<20, true); len(res.Chunks) != 1 || res.LastStableOffset != 0 {
		t.Fatalf("read uncommitted: %+v", res)
	} else {
		res.Release()
	}

	// An older epoch or coordinator epoch is refused and writes nothing.
	mustAppend(t, l, mkTxnBatch(t, 1, "a2", 1, 2, 0)) // epoch bump inside the txn: 5
	if _, err := l.AppendMarker(1, 1, 1, false, 1); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("stale epoch marker: %v", err)
	}
	ch := l.HighWatermarkChanged()
	abortAt := mustMarker(t, l, 1, 2, false) // 6
	if _, err := l.AppendMarker(1, 2, 0, true, 1); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("stale coordinator epoch marker: %v", err)
	}
	if l.LogEndOffset() != 7 {
		t.Fatalf("leo %d", l.LogEndOffset())
	}
	select {
	case <-ch:
	default:
		t.Fatal("LSO move did not fire HighWatermarkChanged")
	}
	if got := l.LastStableOffset(); got != 7 {
		t.Fatalf("LSO %d after abort", got)
	}
	want := []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: abortAt, LastStableOffset: abortAt + 1}}
	if got := l.AbortedTransactions(0, 7); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %+v want %+v", got, want)
	}
	data, err := vfs.ReadFile(fsys, filepath.Join(dir, FileName(0, TxnIndexSuffix)))
	if err != nil {
		t.Fatalf("txnindex not created: %v", err)
	}
	if ents, err := ParseTxnIndex(data); err != nil || !reflect.DeepEqual(ents, want) {
		t.Fatalf("txnindex file %+v %v", ents, err)
	}
	if got := readCommittedAll(t, l); len(got) != 4 {
		t.Fatalf("read committed %d batches", len(got))
	}

	// Commit: no index entry; a marker without an open txn is still written.
	mustAppend(t, l, mkTxnBatch(t, 2, "b", 2, 0, 0)) // 7-8
	if l.LastStableOffset() != 7 {
		t.Fatalf("LSO %d", l.LastStableOffset())
	}
	mustMarker(t, l, 2, 0, true) // 9
	off := mustMarker(t, l, 3, 0, false)
	if off != 10 || l.LastStableOffset() != 11 {
		t.Fatalf("marker without txn at %d, LSO %d", off, l.LastStableOffset())
	}
	if got := l.AbortedTransactions(0, 100); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted after commit %+v", got)
	}
	if got := l.AbortedTransactions(abortAt+1, 100); len(got) != 0 {
		t.Fatalf("aborted past the marker %+v", got)
	}
	if got := l.AbortedTransactions(0, 0); len(got) != 0 {
		t.Fatalf("aborted before first offset %+v", got)
	}

	// Clean restart: entries from the file, producer state from snapshot.
	l.Close()
	l = openTest(t, fsys, dir, txnConfig(), true)
	if got := l.AbortedTransactions(0, 100); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted after reopen %+v", got)
	}
	if ps := l.Producers(); len(ps) != 3 || ps[2].ProducerID != 3 || ps[2].CoordinatorEpoch != 1 || ps[2].LastSequence != -1 {
		t.Fatalf("producers after reopen %+v", ps)
	}
}

func TestTxnInvalidTxnStateAndProducers(t *testing.T) {
	testNow := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewManual(testNow)
	l, err := Open("/d/ts-0", [16]byte{}, txnConfig(), false, Options{FS: vfs.NewCrashFS(), Logger: quiet, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, mkTxnBatch(t, 2, "t", 7, 3, 0))
	leo := l.LogEndOffset()
	if _, err := l.Append(mkBatchP(t, 1, "x", 1, 7, 3, 2), AppendOptions{}); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("non-transactional batch in open txn: %v", err)
	}
	if l.LogEndOffset() != leo {
		t.Fatal("rejected batch was written")
	}
	// The rejected batch changed no sequence: seq 2 is still next.
	mustAppend(t, l, mkTxnBatch(t, 1, "t", 7, 3, 2))
	if _, err := l.Append(mkTxnBatch(t, 1, "t", 7, 2, 3), AppendOptions{}); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	// Transactional batch without a producer id.
	if _, err := l.Append(mkTxnBatch(t, 1, "t", -1, -1, -1), AppendOptions{}); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("transactional without producer id: %v", err)
	}
	want := []ProducerInfo{{ProducerID: 7, Epoch: 3, LastSequence: 2, LastTimestamp: testNow.UnixMilli(), CoordinatorEpoch: -1, CurrentTxnStartOffset: 0}}
	if got := l.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("producers %+v want %+v", got, want)
	}
	mustMarker(t, l, 7, 3, true)
	// After the commit, plain idempotent data from the same producer is fine.
	mustAppend(t, l, mkBatchP(t, 1, "x", 1, 7, 3, 3))
	if got := l.Producers()[0]; got.CurrentTxnStartOffset != -1 || got.LastSequence != 3 || got.CoordinatorEpoch != 1 {
		t.Fatalf("producer after commit %+v", got)
	}
}

// TestTxnCoordinatorOrigin covers the group coordinator's transactional
// offset commits: baseSequence -1, no sequence checks, txn opened.
func TestTxnCoordinatorOrigin(t *testing.T) {
	fsys := vfs.NewCrashFS()
	dir := "/d/__consumer_offsets-3"
	l := openTest(t, fsys, dir, txnConfig(), false)
	b := mkTxnBatch(t, 2, "offsets", 11, 0, -1)
	if _, err := l.Append(append([]byte(nil), b...), AppendOptions{}); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("baseSequence -1 from a client: %v", err)
	}
	r1, err := l.Append(append([]byte(nil), b...), AppendOptions{Coordinator: true, LeaderEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A second one (no sequence to check, not a duplicate).
	r2, err := l.Append(append([]byte(nil), b...), AppendOptions{Coordinator: true, LeaderEpoch: 1})
	if err != nil || r2.Duplicate || r2.BaseOffset != r1.LastOffset+1 {
		t.Fatalf("second coordinator batch %+v %v", r2, err)
	}
	if err := l.WaitDurable(context.Background(), r2.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if l.LastStableOffset() != r1.BaseOffset {
		t.Fatalf("LSO %d, want the txn start %d", l.LastStableOffset(), r1.BaseOffset)
	}
	if _, err := l.Append(mkTxnBatch(t, 1, "o", 11, 0, -1), AppendOptions{Coordinator: true}); err != nil {
		t.Fatalf("same epoch again: %v", err)
	}
	old := mkTxnBatch(t, 1, "o", 12, 5, -1)
	if _, err := l.Append(old, AppendOptions{Coordinator: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(mkTxnBatch(t, 1, "o", 12, 4, -1), AppendOptions{Coordinator: true}); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("coordinator batch with old epoch: %v", err)
	}
	if ps := l.Producers(); len(ps) != 2 || ps[0].LastSequence != -1 || ps[0].CurrentTxnStartOffset != r1.BaseOffset {
		t.Fatalf("producers %+v", ps)
	}
	mustMarker(t, l, 11, 0, true)
	mustMarker(t, l, 12, 5, false)
	if l.LastStableOffset() != l.HighWatermark() {
		t.Fatalf("LSO %d hw %d", l.LastStableOffset(), l.HighWatermark())
	}
	// Power cut: the snapshot-less replay rebuilds the same state.
	img := fsys.Crash()
	before := l.Producers()
	l.Close()
	l = openTest(t, img, dir, txnConfig(), false)
	defer l.Close()
	after := l.Producers()
	for i := range after {
		after[i].LastTimestamp, before[i].LastTimestamp = 0, 0 // replay uses batch timestamps
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("producers after power cut %+v, before %+v", after, before)
	}
	if got := l.AbortedTransactions(0, 100); len(got) != 1 || got[0].ProducerID != 12 {
		t.Fatalf("aborted %+v", got)
	}
}

// TestTxnLSOWaitsForDurableMarker: the LSO stays at a completed
// transaction's start until its marker is durable (Kafka's unreplicated
// transactions), so READ_COMMITTED never sees a decision a crash may undo.
func TestTxnLSOWaitsForDurableMarker(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := openTest(t, fsys, "/d/w-0", txnConfig(), false)
	defer l.Close()
	mustAppend(t, l, mkTxnBatch(t, 2, "t", 1, 0, 0))
	mustAppend(t, l, mkBatch(t, 2, "p", 1))
	gate := make(chan struct{})
	var blocking atomic.Bool
	blocking.Store(true)
	fsys.SetHook(func(op, name string) error {
		if op == "sync" && strings.HasSuffix(name, LogSuffix) && blocking.Load() {
			<-gate
		}
		return nil
	})
	defer fsys.SetHook(nil)
	off, err := l.AppendMarker(1, 0, 1, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	if l.HighWatermark() > off || l.LastStableOffset() != 0 {
		t.Fatalf("marker not durable yet: hw %d, LSO %d want 0", l.HighWatermark(), l.LastStableOffset())
	}
	if res, err := l.ReadCommitted(0, 1<<20, true); err != nil || len(res.Chunks) != 0 {
		t.Fatalf("read committed before the marker is durable: %+v %v", res, err)
	}
	ch := l.HighWatermarkChanged()
	blocking.Store(false)
	close(gate)
	if err := l.WaitDurable(context.Background(), off+1); err != nil {
		t.Fatal(err)
	}
	<-ch
	if l.LastStableOffset() != off+1 {
		t.Fatalf("LSO %d after durable commit at %d", l.LastStableOffset(), off)
	}
	if got := readCommittedAll(t, l); len(got) != 3 {
		t.Fatalf("committed read %d batches", len(got))
	}
}

// txnModel tracks what the log must report about transactions.
type txnModel struct {
	leo     int64
	open    map[int64]int64
	aborted []AbortedTxn
	seq     map[int64]int32
}

func newTxnModel() *txnModel { return &txnModel{open: map[int64]int64{}, seq: map[int64]int32{}} }

func (m *txnModel) copy() *txnModel {
	c := &txnModel{leo: m.leo, open: map[int64]int64{}, seq: map[int64]int32{}, aborted: append([]AbortedTxn(nil), m.aborted...)}
	for k, v := range m.open {
		c.open[k] = v
	}
	for k, v := range m.seq {
		c.seq[k] = v
	}
	return c
}

func (m *txnModel) firstOpen() int64 {
	first := int64(-1)
	for _, f := range m.open {
		if first < 0 || f < first {
			first = f
		}
	}
	return first
}

func (m *txnModel) lso() int64 {
	if f := m.firstOpen(); f >= 0 {
		return f
	}
	return m.leo
}

// step applies one random operation to l and the model.
func (m *txnModel) step(t *testing.T, l *Log, op int, pid int64) {
	t.Helper()
	switch {
	case op < 5: // transactional data
		n := 1 + int(pid)%3
		r := mustAppend(t, l, mkTxnBatch(t, n, "t", pid, 0, m.seq[pid]))
		m.seq[pid] += int32(n)
		if _, ok := m.open[pid]; !ok {
			m.open[pid] = r.BaseOffset
		}
		m.leo = r.LastOffset + 1
	case op < 7: // plain data
		r := mustAppend(t, l, mkBatch(t, 2, "p", 1))
		m.leo = r.LastOffset + 1
	default: // marker
		commit := op == 7
		off := mustMarker(t, l, pid, 0, commit)
		m.leo = off + 1
		first, ok := m.open[pid]
		delete(m.open, pid)
		if ok && !commit {
			lso := m.firstOpen()
			if lso < 0 {
				lso = off + 1
			}
			m.aborted = append(m.aborted, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: off, LastStableOffset: lso})
		}
	}
}

// check compares the log's transaction state with the model.
func (m *txnModel) check(t *testing.T, what string, l *Log, fsys vfs.FS, dir string) {
	t.Helper()
	if l.LogEndOffset() != m.leo {
		t.Fatalf("%s: leo %d want %d", what, l.LogEndOffset(), m.leo)
	}
	if got := l.LastStableOffset(); got != m.lso() {
		t.Fatalf("%s: LSO %d want %d", what, got, m.lso())
	}
	got := l.AbortedTransactions(0, m.leo+1)
	if len(got) != len(m.aborted) || (len(got) > 0 && !reflect.DeepEqual(got, m.aborted)) {
		t.Fatalf("%s: aborted\n%+v\nwant\n%+v", what, got, m.aborted)
	}
	// Every sub-range agrees with a plain filter of the model.
	for from := int64(0); from <= m.leo; from += 3 {
		for to := from; to <= m.leo+1; to += 5 {
			var want []AbortedTxn
			for _, e := range m.aborted {
				if e.LastOffset >= from && e.FirstOffset < to {
					want = append(want, e)
				}
			}
			if got := l.AbortedTransactions(from, to); len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
				t.Fatalf("%s: AbortedTransactions(%d, %d) = %+v want %+v", what, from, to, got, want)
			}
		}
	}
	for _, p := range l.Producers() {
		want, ok := m.open[p.ProducerID]
		if !ok {
			want = -1
		}
		if p.CurrentTxnStartOffset != want {
			t.Fatalf("%s: producer %d txn start %d want %d", what, p.ProducerID, p.CurrentTxnStartOffset, want)
		}
	}
	// The .txnindex files hold exactly the entries, each in the segment of
	// its marker.
	var onDisk []AbortedTxn
	segs := l.Segments()
	for i, s := range segs {
		data, err := vfs.ReadFile(fsys, filepath.Join(dir, FileName(s.BaseOffset, TxnIndexSuffix)))
		if errNotExist(err) {
			continue
		}
		ents, err := ParseTxnIndex(data)
		if err != nil {
			t.Fatalf("%s: segment %d txnindex: %v", what, s.BaseOffset, err)
		}
		if len(ents) == 0 {
			t.Fatalf("%s: empty txnindex for segment %d", what, s.BaseOffset)
		}
		for _, e := range ents {
			if e.LastOffset < s.BaseOffset || (i+1 < len(segs) && e.LastOffset >= segs[i+1].BaseOffset) {
				t.Fatalf("%s: entry %+v in segment %d", what, e, s.BaseOffset)
			}
		}
		onDisk = append(onDisk, ents...)
	}
	if len(onDisk) != len(m.aborted) || (len(onDisk) > 0 && !reflect.DeepEqual(onDisk, m.aborted)) {
		t.Fatalf("%s: txnindex files\n%+v\nwant\n%+v", what, onDisk, m.aborted)
	}
	for _, b := range readCommittedAll(t, l) {
		if b.LastOffset() >= m.lso() {
			t.Fatalf("%s: committed read past LSO", what)
		}
	}
}

// FuzzAppendCoordinator feeds arbitrary coordinator payloads (markers,
// sequence-less transactional batches) to a log with an open transaction:
// no panic, a rejected payload writes nothing, and a power cut right after
// rebuilds the same transaction state.
func FuzzAppendCoordinator(f *testing.F) {
	marker := func(commit bool, pid int64, epoch int16) []byte {
		return recordtest.Marker(record.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, PartitionLeaderEpoch: -1}, commit, 2)
	}
	f.Add(marker(false, 1, 0))
	f.Add(marker(true, 1, 0))
	f.Add(marker(false, 2, 7))
	leaderChange := recordtest.Batch(record.BatchHeader{Attributes: record.AttrTransactional | record.AttrControl, ProducerID: 1,
		BaseSequence: -1, PartitionLeaderEpoch: -1}, record.EndTxnMarker(record.ControlLeaderChange, 2))
	f.Add([]byte(leaderChange))
	f.Add(mkTxnBatch(f, 2, "o", 3, 0, -1))
	bad, _ := record.Build(record.BatchHeader{Attributes: record.AttrControl, ProducerID: 1, BaseSequence: -1, PartitionLeaderEpoch: -1},
		[]record.Record{{Key: []byte{0}, Value: nil}})
	f.Add(bad)
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := vfs.NewCrashFS()
		l, err := Open("/f/co-0", [16]byte{}, txnConfig(), false, Options{FS: fsys, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Append(mkTxnBatch(t, 2, "t", 1, 0, 0), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		leo := l.LogEndOffset()
		if _, err := l.Append(append([]byte(nil), data...), AppendOptions{Coordinator: true}); err != nil {
			if l.LogEndOffset() != leo {
				t.Fatalf("rejected append moved the log end: %v", err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, e := range l.AbortedTransactions(0, 1<<62) {
			if e.LastOffset < leo || e.LastOffset >= l.LogEndOffset() || e.FirstOffset != 0 {
				t.Fatalf("bad entry %+v (log end %d)", e, l.LogEndOffset())
			}
		}
		lso, aborted, producers := l.LastStableOffset(), l.AbortedTransactions(0, 1<<62), l.Producers()
		img := fsys.Crash()
		r, err := Open("/f/co-0", [16]byte{}, txnConfig(), false, Options{FS: img, Logger: quiet})
		if err != nil {
			t.Fatalf("recover: %v", err)
		}
		defer r.Close()
		if r.LastStableOffset() != lso || !reflect.DeepEqual(r.AbortedTransactions(0, 1<<62), aborted) {
			t.Fatalf("after power cut: LSO %d aborted %+v; before %d %+v", r.LastStableOffset(), r.AbortedTransactions(0, 1<<62), lso, aborted)
		}
		got := r.Producers()
		if len(got) != len(producers) {
			t.Fatalf("producers after power cut %+v, before %+v", got, producers)
		}
		for i := range got {
			if got[i].ProducerID != producers[i].ProducerID || got[i].CurrentTxnStartOffset != producers[i].CurrentTxnStartOffset ||
				got[i].Epoch != producers[i].Epoch || got[i].CoordinatorEpoch != producers[i].CoordinatorEpoch {
				t.Fatalf("producers after power cut %+v, before %+v", got, producers)
			}
		}
	})
}

// TestTxnConcurrentReaders runs READ_COMMITTED readers against a writer
// with transactional traffic: a reader never gets a batch at or past the
// LSO it was told, and the LSO never moves back.
func TestTxnConcurrentReaders(t *testing.T) {
	cfg := txnConfig()
	cfg.SegmentBytes = 1200
	fsys := vfs.NewCrashFS()
	l := openTest(t, fsys, "/d/cr-0", cfg, false)
	defer l.Close()
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		go func() {
			var last int64
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				lso := l.LastStableOffset()
				if lso < last {
					errs <- fmt.Errorf("LSO moved back from %d to %d", last, lso)
					return
				}
				last = lso
				res, err := l.ReadCommitted(max(0, lso-40), 4096, true)
				if err != nil {
					errs <- err
					return
				}
				if res.LastStableOffset > res.HighWatermark {
					errs <- fmt.Errorf("LSO %d above hw %d", res.LastStableOffset, res.HighWatermark)
					return
				}
				for _, c := range res.Chunks {
					buf := make([]byte, c.Len)
					c.File.File().ReadAt(buf, c.Pos)
					for len(buf) > 0 {
						b, rest, err := record.Next(buf)
						if err != nil {
							errs <- err
							return
						}
						if b.LastOffset() >= res.LastStableOffset {
							errs <- fmt.Errorf("batch [%d,%d] at LSO %d", b.BaseOffset(), b.LastOffset(), res.LastStableOffset)
							return
						}
						buf = rest
					}
				}
				res.Release()
				for _, e := range l.AbortedTransactions(max(0, lso-40), lso) {
					if e.FirstOffset > e.LastOffset {
						errs <- fmt.Errorf("bad entry %+v", e)
						return
					}
				}
			}
		}()
	}
	m := newTxnModel()
	rng := rand.New(rand.NewPCG(1, 2))
	runTxnWorkload(t, l, m, rng, 200, nil)
	close(stop)
	for r := 0; r < 3; r++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	m.check(t, "after", l, fsys, "/d/cr-0")
}

// TestTxnSnapshotKeepsOpenTxn: the snapshot taken at a roll holds the open
// transaction's first offset (and marker-only producers, lastOffset -1);
// a restart that loads it (no scan of the txn's start) still knows the
// transaction, and its ABORT gets the right .txnindex entry.
func TestTxnSnapshotKeepsOpenTxn(t *testing.T) {
	fsys := vfs.NewCrashFS()
	dir := "/d/snap-0"
	l := openTest(t, fsys, dir, txnConfig(), false)
	r := mustAppend(t, l, mkTxnBatch(t, 2, "t", 4, 1, 0))
	mustMarker(t, l, 6, 2, true) // producer 6: marker only
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	base := l.LogEndOffset()
	data, err := vfs.ReadFile(fsys, filepath.Join(dir, FileName(base, SnapshotSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := parseSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if e := ps.m[4]; e == nil || e.txnFirstOffset != r.BaseOffset || ps.firstOpen() != r.BaseOffset {
		t.Fatalf("snapshot entry of producer 4: %+v", e)
	}
	if e := ps.m[6]; e == nil || len(e.batches) != 0 || e.epoch != 2 || e.coordinatorEpoch != 1 {
		t.Fatalf("snapshot entry of producer 6: %+v", e)
	}
	mustAppend(t, l, mkBatch(t, 1, "p", 1))
	img := fsys.Crash()
	l.Close()
	// Recovery starts at the rolled segment (the recovery point) with the
	// snapshot there: only the snapshot knows where the txn started.
	l = openTest(t, img, dir, txnConfig(), false)
	defer l.Close()
	if l.LastStableOffset() != r.BaseOffset {
		t.Fatalf("LSO %d want %d", l.LastStableOffset(), r.BaseOffset)
	}
	at := mustMarker(t, l, 4, 1, false)
	want := []AbortedTxn{{ProducerID: 4, FirstOffset: r.BaseOffset, LastOffset: at, LastStableOffset: at + 1}}
	if got := l.AbortedTransactions(0, at+1); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %+v want %+v", got, want)
	}
}
