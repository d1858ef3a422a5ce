package controller

import (
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
