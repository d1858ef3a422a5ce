package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/meta"
)

// TestMetadataNamesNoEarlierIncarnationLeader: a partition whose state
// names a broker as leader under the election made for that broker's
// previous incarnation (it restarted within its session; the controller
// has not elected again yet) is LEADER_NOT_AVAILABLE with leader -1, as
// Kafka answers for a partition without an unfenced leader; the broker is
// listed again once elected for its current incarnation. Before, Metadata
// named the restarted broker, which refused to lead (NOT_LEADER_OR_FOLLOWER).
func TestMetadataNamesNoEarlierIncarnationLeader(t *testing.T) {
	ep := []meta.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, Protocol: "PLAINTEXT"}}
	topic := &meta.Topic{Name: "t", ID: "7b8d4b52-5e4e-4f57-9a43-0d6a6f6b1c11", Partitions: 3}
	v := &meta.View{
		Brokers: map[int32]*meta.Broker{1: {ID: 1, Listeners: ep, Epoch: 40}, 2: {ID: 2, Listeners: ep, Epoch: 12}},
		Topics:  map[string]*meta.Topic{"t": topic},
		Parts: map[string][]meta.Partition{topic.ID: {
			// Led by broker 1, elected for its incarnation of epoch 30;
			// it restarted and registered at epoch 40.
			{State: meta.PartitionState{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, ElectedBroker: 1, ElectedBrokerEpoch: 30}, ModRevision: 5},
			// Elected for broker 1's current incarnation.
			{State: meta.PartitionState{Leader: 1, LeaderEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, ElectedBroker: 1, ElectedBrokerEpoch: 40}, ModRevision: 6},
			// An election that recorded no incarnation (older states).
			{State: meta.PartitionState{Leader: 2, LeaderEpoch: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}}, ModRevision: 7},
		}},
	}
	mt := viewTopicMetadata(v, topic, "PLAINTEXT", true)
	if len(mt.Partitions) != 3 {
		t.Fatalf("%d partitions", len(mt.Partitions))
	}
	for i, want := range []struct {
		leader int32
		code   int16
	}{{-1, kerr.LeaderNotAvailable.Code}, {1, 0}, {2, 0}} {
		if p := mt.Partitions[i]; p.Leader != want.leader || p.ErrorCode != want.code {
			t.Errorf("partition %d: leader %d error %v, want leader %d error %v", i, p.Leader, kerr.ErrorForCode(p.ErrorCode),
				want.leader, kerr.ErrorForCode(want.code))
		}
	}
}
