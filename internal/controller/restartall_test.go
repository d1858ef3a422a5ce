package controller

import (
	"testing"

	"github.com/strata-io/strata/internal/meta"
)

// TestReconcileRestartOfEveryBrokerElectsOnce: every broker of a
// partition restarted (all re-registered with new broker epochs, cleanly).
// Every ISR member is then of an earlier incarnation (KIP-903), the ISR
// empties into the ELR and one eligible replica is elected (KIP-966) as its
// new incarnation. The next round must leave that leader alone: found by
// the e2e TestReadyMeansLeaders (kill -9 of every node), where the second
// round took the new leader for a stale ISR member (its ISR epoch kept
// from its previous incarnation) and elected another broker at the next
// leader epoch right after the brokers said they were ready
// (NOT_LEADER_OR_FOLLOWER on their first requests).
func TestReconcileRestartOfEveryBrokerElectsOnce(t *testing.T) {
	st := func(ps meta.PartitionState) *State {
		return &State{Brokers: map[int32]BrokerInfo{1: {ID: 1, Epoch: 18}, 2: {ID: 2, Epoch: 15}, 3: {ID: 3, Epoch: 16}},
			Topics: map[string]*TopicInfo{"t": {Name: "t", ID: "id", Policy: Policy{MinISR: 2},
				Parts: []meta.Partition{{TopicPartition: meta.TopicPartition{TopicID: "id"}, State: ps, ModRevision: 5}}}}}
	}
	before := meta.PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0,
		ElectedBroker: 1, ElectedBrokerEpoch: 7, ISREpochs: map[int32]int64{1: 7, 2: 5, 3: 8}}
	ds := st(before).Reconcile()
	if len(ds) != 1 {
		t.Fatalf("first round: %+v", ds)
	}
	first := ds[0].New
	if first.Leader == meta.NoLeader || first.LeaderEpoch != 1 || len(first.ISR) != 1 || first.ISR[0] != first.Leader {
		t.Fatalf("first round elects one eligible replica as the ISR: %+v", first)
	}
	if e, want := first.ISREpochs[first.Leader], st(first).Brokers[first.Leader].Epoch; e != want {
		t.Fatalf("the new leader's ISR epoch is %d, want its registration's %d: %+v", e, want, first)
	}
	if ds := st(first).Reconcile(); len(ds) != 0 {
		t.Fatalf("second round changed the partition again: %+v", ds)
	}
}
