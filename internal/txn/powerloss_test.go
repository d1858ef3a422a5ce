package txn

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/vfs"
)

// newCrashHarness is a harness whose logs live on a CrashFS.
func newCrashHarness(t *testing.T) (*harness, *vfs.CrashFS) {
	t.Helper()
	fsys := vfs.NewCrashFS()
	clk := newFakeClock()
	cfg := Config{NodeID: 1, NumPartitions: testPartitions, MaxTimeout: time.Minute, IDExpiration: time.Hour, Clock: clk}
	d := &testDeps{t: t, dir: "/data", n: testPartitions, missing: map[TopicPartition]bool{}, fsys: fsys, clean: true}
	d.nextPID.Store(1000)
	d.open()
	h := &harness{t: t, d: d, clk: clk, cfg: cfg}
	h.start()
	t.Cleanup(func() {
		h.c.Close()
		h.d.close()
	})
	return h, fsys
}

// powerCut restarts from what a power cut would leave on disk now: logs
// reopened from the durable image with crash recovery.
func (h *harness) powerCut(fsys *vfs.CrashFS) *vfs.CrashFS {
	h.t.Helper()
	img := fsys.Crash()
	h.c.Close()
	h.d.close()
	h.d.fsys, h.d.clean = img, false
	h.d.open()
	h.start()
	return img
}

// TestPowerLossKeepsAcknowledged: every acknowledged state change
// survives a power cut, including a PrepareCommit whose markers never
// made it, which Load then completes.
func TestPowerLossKeepsAcknowledged(t *testing.T) {
	h, fsys := newCrashHarness(t)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("a", 0), tp("b", 1))
	fsys = h.powerCut(fsys)
	h.wantState("tx", "Ongoing", pid, epoch)
	if err := h.c.VerifyProduce("tx", pid, epoch, tp("b", 1)); err != nil {
		t.Fatalf("verify after power cut: %v", err)
	}

	h.d.set(func(d *testDeps) { d.markErr = errDisk })
	wantCode(t, "commit", h.end(4, "tx", pid, epoch, true), nil)
	h.d.set(func(d *testDeps) { d.markErr = nil })
	fsys = h.powerCut(fsys)
	ms := h.d.takeMarkers()
	if len(ms) != 1 || !ms[0].commit || ms[0].pid != pid || ms[0].epoch != epoch || len(ms[0].parts) != 2 {
		t.Fatalf("markers after power cut: %+v", ms)
	}
	h.wantState("tx", "CompleteCommit", pid, epoch)

	// A fencing abort's bumped epoch is durable too.
	h.add("tx", pid, epoch, tp("a", 0))
	wantCode(t, "fence", h.initReq("tx", 4, 30000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
	h.powerCut(fsys)
	h.wantState("tx", "CompleteAbort", pid, epoch+1)
	wantCode(t, "old producer", h.end(4, "tx", pid, epoch, false), kerr.ProducerFenced)
	if p, e := h.init("tx"); p != pid || e != epoch+2 {
		t.Fatalf("after power cuts: pid %d epoch %d", p, e)
	}
}
