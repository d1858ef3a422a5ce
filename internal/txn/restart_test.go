package txn

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/record"
)

// TestRestartReplay replays every state from real logs after a restart.
func TestRestartReplay(t *testing.T) {
	h := newHarness(t)
	ids := []string{"empty", "ongoing", "committed", "aborted", "bumped"}
	pids := map[string]int64{}
	for _, id := range ids {
		pids[id], _ = h.init(id)
	}
	h.init("bumped")
	h.init("bumped")
	h.add("ongoing", pids["ongoing"], 0, tp("a", 0), tp("b", 2))
	wantCode(t, "offsets", h.addOffsets(3, "ongoing", pids["ongoing"], 0, "g"), nil)
	h.add("committed", pids["committed"], 0, tp("a", 1))
	wantCode(t, "commit", h.end(4, "committed", pids["committed"], 0, true), nil)
	h.add("aborted", pids["aborted"], 0, tp("a", 1))
	wantCode(t, "abort", h.end(4, "aborted", pids["aborted"], 0, false), nil)
	before := map[string]kmsg.DescribeTransactionsResponseTransactionState{}
	for _, id := range ids {
		before[id] = h.describe(id)
	}
	h.d.takeMarkers()

	h.restart()
	if ms := h.d.takeMarkers(); len(ms) != 0 {
		t.Fatalf("markers rewritten for finished transactions: %+v", ms)
	}
	for _, id := range ids {
		got, want := h.describe(id), before[id]
		if got.ErrorCode != 0 || got.State != want.State || got.ProducerID != want.ProducerID ||
			got.ProducerEpoch != want.ProducerEpoch || got.StartTimestamp != want.StartTimestamp ||
			got.TimeoutMillis != want.TimeoutMillis || len(got.Topics) != len(want.Topics) {
			t.Fatalf("%s after restart: %+v, before %+v", id, got, want)
		}
	}
	h.wantState("bumped", "Empty", pids["bumped"], 2)
	// The ongoing transaction continues where it was.
	pid := pids["ongoing"]
	if err := h.c.VerifyProduce("ongoing", pid, 0, tp("b", 2)); err != nil {
		t.Fatalf("verify after restart: %v", err)
	}
	wantCode(t, "commit after restart", h.end(4, "ongoing", pid, 0, true), nil)
	ms := h.d.takeMarkers()
	want := []TopicPartition{tp("__consumer_offsets", 1), tp("a", 0), tp("b", 2)}
	if len(ms) != 1 || !ms[0].commit || !slices.Equal(ms[0].parts, want) {
		t.Fatalf("markers after restart: %+v", ms)
	}
	// New producer ids after restart come from Deps, the epochs go on.
	if p, e := h.init("committed"); p != pids["committed"] || e != 1 {
		t.Fatalf("re-init after restart: pid %d epoch %d", p, e)
	}
}

// TestCrashBetweenPrepareAndComplete: the markers of a PrepareCommit and
// PrepareAbort never made it; Load writes them and completes.
func TestCrashBetweenPrepareAndComplete(t *testing.T) {
	h := newHarness(t)
	cp, ce := h.init("c")
	ap, ae := h.init("a")
	h.add("c", cp, ce, tp("t", 0), tp("t", 1))
	h.add("a", ap, ae, tp("t", 2))
	h.d.set(func(d *testDeps) { d.markErr = errDisk })
	wantCode(t, "commit", h.end(4, "c", cp, ce, true), nil)
	wantCode(t, "abort", h.end(4, "a", ap, ae, false), nil)
	h.wantState("c", "PrepareCommit", cp, ce)
	h.wantState("a", "PrepareAbort", ap, ae)
	h.d.set(func(d *testDeps) { d.markErr = nil })

	h.restart()
	ms := h.d.takeMarkers()
	slices.SortFunc(ms, func(x, y markerCall) int { return int(x.pid - y.pid) })
	if len(ms) != 2 ||
		ms[0].pid != cp || !ms[0].commit || !slices.Equal(ms[0].parts, []TopicPartition{tp("t", 0), tp("t", 1)}) ||
		ms[1].pid != ap || ms[1].commit || !slices.Equal(ms[1].parts, []TopicPartition{tp("t", 2)}) {
		t.Fatalf("markers at load: %+v", ms)
	}
	h.wantState("c", "CompleteCommit", cp, ce)
	h.wantState("a", "CompleteAbort", ap, ae)
	h.restart()
	if ms := h.d.takeMarkers(); len(ms) != 0 {
		t.Fatalf("markers at second load: %+v", ms)
	}
	h.wantState("c", "CompleteCommit", cp, ce)
}

// TestCompleteRecordFails: the markers are written but the
// CompleteCommit record is not; the loop retries (markers written again)
// and a restart in between also finishes it.
func TestCompleteRecordFails(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 0))
	failComplete := func(_ int32, b []byte) error {
		var st state = -1
		if err := record.Batch(b).ForEachRecord(func(r *record.Record) error {
			sr, _, _ := decodeStateRecord(r.Key, r.Value)
			if sr.meta != nil {
				st = sr.meta.state
			}
			return nil
		}); err != nil {
			return err
		}
		if st == stateCompleteCommit {
			return errDisk
		}
		return nil
	}
	h.d.set(func(d *testDeps) { d.appendFn = failComplete })
	wantCode(t, "commit", h.end(4, "tx", pid, epoch, true), nil)
	h.wantState("tx", "PrepareCommit", pid, epoch)
	if ms := h.d.takeMarkers(); len(ms) != 1 {
		t.Fatalf("markers: %+v", ms)
	}
	h.c.retryUnfinished()
	h.wantState("tx", "PrepareCommit", pid, epoch)
	if ms := h.d.takeMarkers(); len(ms) != 1 || !ms[0].commit {
		t.Fatalf("retried markers: %+v", ms)
	}
	h.restart() // still failing: Load leaves it prepared
	h.wantState("tx", "PrepareCommit", pid, epoch)
	h.d.takeMarkers()
	h.d.set(func(d *testDeps) { d.appendFn = nil })
	h.c.retryUnfinished()
	h.wantState("tx", "CompleteCommit", pid, epoch)
}

// TestFenceSurvivesRestart: an abort by fencing persisted its bumped
// epoch, so the old producer stays fenced after a restart.
func TestFenceSurvivesRestart(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 0))
	h.clk.Advance(31000 * time.Millisecond)
	if n := h.c.abortTimedOut(); n != 1 {
		t.Fatalf("aborted %d", n)
	}
	h.restart()
	h.wantState("tx", "CompleteAbort", pid, epoch+1)
	wantCode(t, "old producer", h.end(4, "tx", pid, epoch, true), kerr.ProducerFenced)
}

// TestLoadSkipsForeignRecords: records of other key versions and garbage
// values are skipped, not fatal.
func TestLoadSkipsForeignRecords(t *testing.T) {
	h := newHarness(t)
	pid, _ := h.init("tx")
	p := PartitionFor("tx", testPartitions)
	foreign := []record.Record{
		{Key: []byte{0, 9, 1, 2}, Value: []byte{1}},          // another key version
		{Key: stateKey("tx"), Value: []byte{0, 0, 1}},        // truncated value
		{Key: stateKey("bad"), Value: []byte{0, 7, 0, 0, 0}}, // unknown value version
		{Key: []byte{0}, Value: nil},                         // short key
	}
	b, err := buildBatch(h.clk.Now(), foreign)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.StateAppend(context.Background(), p, b); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.wantState("tx", "Empty", pid, 0)
	wantCode(t, "bad", h.describe("bad").ErrorCode, kerr.TransactionalIDNotFound)
}

// TestLoopRuns starts and stops the owned loop.
func TestLoopRuns(t *testing.T) {
	h := newHarness(t)
	if err := h.c.Load(context.Background()); err == nil {
		t.Fatal("second Load succeeded")
	}
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCoordinatorEpoch: markers carry the leader epoch of the
// transactional id's __transaction_state partition, read at Load.
func TestCoordinatorEpoch(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("a", 0))
	wantCode(t, "commit", h.end(4, "tx", pid, epoch, true), nil)
	if ms := h.d.takeMarkers(); len(ms) != 1 || ms[0].coordEpoch != 0 {
		t.Fatalf("markers at epoch 0: %+v", ms)
	}
	h.d.leaderEpoch.Store(5)
	h.init("tx")
	h.restart()
	pid, epoch = h.init("tx")
	h.add("tx", pid, epoch, tp("a", 0))
	wantCode(t, "commit", h.end(4, "tx", pid, epoch, true), nil)
	if ms := h.d.takeMarkers(); len(ms) != 1 || ms[0].coordEpoch != 5 {
		t.Fatalf("markers after leader epoch 5: %+v", ms)
	}
}
