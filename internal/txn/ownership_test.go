package txn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transactional id's coordinator moves with the leadership of its
// __transaction_state partition: the old coordinator answers
// NOT_COORDINATOR, the new one completes the transaction it inherits in
// PrepareCommit (markers again, at its coordinator epoch, then
// CompleteCommit) and aborts an inherited Ongoing transaction past its
// timeout (Kafka's TransactionCoordinator.onElection and
// abortTimedOutTransactions).
func TestCoordinatorFollowsPartitionLeadership(t *testing.T) {
	clk := newFakeClock()
	d := openDeps(t, t.TempDir(), testPartitions)
	t.Cleanup(d.close)
	mk := func(node int32) *harness {
		cfg := Config{NodeID: node, NumPartitions: testPartitions, MaxTimeout: time.Minute, IDExpiration: time.Hour,
			Clock: clk, Partitioned: true}
		c, err := NewCoordinator(cfg, d, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return &harness{t: t, c: c, d: d, clk: clk, cfg: cfg}
	}
	a, b := mk(1), mk(2)
	const prepared = "tx-prepared"
	p := PartitionFor(prepared, testPartitions)
	ongoing := ""
	for i := 0; ongoing == ""; i++ {
		if id := fmt.Sprintf("tx-ongoing-%d", i); PartitionFor(id, testPartitions) == p {
			ongoing = id
		}
	}
	wantCode(t, "init before any partition is owned", a.initReq(prepared, 4, 30000, -1, -1).ErrorCode, kerr.NotCoordinator)
	if err := a.c.LoadPartition(context.Background(), p, 3); err != nil {
		t.Fatal(err)
	}
	pid, epoch := a.init(prepared)
	a.add(prepared, pid, epoch, TopicPartition{"t", 0}, TopicPartition{"t", 1})
	opid, oepoch := a.init(ongoing)
	a.add(ongoing, opid, oepoch, TopicPartition{"t", 2})
	// The markers cannot be written: the transaction stays PrepareCommit.
	d.set(func(d *testDeps) { d.markErr = errors.New("partition leaders unreachable") })
	wantCode(t, "end", a.end(3, prepared, pid, epoch, true), nil)
	a.wantState(prepared, "PrepareCommit", pid, epoch)
	d.takeMarkers()

	a.c.UnloadPartition(p)
	wantCode(t, "old coordinator end", a.end(3, prepared, pid, epoch, true), kerr.NotCoordinator)
	wantCode(t, "old coordinator add", a.addV(3, ongoing, opid, oepoch, TopicPartition{"t", 3})[0], kerr.NotCoordinator)
	if err := a.c.VerifyProduce(ongoing, opid, oepoch, TopicPartition{"t", 2}); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("old coordinator verify: %v", err)
	}
	if d := a.describe(prepared); d.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("old coordinator describe: %v", kerr.ErrorForCode(d.ErrorCode))
	}
	if a.c.abortTimedOut() != 0 {
		t.Fatal("old coordinator aborted a transaction it no longer owns")
	}

	d.set(func(d *testDeps) { d.markErr = nil })
	written := make(chan struct{}, 1)
	d.set(func(d *testDeps) {
		d.markHook = func() {
			select {
			case written <- struct{}{}:
			default:
			}
		}
	})
	if err := b.c.LoadPartition(context.Background(), p, 4); err != nil {
		t.Fatal(err)
	}
	<-written
	for b.describe(prepared).State != "CompleteCommit" {
		time.Sleep(time.Millisecond) // the completion record follows the markers
	}
	ms := d.takeMarkers()
	if len(ms) != 1 || !ms[0].commit || ms[0].pid != pid || ms[0].coordEpoch != 4 || len(ms[0].parts) != 2 {
		t.Fatalf("markers of the inherited commit: %+v, want one COMMIT of 2 partitions at coordinator epoch 4", ms)
	}
	// The Ongoing transaction is the new coordinator's: verified, and
	// aborted once past its timeout.
	if err := b.c.VerifyProduce(ongoing, opid, oepoch, TopicPartition{"t", 2}); err != nil {
		t.Fatalf("new coordinator verify: %v", err)
	}
	clk.Advance(31 * time.Second)
	if n := b.c.abortTimedOut(); n != 1 {
		t.Fatalf("timed-out inherited transactions aborted: %d, want 1", n)
	}
	b.c.awaitCompletions()
	ms = d.takeMarkers()
	if len(ms) != 1 || ms[0].commit || ms[0].pid != opid || ms[0].coordEpoch != 4 {
		t.Fatalf("markers of the timed-out abort: %+v", ms)
	}
	b.wantState(ongoing, "CompleteAbort", opid, oepoch+1)
}

// While a partition loads, its transactional ids answer
// COORDINATOR_LOAD_IN_PROGRESS; ListTransactions too.
func TestCoordinatorLoadInProgress(t *testing.T) {
	clk := newFakeClock()
	d := openDeps(t, t.TempDir(), testPartitions)
	t.Cleanup(d.close)
	cfg := Config{NodeID: 1, NumPartitions: testPartitions, MaxTimeout: time.Minute, Clock: clk, Partitioned: true}
	c, err := NewCoordinator(cfg, d, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := &harness{t: t, c: c, d: d, clk: clk, cfg: cfg}
	const id = "tx-loading"
	p := PartitionFor(id, testPartitions)
	c.parts[p].Store(partLoading) // as LoadPartition does before replaying
	wantCode(t, "init while loading", h.initReq(id, 4, 30000, -1, -1).ErrorCode, kerr.CoordinatorLoadInProgress)
	if err := c.VerifyProduce(id, 1, 0, TopicPartition{"t", 0}); !errors.Is(err, kerr.CoordinatorLoadInProgress) {
		t.Fatalf("verify while loading: %v", err)
	}
	r := h.do(kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse)
	wantCode(t, "list while loading", r.ErrorCode, kerr.CoordinatorLoadInProgress)
	c.parts[p].Store(partUnowned)
	if err := c.LoadPartition(context.Background(), p, 1); err != nil {
		t.Fatal(err)
	}
	if _, e := h.init(id); e != 0 {
		t.Fatalf("epoch %d", e)
	}
}
