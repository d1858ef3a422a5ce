package controller

import (
	"maps"
	"slices"
	"testing"

	"github.com/strata-io/strata/internal/meta"
)

// TestReconcileFencesRestartedLeader: a leader whose registration epoch
// (KIP-903 broker epoch) differs from the one recorded at its election
// restarted within its session; the controller fences the old
// incarnation (Kafka's handleBrokerFenced): it leaves the ISR and the
// partition is elected again at a new leader epoch, even when the
// restarted broker is the only one eligible.
func TestReconcileFencesRestartedLeader(t *testing.T) {
	brokers := func(e1 int64) map[int32]BrokerInfo {
		return map[int32]BrokerInfo{1: {ID: 1, Epoch: e1}, 2: {ID: 2, Epoch: 20}, 3: {ID: 3, Epoch: 30}}
	}
	state := func(isr []int32, e1 int64, p meta.Partition) *State {
		p.State.ISR = isr
		return &State{Brokers: brokers(e1), Topics: map[string]*TopicInfo{"t": {Name: "t", ID: "id", Policy: Policy{MinISR: 2}, Parts: []meta.Partition{p}}}}
	}
	p := part(0, 1, []int32{1, 2, 3}, nil)

	// An unrecorded leader gets its incarnation recorded, nothing else.
	ds := state([]int32{1, 2, 3}, 10, p).Reconcile()
	if len(ds) != 1 || ds[0].New.Leader != 1 || ds[0].New.LeaderEpoch != 3 || ds[0].New.ElectedBroker != 1 || ds[0].New.ElectedBrokerEpoch != 10 {
		t.Fatalf("record: %+v", ds)
	}
	p.State = ds[0].New
	if ds := state([]int32{1, 2, 3}, 10, p).Reconcile(); len(ds) != 0 {
		t.Fatalf("idempotent: %+v", ds)
	}

	// Broker 1 restarted (epoch 11): broker 2 leads at a new epoch, 1 left the ISR.
	ds = state([]int32{1, 2, 3}, 11, p).Reconcile()
	if len(ds) != 1 || ds[0].New.Leader != 2 || ds[0].New.LeaderEpoch != 4 || ds[0].New.ElectedBrokerEpoch != 20 ||
		len(ds[0].New.ISR) != 2 || ds[0].New.ISR[0] != 2 {
		t.Fatalf("restart: %+v", ds)
	}

	// Only the restarted broker is in sync: it leads again, at a new epoch.
	ds = state([]int32{1}, 11, p).Reconcile()
	if len(ds) != 1 || ds[0].New.Leader != 1 || ds[0].New.LeaderEpoch != 4 || ds[0].New.ElectedBrokerEpoch != 11 {
		t.Fatalf("sole replica restart: %+v", ds)
	}
}

// TestReconcileDropsRestartedISRMember: KIP-903 per member. The ISR
// records each member's broker epoch; a follower whose broker
// re-registered (restarted within its session, so its log may miss what
// it had acknowledged as a member) leaves the ISR — to the ELR when the
// ISR falls below min.insync.replicas — and can no longer be elected from
// it, nor become the preferred leader, until it rejoins as its new
// incarnation.
func TestReconcileDropsRestartedISRMember(t *testing.T) {
	st := func(e2 int64, minISR int, ps meta.PartitionState) *State {
		return &State{Brokers: map[int32]BrokerInfo{1: {ID: 1, Epoch: 10}, 2: {ID: 2, Epoch: e2}, 3: {ID: 3, Epoch: 30}},
			Topics: map[string]*TopicInfo{"t": {Name: "t", ID: "id", Policy: Policy{MinISR: minISR},
				Parts: []meta.Partition{{TopicPartition: meta.TopicPartition{TopicID: "id"}, State: ps, ModRevision: 5}}}}}
	}
	// Creation records every member's epoch and the leader's.
	ds, err := st(20, 2, meta.PartitionState{}).CreateTopic(TopicRequest{Name: "n", ID: "nid", Partitions: 1, RF: 3})
	if err != nil || len(ds) != 1 || len(ds[0].New.ISREpochs) != 3 || ds[0].New.ElectedBrokerEpoch == 0 {
		t.Fatalf("create: %v %+v", err, ds)
	}
	base := meta.PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 7,
		ElectedBroker: 1, ElectedBrokerEpoch: 10, ISREpochs: map[int32]int64{1: 10, 2: 20, 3: 30}}
	if ds := st(20, 2, base).Reconcile(); len(ds) != 0 {
		t.Fatalf("in line: %+v", ds)
	}
	// Broker 2 restarted (epoch 21): it leaves the ISR, the leader stays.
	ds = st(21, 2, base).Reconcile()
	if len(ds) != 1 || ds[0].New.Leader != 1 || ds[0].New.LeaderEpoch != 3 || !slices.Equal(ds[0].New.ISR, []int32{1, 3}) ||
		len(ds[0].New.ELR) != 0 || ds[0].New.ISREpochs[2] != 0 || ds[0].New.PartitionEpoch != 8 {
		t.Fatalf("restarted follower: %+v", ds)
	}
	// With min.insync.replicas=3 it becomes eligible (ELR), as a fenced one.
	ds = st(21, 3, base).Reconcile()
	if len(ds) != 1 || !slices.Equal(ds[0].New.ISR, []int32{1, 3}) || !slices.Equal(ds[0].New.ELR, []int32{2}) {
		t.Fatalf("restarted follower under min ISR: %+v", ds)
	}
	// Leader 1 gone too: broker 3, not the restarted 2 (first in replica
	// order), is elected.
	s := st(21, 1, base)
	delete(s.Brokers, 1)
	ds = s.Reconcile()
	if len(ds) != 1 || ds[0].New.Leader != 3 || !slices.Equal(ds[0].New.ISR, []int32{3}) {
		t.Fatalf("election must not pick the restarted member: %+v", ds)
	}
	// Only 1 and the restarted 2 in the ISR, 2 restarted uncleanly (it may
	// have lost acknowledged records): no leader rather than 2. After a
	// clean restart it is an eligible replica (KIP-966) and may lead.
	two := base.Clone()
	two.ISR, two.ISREpochs = []int32{1, 2}, map[int32]int64{1: 10, 2: 20}
	s = st(21, 1, two)
	delete(s.Brokers, 1)
	s.Brokers[2] = BrokerInfo{ID: 2, Epoch: 21, UncleanShutdown: true}
	ds = s.Reconcile()
	if len(ds) != 1 || ds[0].New.Leader != meta.NoLeader {
		t.Fatalf("unclean restarted member elected: %+v", ds)
	}
	// A preferred election to a restarted member is refused.
	pref := base.Clone()
	pref.Leader, pref.ElectedBroker, pref.ElectedBrokerEpoch = 3, 3, 30
	pref.Replicas = []int32{2, 1, 3}
	if _, err := st(21, 2, pref).ElectLeader("t", 0, ElectPreferred); err == nil {
		t.Fatalf("preferred election to a restarted member accepted")
	}
	if d, err := st(20, 2, pref).ElectLeader("t", 0, ElectPreferred); err != nil || d.New.Leader != 2 || d.New.ElectedBrokerEpoch != 20 {
		t.Fatalf("preferred election: %v %+v", err, d)
	}
	// A state without recorded epochs (older writer) gets them recorded.
	old := base.Clone()
	old.ISREpochs = nil
	ds = st(20, 2, old).Reconcile()
	if len(ds) != 1 || !maps.Equal(ds[0].New.ISREpochs, base.ISREpochs) {
		t.Fatalf("backfill: %+v", ds)
	}
}
