package controller

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/etcdnode"
	"github.com/strata-io/strata/internal/etcdnode/etcdtest"
	"github.com/strata-io/strata/internal/meta"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func startStore(t testing.TB) (*meta.Store, *meta.Cache) {
	t.Helper()
	st := meta.NewStore(etcdtest.Start(t), meta.DefaultKeys, etcdnode.DefaultMaxTxnOps)
	cache, err := meta.StartCache(context.Background(), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	return st, cache
}

func waitFor(t *testing.T, c *meta.Cache, what string, cond func(*meta.View) bool) *meta.View {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		ch := c.Changed()
		if v := c.View(); cond(v) {
			return v
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestDriverAndAdmin: topics created through Admin spread over three
// brokers; a broker's leaving and returning is reconciled by whichever of
// two drivers is active; stopping the active driver hands over.
func TestDriverAndAdmin(t *testing.T) {
	st, cache := startStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	policy := func(*meta.Topic) Policy { return Policy{MinISR: 1} }

	sessions := map[int32]*meta.Session{}
	register := func(id int32) {
		s, err := meta.NewSession(ctx, st.Client(), 3*time.Second, 500*time.Millisecond, quiet)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Register(ctx, meta.Broker{ID: id, DirectoryID: "dir"}, s.Lease()); err != nil {
			t.Fatal(err)
		}
		sessions[id] = s
	}
	for id := int32(1); id <= 3; id++ {
		register(id)
	}
	waitFor(t, cache, "three brokers", func(v *meta.View) bool { return len(v.Brokers) == 3 })

	admin := &Admin{Store: st, Cache: cache, Policy: policy, MaxReplicationFactor: 1}
	var pe *PlacementError
	if err := admin.CreateTopic(ctx, TopicRequest{Name: "r", ID: "rid", Partitions: 1, RF: 2}, false); !errors.As(err, &pe) || pe.Code != 38 {
		t.Fatalf("rf=2 before replication: %v", err)
	}
	if err := admin.CreateTopic(ctx, TopicRequest{Name: "t", ID: "tid", Partitions: 6, RF: 1}, false); err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(ctx, TopicRequest{Name: "t", ID: "tid2", Partitions: 1, RF: 1}, false); !errors.As(err, &pe) || pe.Code != 36 {
		t.Fatalf("second create: %v", err)
	}
	v := cache.View()
	leaders := map[int32]int{}
	for _, p := range v.Parts["tid"] {
		leaders[p.State.Leader]++
	}
	if len(leaders) != 3 || leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("leaders not spread: %v", leaders)
	}
	if err := admin.CreatePartitions(ctx, "t", 9, nil, false); err != nil {
		t.Fatal(err)
	}
	if v := cache.View(); len(v.Parts["tid"]) != 9 || v.Topics["t"].Partitions != 9 {
		t.Fatalf("after CreatePartitions: %d partitions", len(v.Parts["tid"]))
	}

	// Two drivers; one is active.
	active := make(chan int32, 10)
	run := func(id int32) context.CancelFunc {
		dctx, dcancel := context.WithCancel(ctx)
		d := &Driver{NodeID: id, Store: st, Cache: cache, Policy: policy, SessionTTL: 2 * time.Second, Logger: quiet,
			OnActive: func(on bool) {
				if on {
					active <- id
				}
			}}
		done := make(chan struct{})
		go func() { d.Run(dctx); close(done) }()
		return func() { dcancel(); <-done }
	}
	stop1 := run(1)
	first := <-active
	stop2 := run(2)
	defer stop2()
	waitFor(t, cache, "controller id", func(v *meta.View) bool { return v.Controller == first })

	// Broker 2 shuts down: its partitions lose their leader.
	if err := sessions[2].Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, cache, "broker 2's partitions offline", func(v *meta.View) bool {
		off := 0
		for _, p := range v.Parts["tid"] {
			if p.State.Replicas[0] == 2 {
				if p.State.Leader != meta.NoLeader || p.State.LeaderEpoch != 1 {
					return false
				}
				off++
			}
		}
		return off == 3 && v.OfflinePartitions() == 3
	})

	// The active controller stops; the other takes over and reacts to
	// broker 2's return.
	stop1()
	if second := <-active; second == first && first == 1 {
		t.Fatalf("no hand-over: %d then %d", first, second)
	}
	register(2)
	waitFor(t, cache, "broker 2 leads again", func(v *meta.View) bool {
		for _, p := range v.Parts["tid"] {
			if p.State.Replicas[0] == 2 && (p.State.Leader != 2 || p.State.LeaderEpoch != 2) {
				return false
			}
		}
		return v.OfflinePartitions() == 0 && v.Controller == 2
	})

	// DeleteTopics is answered once every live broker holding a replica
	// has deleted it (acknowledged); broker 3 is down meanwhile and deletes
	// its replicas as strays when it returns.
	if err := sessions[3].Close(ctx); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- admin.DeleteTopic(ctx, "t") }()
	waitFor(t, cache, "t marked for deletion", func(v *meta.View) bool { return v.Topics["t"] != nil && v.Topics["t"].Deleting })
	if err := st.AckDeletion(ctx, "tid", 1, sessions[1].Lease()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-deleted:
		t.Fatalf("deleted before broker 2 acknowledged: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := st.AckDeletion(ctx, "tid", 2, sessions[2].Lease()); err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if v := cache.View(); v.Topics["t"] != nil || len(v.Parts["tid"]) != 0 || len(v.Deletions) != 0 {
		t.Fatalf("after delete: %+v %v", v.Parts["tid"], v.Deletions)
	}
	if err := admin.DeleteTopic(ctx, "t"); !errors.As(err, &pe) || pe.Code != 3 {
		t.Fatalf("second delete: %v", err)
	}
}

// TestDriverDropsOwnGhost: a candidacy left by this node's previous run
// (a crash: its lease outlives the process) does not keep the restarted
// node waiting for the lease to expire.
func TestDriverDropsOwnGhost(t *testing.T) {
	st, cache := startStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := st.Client()
	ghost, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, st.Keys().Controller()+"ghost", "1", clientv3.WithLease(ghost.ID)); err != nil {
		t.Fatal(err)
	}
	active := make(chan struct{}, 1)
	d := &Driver{NodeID: 1, Store: st, Cache: cache, Policy: func(*meta.Topic) Policy { return Policy{MinISR: 1} },
		SessionTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler),
		OnActive: func(on bool) {
			if on {
				active <- struct{}{}
			}
		}}
	dctx, dcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(dctx); close(done) }()
	defer func() { dcancel(); <-done }()
	<-active
	ttl, err := cli.TimeToLive(ctx, ghost.ID)
	if err != nil || ttl.TTL <= 0 {
		t.Fatalf("the ghost's lease expired before the node became active (ttl %v, %v): it waited for it", ttl, err)
	}
}
