package replica

import (
	"maps"
	"testing"

	"github.com/strata-io/strata/internal/meta"
)

// TestAlterPartitionRecordsISREpochs: KIP-903 per member. An expansion
// records the added member's broker epoch (the incarnation that fetched)
// and the leader's; a shrink drops the removed member's entry; members
// keep the epoch they joined with.
func TestAlterPartitionRecordsISREpochs(t *testing.T) {
	cur := meta.PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 5,
		ISREpochs: map[int32]int64{1: 10, 3: 30}}
	ns, err := AlterPartition(cur, 1, &IsrChange{LeaderEpoch: 2, PartitionEpoch: 5, LeaderBrokerEpoch: 10,
		ISR: []int32{1, 2, 3}, Added: []int32{2}, AddedEpochs: map[int32]int64{2: 21}}, 2)
	if err != nil || !maps.Equal(ns.ISREpochs, map[int32]int64{1: 10, 2: 21, 3: 30}) {
		t.Fatalf("expand: %v %v", err, ns.ISREpochs)
	}
	ns, err = AlterPartition(ns, 1, &IsrChange{LeaderEpoch: 2, PartitionEpoch: 6, LeaderBrokerEpoch: 10, ISR: []int32{1, 2}, Removed: []int32{3}}, 2)
	if err != nil || !maps.Equal(ns.ISREpochs, map[int32]int64{1: 10, 2: 21}) {
		t.Fatalf("shrink: %v %v", err, ns.ISREpochs)
	}
}
