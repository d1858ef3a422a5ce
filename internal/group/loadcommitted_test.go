package group

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
)

// A new leader's __consumer_offsets log may end past its high watermark:
// a replica just elected, or restarted, holds records its followers may
// not have (a commit whose acks=all write failed). The coordinator loads
// them but serves nothing until they are committed, so an offset it shows
// can never roll back (Kafka's coordinator runtime serves the state as of
// the last committed offset). Before, OffsetFetch returned the
// uncommitted 9 at once.
func TestLoadServesOnlyCommittedState(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig(clk)
	cfg.NumPartitions, cfg.Partitioned = 1, true
	cfg.Leads = func(int32) bool { return true }
	st := openLogStore(t, t.TempDir(), 1)
	defer st.close(t)
	l := st.Log(0)
	commit := func(off int64) int64 {
		t.Helper()
		b, err := buildBatch(clk.Now(), []record.Record{{
			Key:   offsetKey("g", tp{"t", 0}),
			Value: offsetValue(offset{offset: off, leaderEpoch: -1, commitMs: clk.Now().UnixMilli(), expireMs: -1}),
		}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Append(b, storage.AppendOptions{RequireKeys: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.LastOffset + 1
	}
	if err := l.WaitDurable(context.Background(), commit(5)); err != nil {
		t.Fatal(err)
	}
	// From here replication decides the high watermark; the next commit
	// is the tail no follower has.
	l.SetHighWatermark(l.HighWatermark(), nil)
	end := commit(9)

	c, err := NewCoordinator(cfg, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.LoadPartition(context.Background(), 0); !errors.Is(err, storage.ErrUncommitted) {
		t.Fatalf("load with an uncommitted tail: %v, want ErrUncommitted", err)
	}
	if code, got := fetchCode(t, c, "g"); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("fetch while the tail is uncommitted: code %d offsets %v, want COORDINATOR_LOAD_IN_PROGRESS", code, got)
	}

	// The wait after the replay: bounded, then served once the high
	// watermark covers what was replayed.
	c.parts[0].Store(partLoading)
	if err := c.load(context.Background(), []int32{0}, 50*time.Millisecond); !errors.Is(err, storage.ErrUncommitted) {
		t.Fatalf("bounded load: %v, want ErrUncommitted", err)
	}
	c.parts[0].Store(partUnowned)
	done := make(chan error, 1)
	go func() {
		c.parts[0].Store(partLoading)
		err := c.load(context.Background(), []int32{0}, time.Minute)
		if err != nil {
			c.parts[0].Store(partUnowned)
		}
		done <- err
	}()
	if code, _ := fetchCode(t, c, "g"); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("fetch while loading: code %d", code)
	}
	l.SetHighWatermark(end, nil) // the followers caught up
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code, got := fetchCode(t, c, "g"); code != 0 || got[0] != 9 {
		t.Fatalf("fetch once committed: code %d offsets %v, want offset 9", code, got)
	}
}
