package meta

import "testing"

// TestServingLeader: a partition's leader as clients are told: none when
// the leader is not live or holds a replicated partition under the
// election made for an earlier incarnation of it (restarted within its
// session; the controller has not elected again); a single replica serves
// at once. OfflinePartitions counts the ones without.
func TestServingLeader(t *testing.T) {
	v := &View{
		Brokers: map[int32]*Broker{1: {ID: 1, Epoch: 40}, 2: {ID: 2, Epoch: 12}},
		Topics:  map[string]*Topic{"t": {Name: "t", ID: "tid", Partitions: 5}},
		Parts: map[string][]Partition{"tid": {
			{State: PartitionState{Leader: 1, Replicas: []int32{1, 2}, ElectedBroker: 1, ElectedBrokerEpoch: 30}, ModRevision: 1}, // earlier incarnation
			{State: PartitionState{Leader: 1, Replicas: []int32{1, 2}, ElectedBroker: 1, ElectedBrokerEpoch: 40}, ModRevision: 2}, // this one
			{State: PartitionState{Leader: 3, Replicas: []int32{3, 1}}, ModRevision: 3},                                           // not live
			{State: PartitionState{Leader: 2, Replicas: []int32{2, 1}}, ModRevision: 4},                                           // no incarnation recorded
			{State: PartitionState{Leader: 1, Replicas: []int32{1}, ElectedBroker: 1, ElectedBrokerEpoch: 30}, ModRevision: 5},    // one replica: served
		}},
	}
	for i, want := range []int32{NoLeader, 1, NoLeader, 2, 1} {
		if got := v.ServingLeader(v.Parts["tid"][i].State); got != want {
			t.Errorf("partition %d: serving leader %d, want %d", i, got, want)
		}
	}
	if n := v.OfflinePartitions(); n != 2 {
		t.Errorf("OfflinePartitions %d, want 2", n)
	}
}
