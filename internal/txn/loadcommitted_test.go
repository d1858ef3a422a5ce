package txn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
)

// A new leader's __transaction_state log may end past its high watermark
// (a replica just elected, or restarted, with records its followers may
// not have). The coordinator serves none of the loaded states until they
// are committed: before, it served the uncommitted Ongoing state at once,
// which a later leader without it would roll back to Empty.
func TestLoadServesOnlyCommittedState(t *testing.T) {
	src := newHarness(t)
	const id = "tx-tail"
	p := PartitionFor(id, testPartitions)
	pid, epoch := src.init(id)
	src.add(id, pid, epoch, tp("t", 0)) // the last record: Ongoing
	var batches []record.Batch
	if _, err := src.d.logs[p].ScanBatchesToEnd(func(b record.Batch) error {
		batches = append(batches, b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The new leader's log: the same records, the last one past the high
	// watermark.
	d := openDeps(t, t.TempDir(), testPartitions)
	t.Cleanup(d.close)
	l := d.logs[p]
	var end int64
	for i, b := range batches {
		if i == len(batches)-1 {
			l.SetHighWatermark(l.HighWatermark(), nil) // replication decides from here
		}
		b = append(record.Batch(nil), b...)
		b.SetBaseOffset(0) // as a producer sends it; the log assigns the offset
		res, err := l.Append(b, storage.AppendOptions{RequireKeys: true})
		if err != nil {
			t.Fatal(err)
		}
		end = res.LastOffset + 1
		if i < len(batches)-1 {
			if err := l.WaitDurable(context.Background(), end); err != nil {
				t.Fatal(err)
			}
		}
	}

	clk := newFakeClock()
	cfg := Config{NodeID: 2, NumPartitions: testPartitions, MaxTimeout: time.Minute, IDExpiration: time.Hour,
		Clock: clk, Partitioned: true, Leads: func(int32) bool { return true }}
	c, err := NewCoordinator(cfg, d, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := &harness{t: t, c: c, d: d, clk: clk, cfg: cfg}
	if err := c.LoadPartition(context.Background(), p, 1); !errors.Is(err, storage.ErrUncommitted) {
		t.Fatalf("load with an uncommitted tail: %v, want ErrUncommitted", err)
	}
	wantCode(t, "describe while the tail is uncommitted", h.describe(id).ErrorCode, kerr.CoordinatorLoadInProgress)
	if err := c.VerifyProduce(id, pid, epoch, tp("t", 0)); !errors.Is(err, kerr.CoordinatorLoadInProgress) {
		t.Fatalf("verify while the tail is uncommitted: %v", err)
	}

	// The wait after the replay is bounded; once the high watermark covers
	// the tail, the state is served.
	c.parts[p].Store(partLoading)
	epochs := make([]int32, testPartitions)
	if err := c.load(context.Background(), []int32{p}, epochs, true, 50*time.Millisecond); !errors.Is(err, storage.ErrUncommitted) {
		t.Fatalf("load past its wait: %v, want ErrUncommitted", err)
	}
	c.parts[p].Store(partUnowned)
	l.SetHighWatermark(end, nil) // the followers caught up
	if err := c.LoadPartition(context.Background(), p, 1); err != nil {
		t.Fatal(err)
	}
	d2 := h.wantState(id, "Ongoing", pid, epoch)
	if len(d2.Topics) != 1 || d2.Topics[0].Topic != "t" {
		t.Fatalf("partitions of the loaded transaction: %+v", d2.Topics)
	}
}
