package controller

import (
	"slices"
	"testing"

	"github.com/strata-io/strata/internal/meta"
)

// TestReassignSteps: KIP-455's steps on the partition state, as Kafka's
// PartitionReassignmentReplicas / tryCompleteReassignment /
// PartitionReassignmentRevert do them.
func TestReassignSteps(t *testing.T) {
	s := &State{Brokers: map[int32]BrokerInfo{1: {ID: 1}, 2: {ID: 2}, 3: {ID: 3}, 4: {ID: 4}}, Topics: map[string]*TopicInfo{
		"t": {Name: "t", ID: "id", Parts: []meta.Partition{part(0, 1, []int32{1, 2}, []int32{1, 2})}},
	}}
	set := func(st meta.PartitionState) { s.Topics["t"].Parts[0].State = st; s.Topics["t"].Parts[0].ModRevision++ }
	d, changed, err := s.Reassign(Reassignment{Topic: "t", Target: []int32{3, 4}}, true)
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	st := d.New
	if !slices.Equal(st.Replicas, []int32{3, 4, 1, 2}) || !slices.Equal(st.Adding, []int32{3, 4}) || !slices.Equal(st.Removing, []int32{1, 2}) ||
		st.Leader != 1 || st.LeaderEpoch != 3 || st.PartitionEpoch != 6 {
		t.Fatalf("started: %v", st)
	}
	set(st)
	if l := s.Reassignments(nil); len(l) != 1 || !slices.Equal(l[0].Adding, []int32{3, 4}) {
		t.Fatalf("list: %+v", l)
	}
	// Not complete until every target replica is in the ISR.
	st.ISR = []int32{1, 2, 3}
	if ns := s.completeReassignment(st, Policy{}); !ns.Equal(st) {
		t.Fatalf("completed early: %v", ns)
	}
	// Cancel: back to [1 2], the adding replica leaves the ISR.
	set(st)
	d, _, err = s.Reassign(Reassignment{Topic: "t"}, true)
	if err != nil || !slices.Equal(d.New.Replicas, []int32{1, 2}) || !slices.Equal(d.New.ISR, []int32{1, 2}) || len(d.New.Adding) != 0 || d.New.Leader != 1 {
		t.Fatalf("cancelled: %v %v", d.New, err)
	}
	// Complete: target [3 4] in the ISR; the leader moves into it with a
	// new epoch.
	st.ISR = []int32{1, 2, 3, 4}
	ns := s.completeReassignment(st, Policy{})
	if !slices.Equal(ns.Replicas, []int32{3, 4}) || !slices.Equal(ns.ISR, []int32{3, 4}) || ns.Leader != 3 || ns.LeaderEpoch != 4 || len(ns.Removing) != 0 {
		t.Fatalf("completed: %v", ns)
	}
	// Replication factor change refused without AllowReplicationFactorChange.
	set(part(0, 1, []int32{1, 2}, []int32{1, 2}).State)
	if _, _, err := s.Reassign(Reassignment{Topic: "t", Target: []int32{1, 2, 3}}, false); err == nil || err.(*PlacementError).Code != codeInvalidReplicationFactor {
		t.Fatalf("rf change: %v", err)
	}
	// A pure removal of an in-sync set completes at once.
	d, _, _ = s.Reassign(Reassignment{Topic: "t", Target: []int32{2}}, true)
	if !slices.Equal(d.New.Replicas, []int32{2}) || d.New.Leader != 2 || len(d.New.Removing) != 0 {
		t.Fatalf("removal: %v", d.New)
	}
}
