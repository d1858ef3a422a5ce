package txn

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestStateAppendTimeout: a __transaction_state write the ISR does not
// replicate within the transaction's timeout (Kafka's
// appendTransactionToLog passes txnTimeoutMs as the append's timeout)
// answers the request COORDINATOR_NOT_AVAILABLE, never success, and the
// transaction stays in the state the log's replicated part says; once
// writes replicate again the coordinator serves the same requests.
func TestStateAppendTimeout(t *testing.T) {
	h := newHarness(t)
	resp := h.initReq("tx", 4, 200, -1, -1) // a 200 ms transaction timeout
	if resp.ErrorCode != 0 {
		t.Fatalf("init: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	pid, epoch := resp.ProducerID, resp.ProducerEpoch

	h.d.set(func(d *testDeps) { d.stall = true })
	if codes := h.addV(3, "tx", pid, epoch, tp("t", 0)); codes[0] != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("add partitions not replicated in time: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(codes[0]))
	}
	h.wantState("tx", "Empty", pid, epoch)

	h.d.set(func(d *testDeps) { d.stall = false })
	h.add("tx", pid, epoch, tp("t", 0))
	h.wantState("tx", "Ongoing", pid, epoch)

	h.d.set(func(d *testDeps) { d.stall = true })
	wantCode(t, "commit not replicated in time", h.end(3, "tx", pid, epoch, true), kerr.CoordinatorNotAvailable)
	h.wantState("tx", "Ongoing", pid, epoch)
	if m := h.d.takeMarkers(); len(m) != 0 {
		t.Fatalf("markers written for a commit whose PrepareCommit was not replicated: %+v", m)
	}

	h.d.set(func(d *testDeps) { d.stall = false })
	wantCode(t, "commit", h.end(3, "tx", pid, epoch, true), nil)
	h.wantState("tx", "CompleteCommit", pid, epoch)
}

// TestMarkersRetriedUntilWritten: markers that cannot be written (a
// partition leader down or moving) are retried every MarkerRetryInterval,
// not only at the timed-out-transaction cleanup, and without a bound
// (Kafka's TransactionMarkerChannelManager): the transaction completes as
// soon as they can be written, however long that takes.
func TestMarkersRetriedUntilWritten(t *testing.T) {
	h := newHarness(t)
	h.c.Close()
	h.cfg.MarkerRetryInterval = time.Second
	h.start()
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 0))
	h.d.set(func(d *testDeps) { d.markErr = errDisk })
	wantCode(t, "commit", h.end(3, "tx", pid, epoch, true), nil)
	for i := 0; i < 30; i++ { // half a minute of retries, all failing
		h.clk.Advance(time.Second)
	}
	h.wantState("tx", "PrepareCommit", pid, epoch)
	h.d.set(func(d *testDeps) { d.markErr = nil })
	h.clk.Advance(time.Second) // the retry runs inside Advance
	h.wantState("tx", "CompleteCommit", pid, epoch)
	if m := h.d.takeMarkers(); len(m) != 1 || !m[0].commit {
		t.Fatalf("markers: %+v, want one COMMIT", m)
	}
}
