package txn

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestPartitionFor(t *testing.T) {
	cases := []struct {
		id   string
		n    int32
		want int32
	}{
		{"", 50, 0},
		{"abc", 50, 96354 % 50},
		{"hello", 50, 99162322 % 50},
		{"polygenelubricants", 50, 0}, // hashCode is Integer.MIN_VALUE: Utils.abs maps it to 0
	}
	for _, c := range cases {
		if got := PartitionFor(c.id, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.id, c.n, got, c.want)
		}
	}
	for _, id := range []string{"a", "zzzzzzzzzzzzzzzz", "tx-éü", "日本"} {
		if p := PartitionFor(id, 7); p < 0 || p >= 7 {
			t.Errorf("PartitionFor(%q) = %d out of range", id, p)
		}
	}
}

// TestCommitFlow walks Empty -> Ongoing -> PrepareCommit -> CompleteCommit
// and checks what is persisted at each step.
func TestCommitFlow(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	if pid != 1001 || epoch != 0 {
		t.Fatalf("first init: pid %d epoch %d", pid, epoch)
	}
	h.wantState("tx", "Empty", pid, 0)
	h.clk.Advance(1000 * time.Millisecond)
	h.add("tx", pid, epoch, tp("a", 1), tp("a", 0), tp("b", 0))
	d := h.wantState("tx", "Ongoing", pid, 0)
	if d.StartTimestamp != h.clk.Now().UnixMilli() || d.TimeoutMillis != 30000 {
		t.Fatalf("describe: start %d timeout %d", d.StartTimestamp, d.TimeoutMillis)
	}
	if len(d.Topics) != 2 || d.Topics[0].Topic != "a" || !slices.Equal(d.Topics[0].Partitions, []int32{0, 1}) {
		t.Fatalf("describe topics: %+v", d.Topics)
	}
	// Re-adding known partitions writes nothing.
	before := len(h.d.records(PartitionFor("tx", testPartitions)))
	h.add("tx", pid, epoch, tp("a", 0))
	if n := len(h.d.records(PartitionFor("tx", testPartitions))); n != before {
		t.Fatalf("re-adding known partitions wrote %d records", n-before)
	}
	wantCode(t, "add offsets", h.addOffsets(3, "tx", pid, epoch, "grp"), nil)
	wantCode(t, "commit", h.end(4, "tx", pid, epoch, true), nil)

	ms := h.d.takeMarkers()
	want := []TopicPartition{tp("__consumer_offsets", 3), tp("a", 0), tp("a", 1), tp("b", 0)}
	if len(ms) != 1 || !ms[0].commit || ms[0].pid != pid || ms[0].epoch != 0 || !slices.Equal(ms[0].parts, want) {
		t.Fatalf("markers: %+v", ms)
	}
	d = h.wantState("tx", "CompleteCommit", pid, 0)
	if len(d.Topics) != 0 {
		t.Fatalf("completed transaction still lists %+v", d.Topics)
	}

	var states []state
	for _, r := range h.d.records(PartitionFor("tx", testPartitions)) {
		states = append(states, r.meta.state)
	}
	wantStates := []state{stateEmpty, stateOngoing, stateOngoing, statePrepareCommit, stateCompleteCommit}
	if !slices.Equal(states, wantStates) {
		t.Fatalf("persisted states %v, want %v", states, wantStates)
	}
	recs := h.d.records(PartitionFor("tx", testPartitions))
	if p := recs[3].meta.parts; len(p) != 4 {
		t.Fatalf("PrepareCommit record has partitions %v", p)
	}

	// A retried commit succeeds; an abort of a committed txn is invalid.
	wantCode(t, "commit retry", h.end(4, "tx", pid, epoch, true), nil)
	wantCode(t, "abort after commit", h.end(4, "tx", pid, epoch, false), kerr.InvalidTxnState)

	// The next transaction starts from CompleteCommit with the same epoch.
	h.add("tx", pid, epoch, tp("c", 0))
	wantCode(t, "abort", h.end(4, "tx", pid, epoch, false), nil)
	ms = h.d.takeMarkers()
	if len(ms) != 1 || ms[0].commit || !slices.Equal(ms[0].parts, []TopicPartition{tp("c", 0)}) {
		t.Fatalf("abort markers: %+v", ms)
	}
	h.wantState("tx", "CompleteAbort", pid, 0)
	wantCode(t, "abort retry", h.end(4, "tx", pid, epoch, false), nil)
	wantCode(t, "commit after abort", h.end(4, "tx", pid, epoch, true), kerr.InvalidTxnState)

	// Re-init bumps the epoch.
	pid2, epoch2 := h.init("tx")
	if pid2 != pid || epoch2 != 1 {
		t.Fatalf("re-init: pid %d epoch %d", pid2, epoch2)
	}
}

func TestInitProducerIDErrors(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "empty id", h.initReq("", 4, 1000, -1, -1).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "zero timeout", h.initReq("x", 4, 0, -1, -1).ErrorCode, kerr.InvalidTransactionTimeout)
	wantCode(t, "timeout over max", h.initReq("x", 4, 60001, -1, -1).ErrorCode, kerr.InvalidTransactionTimeout)
	wantCode(t, "timeout at max", h.initReq("x", 4, 60000, -1, -1).ErrorCode, nil)
	wantCode(t, "only pid", h.initReq("x", 3, 1000, 5, -1).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "only epoch", h.initReq("x", 3, 1000, -1, 5).ErrorCode, kerr.InvalidRequest)
	// Before v3 the fields are not read.
	wantCode(t, "v2 ignores pid", h.initReq("x", 2, 1000, 5, -1).ErrorCode, nil)

	// Not transactional: a fresh producer id at epoch 0, nothing stored.
	r := h.initReq("-", 4, 0, -1, -1)
	if r.ErrorCode != 0 || r.ProducerID <= 0 || r.ProducerEpoch != 0 {
		t.Fatalf("idempotent init: %+v", r)
	}
	resp := r
	if resp.ProducerID == h.initReq("-", 4, 0, -1, -1).ProducerID {
		t.Fatal("idempotent producers share an id")
	}
	if r := h.initReq("y", 4, 1000, -1, -1); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}

	// Before Load and after Close.
	c, err := NewCoordinator(h.cfg, h.d, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := "z"
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = &id, 1000
	resp2, _ := c.Handle(context.Background(), req)
	wantCode(t, "before load", resp2.(*kmsg.InitProducerIDResponse).ErrorCode, kerr.CoordinatorLoadInProgress)
	c.Close()
	resp2, _ = c.Handle(context.Background(), req)
	wantCode(t, "after close", resp2.(*kmsg.InitProducerIDResponse).ErrorCode, kerr.CoordinatorNotAvailable)
	if err := c.Load(context.Background()); err == nil {
		t.Fatal("Load after Close succeeded")
	}
}

func TestEndTxnErrors(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	wantCode(t, "empty id", h.end(4, "", pid, epoch, true), kerr.InvalidRequest)
	wantCode(t, "unknown id", h.end(4, "nope", pid, epoch, true), kerr.InvalidProducerIDMapping)
	wantCode(t, "wrong pid", h.end(4, "tx", pid+1, epoch, true), kerr.InvalidProducerIDMapping)
	// Empty: nothing to end (Kafka answers INVALID_TXN_STATE).
	wantCode(t, "commit empty", h.end(4, "tx", pid, epoch, true), kerr.InvalidTxnState)
	wantCode(t, "abort empty", h.end(4, "tx", pid, epoch, false), kerr.InvalidTxnState)
	h.add("tx", pid, epoch, tp("a", 0))
	// Stale and future epochs are fenced: PRODUCER_FENCED from v2,
	// INVALID_PRODUCER_EPOCH before.
	for _, e := range []int16{epoch - 1, epoch + 1} {
		wantCode(t, "fenced v2", h.end(2, "tx", pid, e, true), kerr.ProducerFenced)
		wantCode(t, "fenced v1", h.end(1, "tx", pid, e, true), kerr.InvalidProducerEpoch)
		wantCode(t, "fenced v0", h.end(0, "tx", pid, e, true), kerr.InvalidProducerEpoch)
	}
	h.wantState("tx", "Ongoing", pid, epoch)
	wantCode(t, "commit", h.end(0, "tx", pid, epoch, true), nil)
}

func TestAddPartitionsErrors(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.d.set(func(d *testDeps) { d.missing[tp("gone", 1)] = true })
	codes := h.addV(3, "tx", pid, epoch, tp("a", 0), tp("gone", 1), tp("gone", 2))
	want := []int16{kerr.OperationNotAttempted.Code, kerr.UnknownTopicOrPartition.Code, kerr.OperationNotAttempted.Code}
	if !slices.Equal(codes, want) {
		t.Fatalf("unknown partition codes %v, want %v", codes, want)
	}
	h.wantState("tx", "Empty", pid, epoch)

	codes = h.addV(3, "tx", pid, epoch, tp("__consumer_offsets", 0), tp("a", 0))
	want = []int16{kerr.TopicAuthorizationFailed.Code, kerr.OperationNotAttempted.Code}
	if !slices.Equal(codes, want) {
		t.Fatalf("internal topic codes %v, want %v", codes, want)
	}

	// Unknown partitions win over coordinator errors, as in KafkaApis.
	codes = h.addV(3, "unknown", pid, epoch, tp("gone", 1))
	wantCode(t, "unknown partition of unknown id", codes[0], kerr.UnknownTopicOrPartition)

	wantCode(t, "unknown id", h.addV(3, "unknown", pid, epoch, tp("a", 0))[0], kerr.InvalidProducerIDMapping)
	wantCode(t, "empty id", h.addV(3, "", pid, epoch, tp("a", 0))[0], kerr.InvalidRequest)
	wantCode(t, "wrong pid", h.addV(3, "tx", pid+7, epoch, tp("a", 0))[0], kerr.InvalidProducerIDMapping)
	wantCode(t, "fenced v2", h.addV(2, "tx", pid, epoch+1, tp("a", 0))[0], kerr.ProducerFenced)
	wantCode(t, "fenced v1", h.addV(1, "tx", pid, epoch+1, tp("a", 0))[0], kerr.InvalidProducerEpoch)
	wantCode(t, "fenced v0", h.addV(0, "tx", pid, epoch+1, tp("a", 0))[0], kerr.InvalidProducerEpoch)

	wantCode(t, "offsets fenced v2", h.addOffsets(2, "tx", pid, epoch+1, "g"), kerr.ProducerFenced)
	wantCode(t, "offsets fenced v1", h.addOffsets(1, "tx", pid, epoch+1, "g"), kerr.InvalidProducerEpoch)
	wantCode(t, "offsets unknown id", h.addOffsets(3, "nope", pid, epoch, "g"), kerr.InvalidProducerIDMapping)
	wantCode(t, "offsets empty id", h.addOffsets(3, "", pid, epoch, "g"), kerr.InvalidRequest)
	h.wantState("tx", "Empty", pid, epoch)

	// While a transaction is prepared (markers failing), adds are
	// CONCURRENT_TRANSACTIONS.
	h.add("tx", pid, epoch, tp("a", 0))
	h.d.set(func(d *testDeps) { d.markErr = errDisk })
	wantCode(t, "commit with failing markers", h.end(3, "tx", pid, epoch, true), nil)
	h.wantState("tx", "PrepareCommit", pid, epoch)
	wantCode(t, "add while prepared", h.addV(3, "tx", pid, epoch, tp("a", 0))[0], kerr.ConcurrentTransactions)
	wantCode(t, "offsets while prepared", h.addOffsets(3, "tx", pid, epoch, "g"), kerr.ConcurrentTransactions)
	wantCode(t, "commit while prepared", h.end(3, "tx", pid, epoch, true), kerr.ConcurrentTransactions)
	wantCode(t, "abort while prepare commit", h.end(3, "tx", pid, epoch, false), kerr.InvalidTxnState)
	wantCode(t, "init while prepared", h.initReq("tx", 4, 1000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
	h.d.set(func(d *testDeps) { d.markErr = nil })
	h.c.retryUnfinished()
	h.wantState("tx", "CompleteCommit", pid, epoch)
}

// TestConcurrentWhileCompleting blocks the marker write and checks that
// EndTxn is answered once PrepareCommit is stored, without waiting for
// the markers (Kafka's TransactionCoordinator.endTransaction replies after
// appendTransactionToLog and sends the markers asynchronously), and that
// every request racing with the completion gets CONCURRENT_TRANSACTIONS
// until the markers are written.
func TestConcurrentWhileCompleting(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("a", 0))
	entered, release := make(chan struct{}), make(chan struct{})
	h.d.set(func(d *testDeps) {
		d.markHook = func() {
			close(entered)
			<-release
		}
	})
	h.async = true
	wantCode(t, "commit answered before its markers", h.end(4, "tx", pid, epoch, true), nil)
	<-entered
	h.d.set(func(d *testDeps) { d.markHook = nil })
	wantCode(t, "add", h.addV(3, "tx", pid, epoch, tp("b", 0))[0], kerr.ConcurrentTransactions)
	wantCode(t, "add offsets", h.addOffsets(3, "tx", pid, epoch, "g"), kerr.ConcurrentTransactions)
	wantCode(t, "commit", h.end(4, "tx", pid, epoch, true), kerr.ConcurrentTransactions)
	wantCode(t, "abort", h.end(4, "tx", pid, epoch, false), kerr.ConcurrentTransactions)
	wantCode(t, "init", h.initReq("tx", 4, 1000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
	err := h.c.VerifyProduce("tx", pid, epoch, tp("a", 0))
	if !errorsIs(err, kerr.ConcurrentTransactions) {
		t.Fatalf("verify while completing: %v", err)
	}
	if n := h.c.abortTimedOut(); n != 0 {
		t.Fatalf("timeout aborted a completing transaction")
	}
	d := h.wantState("tx", "PrepareCommit", pid, epoch)
	if len(d.Topics) != 1 {
		t.Fatalf("preparing transaction lists %+v", d.Topics)
	}
	close(release)
	h.c.awaitCompletions()
	h.async = false
	h.wantState("tx", "CompleteCommit", pid, epoch)
	if ms := h.d.takeMarkers(); len(ms) != 1 || !ms[0].commit {
		t.Fatalf("markers %+v", ms)
	}
	if _, e := h.init("tx"); e != epoch+1 {
		t.Fatalf("init after the markers: epoch %d, want %d", e, epoch+1)
	}
}

// TestFenceOnReinit: InitProducerId during an Ongoing transaction aborts
// it at a bumped epoch and answers CONCURRENT_TRANSACTIONS; the retry
// bumps again; the old producer is fenced.
func TestFenceOnReinit(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("a", 0), tp("b", 3))
	wantCode(t, "re-init", h.initReq("tx", 4, 30000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
	ms := h.d.takeMarkers()
	if len(ms) != 1 || ms[0].commit || ms[0].epoch != epoch+1 || len(ms[0].parts) != 2 {
		t.Fatalf("fencing markers: %+v", ms)
	}
	h.wantState("tx", "CompleteAbort", pid, epoch+1)
	recs := h.d.records(PartitionFor("tx", testPartitions))
	if r := recs[len(recs)-2].meta; r.state != statePrepareAbort || r.epoch != epoch+1 {
		t.Fatalf("fence persisted %v at epoch %d", r.state, r.epoch)
	}
	// The old producer is fenced everywhere.
	wantCode(t, "old end", h.end(4, "tx", pid, epoch, true), kerr.ProducerFenced)
	wantCode(t, "old add", h.addV(3, "tx", pid, epoch, tp("a", 0))[0], kerr.ProducerFenced)
	if err := h.c.VerifyProduce("tx", pid, epoch, tp("a", 0)); !errorsIs(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("verify old epoch: %v", err)
	}
	pid2, epoch2 := h.init("tx")
	if pid2 != pid || epoch2 != epoch+2 {
		t.Fatalf("retry after fence: pid %d epoch %d", pid2, epoch2)
	}
	wantCode(t, "epoch+1 end", h.end(4, "tx", pid, epoch+1, false), kerr.ProducerFenced)
}

// TestFenceWriteFailure: a fence whose PrepareAbort is not written keeps
// the bumped epoch in memory and does not bump it again (Kafka's
// hasFailedEpochFence).
func TestFenceWriteFailure(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("a", 0))
	h.d.set(func(d *testDeps) { d.appendFn = func(int32, []byte) error { return errDisk } })
	wantCode(t, "fence with failing log", h.initReq("tx", 4, 30000, -1, -1).ErrorCode, kerr.NotCoordinator)
	h.wantState("tx", "Ongoing", pid, epoch+1)
	wantCode(t, "old producer", h.end(4, "tx", pid, epoch, true), kerr.ProducerFenced)
	h.d.set(func(d *testDeps) { d.appendFn = nil })
	wantCode(t, "fence again", h.initReq("tx", 4, 30000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
	h.wantState("tx", "CompleteAbort", pid, epoch+1)
	if _, e := h.init("tx"); e != epoch+2 {
		t.Fatalf("epoch after fence retry: %d", e)
	}
}

func TestStateAppendErrors(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		err  error
		want *kerr.Error
	}{
		{errDisk, kerr.NotCoordinator},
		{kerr.RequestTimedOut, kerr.CoordinatorNotAvailable},
		{kerr.NotEnoughReplicas, kerr.CoordinatorNotAvailable},
		{kerr.KafkaStorageError, kerr.NotCoordinator},
		{kerr.MessageTooLarge, kerr.UnknownServerError},
		{context.DeadlineExceeded, kerr.CoordinatorNotAvailable},
		{kerr.InvalidRecord, kerr.InvalidRecord},
	}
	for _, c := range cases {
		h.d.set(func(d *testDeps) { d.appendFn = func(int32, []byte) error { return c.err } })
		wantCode(t, c.err.Error(), h.initReq("tx", 4, 1000, -1, -1).ErrorCode, c.want)
	}
	h.d.set(func(d *testDeps) { d.appendFn = nil })
	// Nothing was applied: the first successful init gets epoch 0.
	if _, e := h.init("tx"); e != 0 {
		t.Fatalf("epoch after failed inits: %d", e)
	}
	pid, epoch := h.init("tx2")
	h.d.set(func(d *testDeps) { d.appendFn = func(int32, []byte) error { return errDisk } })
	wantCode(t, "add", h.addV(3, "tx2", pid, epoch, tp("a", 0))[0], kerr.NotCoordinator)
	h.d.set(func(d *testDeps) { d.appendFn = nil })
	h.wantState("tx2", "Empty", pid, epoch)
}

// TestKIP360 covers InitProducerId v3+ with the producer's id and epoch.
func TestKIP360(t *testing.T) {
	h := newHarness(t)
	// A new id with a producer id/epoch (recovering after expiry): the
	// metadata was just created, so it is accepted.
	r := h.initReq("tx", 4, 30000, 77, 3)
	if r.ErrorCode != 0 || r.ProducerEpoch != 0 {
		t.Fatalf("first init with pid: %+v", r)
	}
	pid := r.ProducerID
	// Bump from the current epoch.
	if r := h.initReq("tx", 4, 30000, pid, 0); r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != 1 {
		t.Fatalf("bump: %+v", r)
	}
	// A retry of that bump (answer lost) gets the same epoch, no bump.
	if r := h.initReq("tx", 4, 30000, pid, 0); r.ErrorCode != 0 || r.ProducerEpoch != 1 {
		t.Fatalf("retry: %+v", r)
	}
	// Any other epoch is fenced.
	wantCode(t, "stale epoch v4", h.initReq("tx", 4, 30000, pid, 7).ErrorCode, kerr.ProducerFenced)
	wantCode(t, "stale epoch v3", h.initReq("tx", 3, 30000, pid, 7).ErrorCode, kerr.InvalidProducerEpoch)
	wantCode(t, "other pid", h.initReq("tx", 4, 30000, pid+100, 1).ErrorCode, kerr.ProducerFenced)
	// A plain re-init resets the last epoch, so the old retry is fenced.
	if _, e := h.init("tx"); e != 2 {
		t.Fatalf("plain re-init epoch %d", e)
	}
	wantCode(t, "retry after other init", h.initReq("tx", 4, 30000, pid, 1).ErrorCode, kerr.ProducerFenced)
	// An Ongoing transaction is aborted first.
	h.add("tx", pid, 2, tp("a", 0))
	wantCode(t, "v3 re-init in txn", h.initReq("tx", 4, 30000, pid, 2).ErrorCode, kerr.ConcurrentTransactions)
	h.wantState("tx", "CompleteAbort", pid, 3)
}

// TestEpochExhaustion: an exhausted epoch rotates the producer id.
func TestEpochExhaustion(t *testing.T) {
	h := newHarness(t)
	pid, _ := h.init("tx")
	h.c.mu.Lock()
	h.c.txns["tx"].epoch = math.MaxInt16 - 1
	h.c.mu.Unlock()
	r := h.initReq("tx", 4, 30000, pid, math.MaxInt16-1)
	if r.ErrorCode != 0 || r.ProducerID == pid || r.ProducerEpoch != 0 {
		t.Fatalf("rotation: %+v", r)
	}
	newPID := r.ProducerID
	// A retry with the old producer id and its exhausted epoch is the same
	// rotation: it gets the new id without a bump.
	if r := h.initReq("tx", 4, 30000, pid, math.MaxInt16-1); r.ErrorCode != 0 || r.ProducerID != newPID || r.ProducerEpoch != 0 {
		t.Fatalf("rotation retry: %+v", r)
	}
	wantCode(t, "old pid, other epoch", h.initReq("tx", 4, 30000, pid, 5).ErrorCode, kerr.ProducerFenced)
	if p, e := h.init("tx"); p != newPID || e != 1 {
		t.Fatalf("after rotation: pid %d epoch %d", p, e)
	}

	// Fencing at epoch 32765 bumps to the exhausted 32766; the retry rotates.
	h.c.mu.Lock()
	h.c.txns["tx"].epoch = math.MaxInt16 - 2
	h.c.mu.Unlock()
	h.add("tx", newPID, math.MaxInt16-2, tp("a", 0))
	wantCode(t, "fence to exhausted", h.initReq("tx", 4, 30000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
	h.wantState("tx", "CompleteAbort", newPID, math.MaxInt16-1)
	if p, e := h.init("tx"); p == newPID || e != 0 {
		t.Fatalf("rotation after fence: pid %d epoch %d", p, e)
	}
}

// TestTimeoutAbort: the loop's timeout pass aborts an Ongoing transaction
// older than its timeout with an epoch bump.
func TestTimeoutAbort(t *testing.T) {
	h := newHarness(t)
	r := h.initReq("tx", 4, 1000, -1, -1)
	pid, epoch := r.ProducerID, r.ProducerEpoch
	h.add("tx", pid, epoch, tp("a", 0))
	other, oe := h.init("fresh")
	h.clk.Advance(999 * time.Millisecond)
	h.add("fresh", other, oe, tp("a", 1))
	h.clk.Advance(2 * time.Millisecond)
	if n := h.c.abortTimedOut(); n != 1 {
		t.Fatalf("aborted %d, want 1", n)
	}
	h.c.awaitCompletions()
	ms := h.d.takeMarkers()
	if len(ms) != 1 || ms[0].commit || ms[0].pid != pid || ms[0].epoch != epoch+1 {
		t.Fatalf("timeout markers: %+v", ms)
	}
	h.wantState("tx", "CompleteAbort", pid, epoch+1)
	h.wantState("fresh", "Ongoing", other, oe)
	wantCode(t, "commit after timeout", h.end(4, "tx", pid, epoch, true), kerr.ProducerFenced)
	wantCode(t, "commit after timeout v1", h.end(1, "tx", pid, epoch, true), kerr.InvalidProducerEpoch)
	// KIP-360 recovery with the fenced epoch is refused, as in Kafka (the
	// fence clears the last epoch).
	wantCode(t, "kip-360 after timeout", h.initReq("tx", 4, 1000, pid, epoch).ErrorCode, kerr.ProducerFenced)
	if p, e := h.init("tx"); p != pid || e != epoch+2 {
		t.Fatalf("re-init after timeout: pid %d epoch %d", p, e)
	}
	if n := h.c.abortTimedOut(); n != 0 {
		t.Fatalf("second pass aborted %d", n)
	}
}

// TestPeriodicWorkOnClock: the coordinator's periodic work runs on its
// clock (clock.Every): advancing a Manual clock past
// AbortTimedOutInterval aborts a timed-out transaction, past
// RemoveExpiredInterval expires an idle id, with no real time passing.
func TestPeriodicWorkOnClock(t *testing.T) {
	h := newHarness(t)
	h.c.Close()
	h.cfg.AbortTimedOutInterval, h.cfg.RemoveExpiredInterval = 10*time.Second, 2*time.Hour
	h.start()
	r := h.initReq("tx", 4, 15000, -1, -1)
	pid, epoch := r.ProducerID, r.ProducerEpoch
	h.add("tx", pid, epoch, tp("a", 0))
	h.clk.Advance(19 * time.Second) // one pass at 10s: not yet timed out
	h.wantState("tx", "Ongoing", pid, epoch)
	h.clk.Advance(time.Second) // the pass at 20s aborts it
	h.wantState("tx", "CompleteAbort", pid, epoch+1)
	if ms := h.d.takeMarkers(); len(ms) != 1 || ms[0].commit {
		t.Fatalf("timeout markers: %+v", ms)
	}
	h.clk.Advance(2 * time.Hour) // idle past IDExpiration (1h) at the 2h pass
	wantCode(t, "describe after expiry", h.describe("tx").ErrorCode, kerr.TransactionalIDNotFound)
	h.c.Close()
	h.clk.Advance(10 * time.Hour) // nothing runs after Close
}

// TestExpiry: idle transactional ids (not Ongoing) are tombstoned.
func TestExpiry(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("idle")
	h.init("busy")
	bp, be := h.init("busy")
	h.add("busy", bp, be, tp("a", 0))
	h.init("done")
	dp, de := h.init("done")
	h.add("done", dp, de, tp("a", 0))
	wantCode(t, "commit", h.end(4, "done", dp, de, true), nil)
	h.clk.Advance(h.cfg.IDExpiration - time.Millisecond)
	if n := h.c.expireIDs(); n != 0 {
		t.Fatalf("expired %d before the expiration", n)
	}
	h.clk.Advance(1 * time.Millisecond)
	if n := h.c.expireIDs(); n != 2 {
		t.Fatalf("expired %d, want 2 (idle, done)", n)
	}
	for _, id := range []string{"idle", "done"} {
		wantCode(t, "describe "+id, h.describe(id).ErrorCode, kerr.TransactionalIDNotFound)
	}
	h.wantState("busy", "Ongoing", bp, be)
	wantCode(t, "end on expired", h.end(4, "idle", pid, epoch, true), kerr.InvalidProducerIDMapping)
	recs := h.d.records(PartitionFor("idle", testPartitions))
	if last := recs[len(recs)-1]; last.id != "idle" || last.meta != nil {
		t.Fatalf("last record of idle's partition: %+v", last)
	}
	h.restart()
	wantCode(t, "expired after restart", h.describe("idle").ErrorCode, kerr.TransactionalIDNotFound)
	h.wantState("busy", "Ongoing", bp, be)
	// A new producer id on reuse.
	if p, e := h.init("idle"); p == pid || e != 0 {
		t.Fatalf("reused id: pid %d epoch %d", p, e)
	}
}

// TestExpiryAppendFailure keeps the ids when the tombstones fail.
func TestExpiryAppendFailure(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("idle")
	h.clk.Advance(h.cfg.IDExpiration)
	h.d.set(func(d *testDeps) { d.appendFn = func(int32, []byte) error { return errDisk } })
	if n := h.c.expireIDs(); n != 0 {
		t.Fatalf("expired %d with a failing log", n)
	}
	h.d.set(func(d *testDeps) { d.appendFn = nil })
	h.wantState("idle", "Empty", pid, epoch)
	h.add("idle", pid, epoch, tp("a", 0))
}

func TestDeletedPartitionSkipsMarker(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("a", 0), tp("b", 0))
	h.d.set(func(d *testDeps) { d.missing[tp("b", 0)] = true })
	wantCode(t, "commit", h.end(4, "tx", pid, epoch, true), nil)
	ms := h.d.takeMarkers()
	if len(ms) != 1 || !slices.Equal(ms[0].parts, []TopicPartition{tp("a", 0)}) {
		t.Fatalf("markers: %+v", ms)
	}
	// Only deleted partitions: no marker call, still completes.
	h.d.set(func(d *testDeps) { d.missing[tp("b", 0)] = false })
	h.add("tx", pid, epoch, tp("b", 0))
	h.d.set(func(d *testDeps) { d.missing[tp("b", 0)] = true })
	wantCode(t, "abort", h.end(4, "tx", pid, epoch, false), nil)
	if ms := h.d.takeMarkers(); len(ms) != 0 {
		t.Fatalf("markers for deleted partitions: %+v", ms)
	}
	h.wantState("tx", "CompleteAbort", pid, epoch)
}

func TestVerifyProduce(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	cases := []struct {
		id    string
		pid   int64
		epoch int16
		tp    TopicPartition
		want  *kerr.Error
	}{
		{"tx", pid, epoch, tp("a", 0), kerr.InvalidTxnState}, // Empty
		{"nope", pid, epoch, tp("a", 0), kerr.InvalidProducerIDMapping},
		{"", pid, epoch, tp("a", 0), kerr.InvalidRequest},
	}
	for _, c := range cases {
		if err := h.c.VerifyProduce(c.id, c.pid, c.epoch, c.tp); !errorsIs(err, c.want) {
			t.Fatalf("verify %+v: %v, want %v", c, err, c.want)
		}
	}
	h.add("tx", pid, epoch, tp("a", 0))
	if err := h.c.VerifyProduce("tx", pid, epoch, tp("a", 0)); err != nil {
		t.Fatalf("added partition: %v", err)
	}
	for _, c := range []struct {
		pid   int64
		epoch int16
		tp    TopicPartition
		want  *kerr.Error
	}{
		{pid, epoch, tp("a", 1), kerr.InvalidTxnState},
		{pid, epoch + 1, tp("a", 0), kerr.InvalidProducerEpoch},
		{pid, epoch - 1, tp("a", 0), kerr.InvalidProducerEpoch},
		{pid + 1, epoch, tp("a", 0), kerr.InvalidProducerIDMapping},
	} {
		if err := h.c.VerifyProduce("tx", c.pid, c.epoch, c.tp); !errorsIs(err, c.want) {
			t.Fatalf("verify %+v: %v, want %v", c, err, c.want)
		}
	}
	wantCode(t, "commit", h.end(4, "tx", pid, epoch, true), nil)
	if err := h.c.VerifyProduce("tx", pid, epoch, tp("a", 0)); !errorsIs(err, kerr.InvalidTxnState) {
		t.Fatalf("after commit: %v", err)
	}
}

func TestHandleRejects(t *testing.T) {
	h := newHarness(t)
	r := kmsg.NewPtrEndTxnRequest()
	r.Version = 5
	if _, err := h.c.Handle(context.Background(), r); !errorsIs(err, kerr.UnsupportedVersion) {
		t.Fatalf("EndTxn v5: %v", err)
	}
	a := kmsg.NewPtrAddPartitionsToTxnRequest()
	a.Version = 4
	if _, err := h.c.Handle(context.Background(), a); err == nil {
		t.Fatal("AddPartitionsToTxn v4 accepted")
	}
	if _, err := h.c.Handle(context.Background(), kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("Metadata accepted")
	}
	v := h.c.APIVersions()
	if _, ok := v[22]; ok || v[26] != [2]int16{0, 4} || v[24] != [2]int16{0, 3} || v[66] != [2]int16{0, 2} {
		t.Fatalf("APIVersions: %v", v)
	}
	if _, err := NewCoordinator(Config{}, h.d, nil, nil); err == nil {
		t.Fatal("zero partitions accepted")
	}
}

// TestPrepareAbortCodes: EndTxn against a PrepareAbort whose markers are
// failing.
func TestPrepareAbortCodes(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("a", 0))
	h.d.set(func(d *testDeps) { d.markErr = errDisk })
	wantCode(t, "abort", h.end(4, "tx", pid, epoch, false), nil)
	h.wantState("tx", "PrepareAbort", pid, epoch)
	wantCode(t, "abort again", h.end(4, "tx", pid, epoch, false), kerr.ConcurrentTransactions)
	wantCode(t, "commit", h.end(4, "tx", pid, epoch, true), kerr.InvalidTxnState)
	if n := h.c.abortTimedOut(); n != 0 {
		t.Fatalf("timeout pass touched a prepared transaction")
	}
	h.d.set(func(d *testDeps) { d.markErr = nil })
	h.c.retryUnfinished()
	h.wantState("tx", "CompleteAbort", pid, epoch)
	if ms := h.d.takeMarkers(); len(ms) != 1 || ms[0].commit {
		t.Fatalf("markers: %+v", ms)
	}
}

// TestRequestsDuringExpiry: while an id's tombstone is being written,
// requests for it get CONCURRENT_TRANSACTIONS.
func TestRequestsDuringExpiry(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.init("tx")
	h.clk.Advance(h.cfg.IDExpiration)
	entered, release := make(chan struct{}), make(chan struct{})
	h.d.set(func(d *testDeps) {
		d.appendFn = func(_ int32, b []byte) error {
			close(entered)
			<-release
			return nil
		}
	})
	done := make(chan int)
	go func() { done <- h.c.expireIDs() }()
	<-entered
	h.d.set(func(d *testDeps) { d.appendFn = nil })
	wantCode(t, "init", h.initReq("tx", 4, 1000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
	wantCode(t, "add", h.addV(3, "tx", pid, epoch, tp("a", 0))[0], kerr.ConcurrentTransactions)
	close(release)
	if n := <-done; n != 1 {
		t.Fatalf("expired %d", n)
	}
	wantCode(t, "describe", h.describe("tx").ErrorCode, kerr.TransactionalIDNotFound)
}
