package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/vfs"
)

// rawBatches reads every stored batch of l from offset from to the log
// end, whatever the high watermark (what a leader serves a follower).
func rawBatches(t testing.TB, l *Log, from int64) []byte {
	t.Helper()
	v := *l.v.Load()
	last := v.segs[len(v.segs)-1]
	v.hw, v.hwBase, v.hwPos = v.leo, last.base, last.size.Load()
	var out []byte
	for off := from; off < v.leo; {
		res, err := l.read(&v, off, 1<<30, true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			break
		}
		for _, c := range res.Chunks {
			buf := make([]byte, c.Len)
			if _, err := c.File.File().ReadAt(buf, c.Pos); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			out = append(out, buf...)
			for rest := buf; len(rest) > 0; {
				b, r, err := record.Next(rest)
				if err != nil {
					t.Fatal(err)
				}
				off = b.LastOffset() + 1
				rest = r
			}
		}
		res.Release()
	}
	return out
}

// replicate copies everything the leader has past the follower's end.
func replicate(t testing.TB, leader, follower *Log) AppendResult {
	t.Helper()
	data := rawBatches(t, leader, follower.LogEndOffset())
	res, err := follower.AppendAsFollower(data)
	if err != nil {
		t.Fatalf("append as follower: %v", err)
	}
	return res
}

func openPair(t *testing.T, fsys vfs.FS, cfg Config) (leader, follower *Log) {
	t.Helper()
	leader = openTest(t, fsys, "/leader/t-0", cfg, false)
	follower = openTest(t, fsys, "/follower/t-0", cfg, false)
	t.Cleanup(func() { leader.Close(); follower.Close() })
	return leader, follower
}

// TestAppendAsFollowerKeepsLeaderOffsetsAndEpochs: the follower's log is
// byte-identical to the leader's, across epochs and segment rolls, and
// its leader epoch history matches.
func TestAppendAsFollowerKeepsLeaderOffsetsAndEpochs(t *testing.T) {
	leader, follower := openPair(t, vfs.NewCrashFS(), testConfig())
	for epoch := int32(0); epoch < 3; epoch++ {
		for i := 0; i < 20; i++ {
			if _, err := leader.Append(mkBatch(t, 1+i%5, fmt.Sprintf("e%d-%d", epoch, i), int64(i)), AppendOptions{LeaderEpoch: epoch}); err != nil {
				t.Fatal(err)
			}
		}
		replicate(t, leader, follower)
	}
	if !bytes.Equal(rawBatches(t, leader, 0), rawBatches(t, follower, 0)) {
		t.Fatal("follower log differs from the leader's")
	}
	if follower.LogEndOffset() != leader.LogEndOffset() || len(follower.Segments()) < 2 {
		t.Fatalf("follower end %d (leader %d), %d segments", follower.LogEndOffset(), leader.LogEndOffset(), len(follower.Segments()))
	}
	if fmt.Sprint(follower.LeaderEpochs()) != fmt.Sprint(leader.LeaderEpochs()) || follower.LatestEpoch() != 2 {
		t.Fatalf("epochs %v, leader %v", follower.LeaderEpochs(), leader.LeaderEpochs())
	}
	for e := int32(0); e < 4; e++ {
		fe, fo := follower.EndOffsetForEpoch(e)
		le, lo := leader.EndOffsetForEpoch(e)
		if fe != le || fo != lo {
			t.Errorf("epoch %d: follower (%d, %d), leader (%d, %d)", e, fe, fo, le, lo)
		}
	}
}

// TestAppendAsFollowerChecks: a corrupt batch, batches out of order or
// below the log end change nothing; a trailing partial batch is left out;
// a compacted gap is accepted.
func TestAppendAsFollowerChecks(t *testing.T) {
	_, f := openPair(t, vfs.NewCrashFS(), testConfig())
	at := func(base int64, epoch int32, n int) record.Batch {
		b := record.Batch(mkBatch(t, n, fmt.Sprint(base), 1))
		b.SetBaseOffset(base)
		b.SetPartitionLeaderEpoch(epoch)
		b.SetCRC()
		return b
	}
	if _, err := f.AppendAsFollower(at(0, 1, 3)); err != nil {
		t.Fatal(err)
	}
	bad := at(3, 1, 2)
	bad[len(bad)-1] ^= 0xff
	if _, err := f.AppendAsFollower(bad); !errors.Is(err, kerr.CorruptMessage) {
		t.Errorf("corrupt batch: %v", err)
	}
	if _, err := f.AppendAsFollower(at(1, 1, 2)); !errors.Is(err, ErrUnexpectedOffset) {
		t.Errorf("batch below the log end: %v", err)
	}
	two := append(append([]byte(nil), at(3, 1, 2)...), at(4, 1, 2)...)
	if _, err := f.AppendAsFollower(two); !errors.Is(err, ErrUnexpectedOffset) {
		t.Errorf("overlapping batches: %v", err)
	}
	if f.LogEndOffset() != 3 {
		t.Fatalf("refused appends changed the log end: %d", f.LogEndOffset())
	}
	// A whole batch then half of the next: only the whole one goes in.
	next := at(3, 1, 2)
	partial := append(append([]byte(nil), next...), at(5, 2, 4)[:30]...)
	res, err := f.AppendAsFollower(partial)
	if err != nil || res.BaseOffset != 3 || res.LastOffset != 4 || f.LogEndOffset() != 5 {
		t.Fatalf("partial tail: %+v %v, end %d", res, err, f.LogEndOffset())
	}
	// A compacted gap: the next batch starts at 9.
	if _, err := f.AppendAsFollower(at(9, 2, 1)); err != nil || f.LogEndOffset() != 10 {
		t.Fatalf("gap: %v, end %d", err, f.LogEndOffset())
	}
	if e, o := f.EndOffsetForEpoch(1); e != 1 || o != 9 {
		t.Errorf("epoch 1 ends at (%d, %d), want (1, 9)", e, o)
	}
}

// TestAppendAsFollowerIntoEmptyLogBelowStart: the leader's log start is
// inside a batch (DeleteRecords); the follower's empty log restarts at the
// batch's base.
func TestAppendAsFollowerIntoEmptyLogBelowStart(t *testing.T) {
	_, f := openPair(t, vfs.NewCrashFS(), testConfig())
	if err := f.TruncateFullyAndStartAt(12); err != nil {
		t.Fatal(err)
	}
	b := record.Batch(mkBatch(t, 5, "x", 1))
	b.SetBaseOffset(10)
	b.SetPartitionLeaderEpoch(4)
	b.SetCRC()
	if _, err := f.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	if f.LogStartOffset() != 10 || f.LogEndOffset() != 15 {
		t.Fatalf("log [%d, %d), want [10, 15)", f.LogStartOffset(), f.LogEndOffset())
	}
}

// TestFollowerProducerState: idempotent and transactional state is
// rebuilt from replicated batches, so that the follower, once leader,
// still recognises a retried batch and continues sequences, and serves
// READ_COMMITTED reads with the leader's aborted transactions.
func TestFollowerProducerState(t *testing.T) {
	leader, follower := openPair(t, vfs.NewCrashFS(), testConfig())
	for i := int32(0); i < 4; i++ {
		if _, err := leader.Append(mkBatchP(t, 2, fmt.Sprint(i), 1, 7, 0, i*2), AppendOptions{LeaderEpoch: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// A transaction of producer 8, aborted.
	txn := record.Batch(mkBatchP(t, 1, "t", 1, 8, 0, 0))
	h := txn.Header()
	h.Attributes |= record.AttrTransactional
	recs, _ := txn.Records()
	if _, err := leader.Append(recordtest.Batch(h, recs...), AppendOptions{LeaderEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.AppendMarker(8, 0, 0, false, 1); err != nil {
		t.Fatal(err)
	}
	replicate(t, leader, follower)
	// The follower becomes leader at epoch 2: the producer retries its last
	// batch (sequence 6) and goes on with 8.
	if err := follower.AssignEpoch(2); err != nil {
		t.Fatal(err)
	}
	res, err := follower.Append(mkBatchP(t, 2, "3", 1, 7, 0, 6), AppendOptions{LeaderEpoch: 2})
	if err != nil || !res.Duplicate || res.BaseOffset != 6 {
		t.Fatalf("retried batch on the new leader: %+v %v", res, err)
	}
	if _, err := follower.Append(mkBatchP(t, 2, "5", 1, 7, 0, 9), AppendOptions{LeaderEpoch: 2}); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("sequence gap on the new leader: %v", err)
	}
	if _, err := follower.Append(mkBatchP(t, 2, "4", 1, 7, 0, 8), AppendOptions{LeaderEpoch: 2}); err != nil {
		t.Fatalf("next sequence on the new leader: %v", err)
	}
	fa, la := fmt.Sprint(follower.AbortedTransactions(0, 100)), fmt.Sprint(leader.AbortedTransactions(0, 100))
	if fa != la || fa == "[]" {
		t.Fatalf("aborted transactions: follower %s, leader %s", fa, la)
	}
}

// TestReplicatedHighWatermark: with SetHighWatermark the high watermark
// is replication's, readers stop there (a high watermark inside a batch
// hides that batch), it survives the fsynced end advancing, and the
// durable-end hook reports fsyncs.
func TestReplicatedHighWatermark(t *testing.T) {
	cfg := testConfig()
	syncer := NewSyncer(quiet)
	defer syncer.Close()
	l, err := Open("/d/t-0", [16]byte{}, cfg, false, Options{FS: vfs.NewCrashFS(), Syncer: syncer, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var durable atomic.Int64
	l.SetHighWatermark(0, func(end int64) { durable.Store(end) })
	for i := 0; i < 30; i++ {
		if _, err := l.Append(mkBatch(t, 3, fmt.Sprint(i), 1), AppendOptions{LeaderEpoch: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.DurableEnd() != 90 || durable.Load() != 90 {
		t.Fatalf("durable end %d, hook %d", l.DurableEnd(), durable.Load())
	}
	if l.HighWatermark() != 0 || len(readAll(t, l, 0)) != 0 {
		t.Fatalf("high watermark %d before replication set it", l.HighWatermark())
	}
	ch := l.HighWatermarkChanged()
	l.SetHighWatermark(31, nil) // inside the batch 30-32
	select {
	case <-ch:
	default:
		t.Fatal("no high watermark notification")
	}
	got := readAll(t, l, 0)
	if l.HighWatermark() != 31 || len(got) != 10 || got[9].LastOffset() != 29 {
		t.Fatalf("high watermark %d, %d batches read", l.HighWatermark(), len(got))
	}
	for _, hw := range []int64{60, 45, 90, 200} { // a segment boundary, a batch end, the end, beyond it
		l.SetHighWatermark(hw, nil)
		want := min(hw, 90)
		if hw == 45 {
			want = 60 // never back without a truncation
		}
		got := readAll(t, l, 0)
		if l.HighWatermark() != want || len(got) != int(want/3) {
			t.Fatalf("set %d: high watermark %d, %d batches read", hw, l.HighWatermark(), len(got))
		}
	}
	// A truncation moves it back.
	if _, err := l.TruncateTo(50); err != nil {
		t.Fatal(err)
	}
	if l.HighWatermark() != 48 || l.LogEndOffset() != 48 {
		t.Fatalf("after truncation: high watermark %d, end %d", l.HighWatermark(), l.LogEndOffset())
	}
	// Back to a high watermark that follows the fsynced end.
	l.UnsetReplicated()
	if l.HighWatermark() != 48 {
		t.Fatalf("unreplicated high watermark %d", l.HighWatermark())
	}
}

// TestAssignEpoch: a new leader's epoch starts at its log end before any
// write, so a follower holding a later epoch of an older leader finds
// where to truncate (KIP-279).
func TestAssignEpoch(t *testing.T) {
	l := openTest(t, vfs.NewCrashFS(), "/d/t-0", testConfig(), false)
	defer l.Close()
	if _, err := l.Append(mkBatch(t, 4, "a", 1), AppendOptions{LeaderEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpoch(3); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpoch(2); err != nil { // older: ignored
		t.Fatal(err)
	}
	if e, o := l.EndOffsetForEpoch(2); e != 1 || o != 4 {
		t.Fatalf("epoch 2 -> (%d, %d), want (1, 4)", e, o)
	}
	if e, o := l.EndOffsetForEpoch(3); e != 3 || o != 4 {
		t.Fatalf("epoch 3 -> (%d, %d), want (3, 4)", e, o)
	}
}

// TestTruncateAtEndDropsEmptyEpoch: a replica that led epoch 3 without
// appending (its epoch starts at its log end) and now follows a leader
// whose history diverges there truncates to its own log end: no record
// goes, but epoch 3 must, as Kafka's UnifiedLog.truncateTo always
// truncates the epoch cache. Kept, it stayed the follower's last fetched
// epoch, the leader answered the same diverging epoch at every fetch and
// the follower looped without ever catching up (seen after a cluster
// restart in TestBinaryClusterControllerKill).
func TestTruncateAtEndDropsEmptyEpoch(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := openTest(t, fsys, "/d/t-0", testConfig(), false)
	if _, err := l.Append(mkBatch(t, 4, "a", 1), AppendOptions{LeaderEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpoch(3); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.LeaderEpochs()); got != "[{1 0} {3 4}]" {
		t.Fatalf("epochs %s", got)
	}
	if end, err := l.TruncateTo(4); err != nil || end != 4 {
		t.Fatalf("truncate to the log end: %d %v", end, err)
	}
	if got := fmt.Sprint(l.LeaderEpochs()); got != "[{1 0}]" || l.LatestEpoch() != 1 {
		t.Fatalf("after truncating to the log end: epochs %s, latest %d; want only epoch 1", got, l.LatestEpoch())
	}
	l.Close()
	l = openTest(t, fsys, "/d/t-0", testConfig(), true)
	defer l.Close()
	if got := fmt.Sprint(l.LeaderEpochs()); got != "[{1 0}]" {
		t.Fatalf("after a restart: epochs %s", got)
	}
}

// TestTruncateFullyAndStartAt: nothing is left, the log restarts at the
// offset, and it stays so across a restart.
func TestTruncateFullyAndStartAt(t *testing.T) {
	fsys := vfs.NewCrashFS()
	cfg := testConfig()
	l := openTest(t, fsys, "/d/t-0", cfg, false)
	for i := 0; i < 40; i++ {
		if _, err := l.Append(mkBatchP(t, 2, fmt.Sprint(i), 1, 5, 0, int32(2*i)), AppendOptions{LeaderEpoch: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		if l.LogStartOffset() != 500 || l.LogEndOffset() != 500 || len(l.LeaderEpochs()) != 0 || len(l.Producers()) != 0 || len(l.Segments()) != 1 {
			t.Fatalf("log [%d, %d), epochs %v, %d producers, %d segments", l.LogStartOffset(), l.LogEndOffset(), l.LeaderEpochs(), len(l.Producers()), len(l.Segments()))
		}
	}
	check(l)
	b := record.Batch(mkBatch(t, 2, "y", 1))
	b.SetBaseOffset(500)
	b.SetPartitionLeaderEpoch(6)
	b.SetCRC()
	if _, err := l.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, fsys, "/d/t-0", cfg, true)
	defer l.Close()
	if l.LogStartOffset() != 500 || l.LogEndOffset() != 502 || l.LatestEpoch() != 6 {
		t.Fatalf("after restart: [%d, %d), epoch %d", l.LogStartOffset(), l.LogEndOffset(), l.LatestEpoch())
	}
	// Down to a lower offset (the leader's start is below: a new log).
	if err := l.TruncateFullyAndStartAt(3); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 3 || l.LogEndOffset() != 3 {
		t.Fatalf("[%d, %d)", l.LogStartOffset(), l.LogEndOffset())
	}
}

// TestFollowerPowerLoss: a follower that appended and fsynced part of what
// it fetched loses power: after recovery its log ends at or after its
// fsynced end, matches the leader below, and its epoch history is
// consistent with what it holds.
func TestFollowerPowerLoss(t *testing.T) {
	for round := 0; round < 5; round++ {
		fsys := vfs.NewCrashFS()
		cfg := testConfig()
		leader := openTest(t, fsys, "/l/t-0", cfg, false)
		f := openTest(t, fsys, "/f/t-0", cfg, false)
		var durable int64
		for i := 0; i < 12; i++ {
			if _, err := leader.Append(mkBatch(t, 1+i%3, fmt.Sprint(i), 1), AppendOptions{LeaderEpoch: int32(i / 4)}); err != nil {
				t.Fatal(err)
			}
			replicate(t, leader, f)
			if i%4 == round%4 {
				if err := f.Flush(); err != nil {
					t.Fatal(err)
				}
				durable = f.DurableEnd()
			}
		}
		img := fsys.Crash()
		leader.Close()
		f.Close()
		f2 := openTest(t, img, "/f/t-0", cfg, false)
		if f2.LogEndOffset() < durable {
			t.Fatalf("round %d: recovered end %d below the fsynced end %d", round, f2.LogEndOffset(), durable)
		}
		got := rawBatches(t, f2, 0)
		if want := rawBatches(t, leader2(t, fsys, cfg), 0); !bytes.HasPrefix(want, got) {
			t.Fatalf("round %d: recovered follower log is not a prefix of the leader's", round)
		}
		for _, e := range f2.LeaderEpochs() {
			if e.StartOffset >= f2.LogEndOffset() && f2.LogEndOffset() > 0 {
				t.Fatalf("round %d: epoch %+v starts past the log end %d", round, e, f2.LogEndOffset())
			}
		}
		f2.Close()
	}
}

// leader2 reopens the leader's log of the pre-crash file system (it was
// fsynced at close).
func leader2(t *testing.T, fsys vfs.FS, cfg Config) *Log {
	l := openTest(t, fsys, "/l/t-0", cfg, false)
	t.Cleanup(func() { l.Close() })
	return l
}

// TestWaitDurableReplicated: an acks=all waiter of a replicated log is
// released by the high watermark replication sets, not by its own fsync.
func TestWaitDurableReplicated(t *testing.T) {
	l := openTest(t, vfs.NewCrashFS(), "/d/t-0", testConfig(), false)
	defer l.Close()
	l.SetHighWatermark(0, nil)
	res, err := l.Append(mkBatch(t, 2, "a", 1), AppendOptions{LeaderEpoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.HighWatermark() != 0 {
		t.Fatalf("the log's own fsync moved a replicated high watermark to %d", l.HighWatermark())
	}
	done := make(chan error, 1)
	go func() { done <- l.WaitDurable(context.Background(), res.LastOffset+1) }()
	l.SetHighWatermark(res.LastOffset+1, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// FuzzAppendAsFollower: whatever a leader (or a corrupted network) sends,
// the follower either appends whole valid batches that continue its log
// or changes nothing, and the log reopens to the same end.
func FuzzAppendAsFollower(f *testing.F) {
	valid := record.Batch(mkBatchP(f, 3, "v", 1, 4, 0, 0))
	valid.SetBaseOffset(2)
	valid.SetPartitionLeaderEpoch(1)
	valid.SetCRC()
	f.Add([]byte(valid))
	f.Add(append(append([]byte(nil), valid...), valid[:20]...))
	f.Add([]byte(recordtest.Marker(record.BatchHeader{BaseOffset: 2, ProducerID: 4}, true, 0)))
	f.Add([]byte("not a batch at all, but long enough to look like a header......"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := vfs.NewCrashFS()
		l := openTest(t, fsys, "/d/t-0", testConfig(), false)
		b := record.Batch(mkBatch(t, 2, "a", 1))
		b.SetPartitionLeaderEpoch(0)
		b.SetCRC()
		if _, err := l.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
		before := l.LogEndOffset()
		res, err := l.AppendAsFollower(data)
		end := l.LogEndOffset()
		if err != nil && end != before {
			t.Fatalf("failed append moved the end %d -> %d", before, end)
		}
		if err == nil && res.BaseOffset >= 0 && (res.BaseOffset < before || end != res.LastOffset+1) {
			t.Fatalf("appended %+v from end %d to %d", res, before, end)
		}
		for _, rb := range readAll(t, func() *Log { l.SetHighWatermark(end, nil); return l }(), 0) {
			if err := record.ValidateStored(rb); err != nil {
				t.Fatalf("stored an invalid batch: %v", err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2 := openTest(t, fsys, "/d/t-0", testConfig(), false)
		defer l2.Close()
		if l2.LogEndOffset() != end {
			t.Fatalf("reopened at %d, was %d", l2.LogEndOffset(), end)
		}
	})
}
