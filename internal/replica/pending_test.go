package replica

import (
	"slices"
	"testing"
)

// TestSameStateKeepsPendingExpansion: the shell applies the partition's
// state at every publish of the metadata view (replica.Manager.Sync is
// level-triggered), so Update sees the state it already holds whenever
// anything else in the view changes (a broker registers, a config
// changes). That must not forget an ISR expansion in flight: until its
// compare-and-set is answered the replica being added counts in the high
// watermark (Kafka's PendingExpandIsr.maximalIsr), else the high watermark
// passes the new member's end and the commit then puts in the ISR a
// replica missing acknowledged records, which a later election can make
// leader. Found by test/sim (seed 293 before the fix).
func TestSameStateKeepsPendingExpansion(t *testing.T) {
	brokers := map[int32]Broker{1: {Epoch: 1}, 2: {Epoch: 2}, 3: {Epoch: 3}}
	st := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}
	l, err := NewLeader(Config{Local: 1, BrokerEpoch: 1, MinISR: 1, LagTimeMaxMs: 1000}, st, brokers, Local{End: 10, Durable: 10}, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.FollowerFetch(2, 2, 10, 0, Local{End: 10, Durable: 10}, 1); err != nil {
		t.Fatal(err)
	}
	// Replica 3 catches up: the leader proposes adding it.
	res, err := l.FollowerFetch(3, 3, 10, 0, Local{End: 10, Durable: 10}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Change == nil || !slices.Contains(res.Change.Added, 3) {
		t.Fatalf("no expansion proposed for 3: %+v", res)
	}
	// Something else in the view changes: the same state is applied again.
	if _, _, err := l.Update(st, 3); err != nil {
		t.Fatal(err)
	}
	if l.Pending() == nil {
		t.Fatalf("the expansion in flight was forgotten on the same state")
	}
	// The log grows and replica 2 follows; 3 does not fetch.
	l.LocalChanged(Local{End: 20, Durable: 20}, 4)
	if _, err := l.FollowerFetch(2, 2, 20, 0, Local{End: 20, Durable: 20}, 5); err != nil {
		t.Fatal(err)
	}
	if hw := l.HighWatermark(); hw > 10 {
		t.Fatalf("high watermark %d passed replica 3's end 10 while its addition is in flight", hw)
	}
	// The commit arrives: 3 is in the ISR with every record below the
	// high watermark.
	committed := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	if _, _, err := l.Update(committed, 6); err != nil {
		t.Fatal(err)
	}
	if hw := l.HighWatermark(); hw > 10 {
		t.Fatalf("high watermark %d beyond ISR member 3's end 10", hw)
	}
}
