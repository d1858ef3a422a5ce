package storage

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/vfs"
)

func TestIdempotentProducer(t *testing.T) {
	fsys := vfs.NewCrashFS()
	dir := "/d/idem-0"
	cfg := testConfig()
	l := openTest(t, fsys, dir, cfg, false)
	r1 := mustAppend(t, l, mkBatchP(t, 3, "a", 1, 7, 0, 0))
	r2 := mustAppend(t, l, mkBatchP(t, 2, "b", 1, 7, 0, 3))
	// Duplicate resend of either recent batch: original offsets, nothing written.
	leo := l.LogEndOffset()
	for _, c := range []struct {
		seq  int32
		n    int
		want AppendResult
	}{{0, 3, r1}, {3, 2, r2}} {
		res, err := l.Append(mkBatchP(t, c.n, "dup", 1, 7, 0, c.seq), AppendOptions{})
		if err != nil || !res.Duplicate || res.BaseOffset != c.want.BaseOffset || res.LastOffset != c.want.LastOffset {
			t.Fatalf("dup seq %d: %+v %v", c.seq, res, err)
		}
	}
	if l.LogEndOffset() != leo {
		t.Fatal("duplicate wrote data")
	}
	// Gap.
	if _, err := l.Append(mkBatchP(t, 1, "gap", 1, 7, 0, 9), AppendOptions{}); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("gap: %v", err)
	}
	// Stale epoch.
	if _, err := l.Append(mkBatchP(t, 1, "old", 1, 7, -1+0, 5), AppendOptions{}); err != nil && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	// New epoch must start at 0.
	if _, err := l.Append(mkBatchP(t, 1, "e1", 1, 7, 1, 4), AppendOptions{}); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("new epoch seq 4: %v", err)
	}
	mustAppend(t, l, mkBatchP(t, 1, "e1", 1, 7, 1, 0))
	if _, err := l.Append(mkBatchP(t, 1, "e0", 1, 7, 0, 5), AppendOptions{}); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("old epoch after bump: %v", err)
	}
	r3 := mustAppend(t, l, mkBatchP(t, 2, "e1b", 1, 7, 1, 1))
	if got := l.ActiveProducerLastBatches()[7]; got != r3.LastOffset {
		t.Fatalf("last batch %d want %d", got, r3.LastOffset)
	}

	// Dedup survives a clean restart (snapshot) and a power cut (scan).
	check := func(l *Log, what string) {
		res, err := l.Append(mkBatchP(t, 2, "dup", 1, 7, 1, 1), AppendOptions{})
		if err != nil || !res.Duplicate || res.BaseOffset != r3.BaseOffset {
			t.Fatalf("%s: dedup lost: %+v %v", what, res, err)
		}
		if _, err := l.Append(mkBatchP(t, 1, "gap", 1, 7, 1, 9), AppendOptions{}); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
			t.Fatalf("%s: gap after restart: %v", what, err)
		}
	}
	l.Roll()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, fsys, dir, cfg, true)
	check(l, "clean restart")
	img := fsys.Crash()
	l.Close()
	l = openTest(t, img, dir, cfg, false)
	check(l, "power cut")
	l.Close()
	// Without any snapshot the state is rebuilt by scanning the log.
	for _, f := range img.Files() {
		if hasSuffix(f, SnapshotSuffix) {
			img.Remove(f)
		}
	}
	l = openTest(t, img, dir, cfg, false)
	check(l, "no snapshots")
	l.Close()
}

func TestProducerExpiration(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	l, err := Open("/d/exp-0", [16]byte{}, testConfig(), false, Options{FS: vfs.NewCrashFS(), Clock: clk, ProducerIDExpiration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, mkBatchP(t, 1, "a", 1, 5, 0, 0))
	clk.Advance(2 * time.Second)
	l.MaybeRoll(clk.Now())
	if _, ok := l.ActiveProducerLastBatches()[5]; ok {
		t.Fatal("producer not expired")
	}
	// An expired producer may continue at any sequence.
	mustAppend(t, l, mkBatchP(t, 1, "b", 1, 5, 0, 40))
}

func TestAppendValidation(t *testing.T) {
	l := openTest(t, vfs.NewCrashFS(), "/d/val-0", testConfig(), false)
	defer l.Close()
	good := mkBatch(t, 2, "g", 1)
	cases := []struct {
		name string
		mod  func() []byte
		opts AppendOptions
		want error
	}{
		{"empty", func() []byte { return nil }, AppendOptions{}, kerr.InvalidRecord},
		{"crc", func() []byte { b := append([]byte(nil), good...); b[len(b)-1] ^= 1; return b }, AppendOptions{}, kerr.CorruptMessage},
		{"torn", func() []byte { return good[:len(good)-3] }, AppendOptions{}, kerr.CorruptMessage},
		{"magic", func() []byte { b := append([]byte(nil), good...); b[16] = 1; return b }, AppendOptions{}, kerr.CorruptMessage},
		{"baseOffset", func() []byte {
			b := append(record.Batch(nil), good...)
			b.SetBaseOffset(5)
			return b
		}, AppendOptions{}, kerr.InvalidRecord},
		{"tooLarge", func() []byte { return mkBatch(t, 40, string(make([]byte, 30)), 1) }, AppendOptions{}, kerr.MessageTooLarge},
		{"listTooLarge", func() []byte {
			var all []byte
			for i := 0; i < 40; i++ {
				all = append(all, mkBatch(t, 3, "big", 1)...)
			}
			return all
		}, AppendOptions{}, kerr.RecordListTooLarge},
		{"control", func() []byte {
			b, _ := record.Build(record.BatchHeader{Attributes: record.AttrControl, ProducerID: -1, BaseSequence: -1}, []record.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}})
			return b
		}, AppendOptions{}, kerr.InvalidRecord},
		{"nullKey", func() []byte {
			b, _ := record.Build(record.BatchHeader{LastOffsetDelta: 1, ProducerID: -1, BaseSequence: -1}, []record.Record{{Key: []byte("k"), Value: []byte("v")}, {OffsetDelta: 1, Value: []byte("v")}})
			return b
		}, AppendOptions{RequireKeys: true}, kerr.InvalidRecord},
	}
	for _, c := range cases {
		cfg := testConfig()
		cfg.MaxMessageBytes = 1000
		l.UpdateConfig(cfg)
		res, err := l.Append(c.mod(), c.opts)
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: got %v want %v", c.name, err, c.want)
		}
		if l.LogEndOffset() != 0 || l.Size() != 0 {
			t.Fatalf("%s: rejected batch left bytes behind", c.name)
		}
		if c.name == "nullKey" && (len(res.RecordErrors) != 1 || res.RecordErrors[0].Index != 1) {
			t.Fatalf("nullKey: record errors %+v", res.RecordErrors)
		}
	}
	// A multi-batch request with one bad batch appends nothing.
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1
	if _, err := l.Append(append(append([]byte(nil), good...), bad...), AppendOptions{}); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("multi: %v", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatal("partial multi-batch append")
	}
	// Two good batches append together.
	res, err := l.Append(append(mkBatch(t, 2, "a", 1), mkBatch(t, 3, "b", 1)...), AppendOptions{})
	if err != nil || res.BaseOffset != 0 || res.LastOffset != 4 {
		t.Fatalf("multi good: %+v %v", res, err)
	}
	// LogAppendTime rewrites maxTimestamp and keeps the CRC valid.
	cfg := testConfig()
	cfg.LogAppendTime = true
	l.UpdateConfig(cfg)
	res, err = l.Append(mkBatch(t, 2, "lat", 1), AppendOptions{})
	if err != nil || res.LogAppendTime < 0 {
		t.Fatalf("lat: %+v %v", res, err)
	}
	l.Flush()
	bs := readAll(t, l, res.BaseOffset)
	if bs[0].MaxTimestamp() != res.LogAppendTime || !bs[0].IsLogAppendTime() {
		t.Fatalf("lat: max ts %d", bs[0].MaxTimestamp())
	}
}

func TestTransactionStateAcrossRestart(t *testing.T) {
	fsys := vfs.NewCrashFS()
	dir := "/d/txn-0"
	l := openTest(t, fsys, dir, testConfig(), false)
	b, _ := record.Build(record.BatchHeader{Attributes: record.AttrTransactional, ProducerID: 9, ProducerEpoch: 0, BaseSequence: 0, PartitionLeaderEpoch: -1},
		[]record.Record{{Key: []byte("k"), Value: []byte("v")}})
	r := mustAppend(t, l, b)
	open := func() int64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if err := l.loadProducers(); err != nil { // left to its first use by the open
			t.Fatal(err)
		}
		return l.ps.m[9].txnFirstOffset
	}
	if open() != r.BaseOffset {
		t.Fatalf("open txn first offset %d", open())
	}
	if l.LastStableOffset() != r.BaseOffset {
		t.Fatalf("LSO %d want %d", l.LastStableOffset(), r.BaseOffset)
	}
	img := fsys.Crash()
	l.Close()
	l = openTest(t, img, dir, testConfig(), false)
	if open() != r.BaseOffset {
		t.Fatalf("after power cut: open txn first offset %d", open())
	}
	// COMMIT marker from the coordinator closes it.
	m := recordtest.Marker(record.BatchHeader{ProducerID: 9, PartitionLeaderEpoch: -1}, true, 0)
	if _, err := l.Append(m, AppendOptions{}); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("control batch from a client: %v", err)
	}
	if _, err := l.Append(m, AppendOptions{Coordinator: true}); err != nil {
		t.Fatal(err)
	}
	if open() != -1 {
		t.Fatalf("marker did not close the txn: %d", open())
	}
	l.Flush()
	if l.LastStableOffset() != l.HighWatermark() {
		t.Fatalf("LSO %d after commit, hw %d", l.LastStableOffset(), l.HighWatermark())
	}
	l.Close()
	l = openTest(t, img, dir, testConfig(), true)
	defer l.Close()
	if open() != -1 {
		t.Fatalf("after restart: %d", open())
	}
}
