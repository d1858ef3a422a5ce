package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/meta"
)

// TestReassignmentsDecideOnSyncedView: two brokers' Admins over one store,
// each with its own metadata cache (its own watch). A topic created
// through broker A is reassigned through broker B at once, and the
// reassignment B started is listed through A at once: each is decided on
// a view synced with the store (Kafka's controller decides on its
// committed state). Before, B's AlterPartitionReassignments answered
// UNKNOWN_TOPIC_OR_PARTITION while its watch had not delivered the topic,
// and A's ListPartitionReassignments left out the move B had just started.
func TestReassignmentsDecideOnSyncedView(t *testing.T) {
	st, cacheA := startStore(t)
	cacheB, err := meta.StartCache(context.Background(), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cacheB.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := meta.NewSession(ctx, st.Client(), 10*time.Second, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for id := int32(1); id <= 3; id++ {
		if _, err := st.Register(ctx, meta.Broker{ID: id, DirectoryID: fmt.Sprint("dir-", id)}, s.Lease()); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*meta.Cache{cacheA, cacheB} {
		waitFor(t, c, "three brokers", func(v *meta.View) bool { return len(v.Brokers) == 3 })
	}
	policy := func(*meta.Topic) Policy { return Policy{MinISR: 1} }
	a := &Admin{Store: st, Cache: cacheA, Policy: policy}
	b := &Admin{Store: st, Cache: cacheB, Policy: policy}
	// Several rounds: each is a race the unsynced view lost most times.
	for i := 0; i < 5; i++ {
		name := fmt.Sprint("moved-", i)
		if err := a.CreateTopic(ctx, TopicRequest{Name: name, ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Partitions: 1,
			Assignment: map[int32][]int32{0: {1, 2}}}, false); err != nil {
			t.Fatal(err)
		}
		res := b.AlterReassignments(ctx, []Reassignment{{Topic: name, Partition: 0, Target: []int32{1, 2, 3}}}, true)
		if res[0].Err != nil {
			t.Fatalf("round %d: reassign through another broker right after the creation: %v", i, res[0].Err)
		}
		l, err := a.ListReassignments(ctx, map[string][]int32{name: {0}})
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != 1 || !slices.Equal(l[0].Adding, []int32{3}) {
			t.Fatalf("round %d: reassignments listed through another broker right after the start: %+v, want %s-0 adding [3]", i, l, name)
		}
	}
}
