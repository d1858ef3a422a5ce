package controller

import (
	"testing"

	"github.com/strata-io/strata/internal/meta"
)

func part(i int32, leader int32, replicas, isr []int32) meta.Partition {
	return meta.Partition{TopicPartition: meta.TopicPartition{TopicID: "id", Partition: i}, ModRevision: 1,
		State: meta.PartitionState{Replicas: replicas, ISR: isr, Leader: leader, LeaderEpoch: 3, PartitionEpoch: 5}}
}

// TestRebalancePercentage: Kafka's per-broker imbalance ratio (partitions
// preferring a broker led elsewhere / partitions preferring it) must
// exceed leader.imbalance.per.broker.percentage; only preferred replicas
// that are live and in the ISR get their leadership back.
func TestRebalancePercentage(t *testing.T) {
	s := &State{Brokers: map[int32]BrokerInfo{1: {ID: 1}, 2: {ID: 2}, 3: {ID: 3}}, Topics: map[string]*TopicInfo{
		"t": {Name: "t", ID: "id", Parts: []meta.Partition{
			part(0, 2, []int32{1, 2, 3}, []int32{1, 2, 3}), // preferred 1, led by 2
			part(1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}),
			part(2, 1, []int32{1, 2, 3}, []int32{1, 2, 3}),
			part(3, 1, []int32{1, 2, 3}, []int32{1, 2, 3}),
			part(4, 1, []int32{3, 2, 1}, []int32{1, 2}), // preferred 3 out of the ISR
		}},
	}}
	// Broker 1: 1 of 4 = 25%.
	if ds := s.Rebalance(25); len(ds) != 0 {
		t.Fatalf("at 25%% allowed: %v", ds)
	}
	ds := s.Rebalance(10)
	if len(ds) != 1 || ds[0].TP.Partition != 0 || ds[0].New.Leader != 1 || ds[0].New.LeaderEpoch != 4 || ds[0].New.PartitionEpoch != 6 {
		t.Fatalf("at 10%% allowed: %+v", ds)
	}
	// ElectLeader's answers.
	if _, err := s.ElectLeader("t", 4, ElectPreferred); err.(*ElectionError).Code != codePreferredLeaderNotAvailable {
		t.Fatalf("preferred out of the ISR: %v", err)
	}
	if _, err := s.ElectLeader("t", 1, ElectPreferred); !ElectionNotNeeded(err) {
		t.Fatalf("preferred leading: %v", err)
	}
	if _, err := s.ElectLeader("t", 1, ElectUnclean); !ElectionNotNeeded(err) {
		t.Fatalf("unclean with a leader: %v", err)
	}
	if _, err := s.ElectLeader("t", 9, ElectPreferred); err.(*ElectionError).Code != codeUnknownTopicOrPartition {
		t.Fatalf("unknown partition: %v", err)
	}
	// Unclean with the leader and the ISR gone: the live out-of-sync
	// replica leads, recovering.
	s.Topics["t"].Parts[4] = part(4, meta.NoLeader, []int32{3, 2, 1}, nil)
	delete(s.Brokers, 1)
	delete(s.Brokers, 2)
	d, err := s.ElectLeader("t", 4, ElectUnclean)
	if err != nil || d.New.Leader != 3 || d.New.LeaderRecovery != meta.Recovering {
		t.Fatalf("unclean: %+v %v", d.New, err)
	}
	delete(s.Brokers, 3)
	if _, err := s.ElectLeader("t", 4, ElectUnclean); err.(*ElectionError).Code != codeEligibleLeadersNotAvailable {
		t.Fatalf("unclean with nobody live: %v", err)
	}
}
