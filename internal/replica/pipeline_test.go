package replica

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPlanFetch: the follower's pipelining rule (PlanFetch).
func TestPlanFetch(t *testing.T) {
	unsynced := Local{End: 10, Durable: 6}
	synced := Local{End: 10, Durable: 10}
	for _, c := range []struct {
		name                        string
		local                       Local
		durable, pipelined, drained bool
		want                        Plan
	}{
		{"kafka", unsynced, false, false, false, Plan{Offset: 10, Durable: NoOffset, Ready: true}},
		{"kafka pipelined flag ignored", unsynced, false, true, true, Plan{Offset: 10, Durable: NoOffset, Ready: true}},
		{"old leader, fsync outstanding", unsynced, true, false, false, Plan{Offset: 6, Durable: 6, Ready: false}},
		{"old leader, synced", synced, true, false, false, Plan{Offset: 10, Durable: 10, Ready: true}},
		{"pipelined, fsync outstanding", unsynced, true, true, false, Plan{Offset: 10, Durable: 6, NoWait: true, Ready: true}},
		{"pipelined, drained: wait for the fsync", unsynced, true, true, true, Plan{Offset: 10, Durable: 6, NoWait: true, Ready: false}},
		{"pipelined, synced: normal wait", synced, true, true, true, Plan{Offset: 10, Durable: 10, Ready: true}},
	} {
		if got := PlanFetch(c.local, c.durable, c.pipelined, c.drained); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestDurableEndTag(t *testing.T) {
	var tags kmsg.Tags
	if _, ok := DurableEndOf(&tags); ok {
		t.Fatal("found in empty tags")
	}
	tags.Set(DurableEndTag, DurableEndValue(1<<40+3))
	if end, ok := DurableEndOf(&tags); !ok || end != 1<<40+3 {
		t.Fatalf("got %d %v", end, ok)
	}
	// Round trip through a flexible Fetch request partition.
	p := kmsg.NewFetchRequestTopicPartition()
	p.UnknownTags = tags
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, p)
	req.Topics = append(req.Topics, rt)
	got := kmsg.NewPtrFetchRequest()
	got.Version = 12
	if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if end, ok := DurableEndOf(&got.Topics[0].Partitions[0].UnknownTags); !ok || end != 1<<40+3 {
		t.Fatalf("after a round trip: %d %v", end, ok)
	}
}

// TestDurableEndsDriveHighWatermark: a follower's fetch offset is its log
// end (Kafka); under strata.durable.acks the high watermark and ISR
// expansion count the fsynced end it reports; without the tag its fetch
// offset counts as fsynced; with durable.acks=false Kafka's rule.
func TestDurableEndsDriveHighWatermark(t *testing.T) {
	brokers := map[int32]Broker{1: {Epoch: 1}, 2: {Epoch: 2}, 3: {Epoch: 3}}
	st := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}
	local := Local{End: 10, Durable: 10}
	for _, durable := range []bool{true, false} {
		l, err := NewLeader(Config{Local: 1, BrokerEpoch: 1, MinISR: 2, LagTimeMaxMs: 1000, Durable: durable}, st, brokers, local, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.FollowerFetchDurable(2, 2, 10, 4, 0, local, 1); err != nil {
			t.Fatal(err)
		}
		want := int64(4)
		if !durable {
			want = 10
		}
		if hw := l.HighWatermark(); hw != want {
			t.Fatalf("durable=%v: high watermark %d, want %d", durable, hw, want)
		}
		// Replica 3 fetched to the end but fsynced less than the high
		// watermark: it may join the ISR only under Kafka's rule.
		res, err := l.FollowerFetchDurable(3, 3, 10, 2, 0, local, 2)
		if err != nil {
			t.Fatal(err)
		}
		if (res.Change != nil) == durable {
			t.Fatalf("durable=%v: expansion %v", durable, res.Change)
		}
		if !durable {
			continue
		}
		// Once its fsynced end reaches the high watermark and the start of
		// the leader epoch (10, Kafka's isFollowerInSync), 3 joins.
		if res, _ := l.FollowerFetchDurable(3, 3, 10, 10, 0, local, 3); res.Change == nil || l.HighWatermark() != 4 {
			t.Fatalf("expansion %v, high watermark %d", res.Change, l.HighWatermark())
		}
		// Without the tag, the fetch offset counts as fsynced.
		if _, err := l.FollowerFetch(2, 2, 10, 0, local, 4); err != nil || l.HighWatermark() != 10 {
			t.Fatalf("high watermark %d (%v), want 10", l.HighWatermark(), err)
		}
		// A report below the high watermark never moves it back.
		if _, err := l.FollowerFetchDurable(2, 2, 10, 3, 0, local, 5); err != nil || l.HighWatermark() != 10 {
			t.Fatalf("high watermark %d (%v), want 10", l.HighWatermark(), err)
		}
	}
}

// TestStalledFsyncLeavesISR: a follower that goes on fetching to the
// leader's end while its fsynced end stands still (its disk stopped
// completing fsyncs) leaves the ISR after replica.lag.time.max.ms under
// strata.durable.acks (durableProgress), else it would hold the high
// watermark back for ever; one whose fsyncs progress stays; with Kafka's
// semantics only the fetch offset counts.
func TestStalledFsyncLeavesISR(t *testing.T) {
	brokers := map[int32]Broker{1: {Epoch: 1}, 2: {Epoch: 2}, 3: {Epoch: 3}}
	st := State{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
modes:
	for _, durable := range []bool{true, false} {
		l, err := NewLeader(Config{Local: 1, BrokerEpoch: 1, MinISR: 2, LagTimeMaxMs: 1000, Durable: durable}, st, brokers, Local{End: 0, Durable: 0}, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for now := int64(100); now <= 3000; now += 100 {
			end := now / 10
			local := Local{End: end, Durable: end}
			l.LocalChanged(local, now)
			// Replica 2 fsyncs one round behind; replica 3's fsync is stuck
			// at 5.
			if _, err := l.FollowerFetchDurable(2, 2, end, end-10, 0, local, now); err != nil {
				t.Fatal(err)
			}
			if _, err := l.FollowerFetchDurable(3, 3, end, 5, 0, local, now); err != nil {
				t.Fatal(err)
			}
			if ch := l.Tick(now); ch != nil {
				if !durable || now < 1000 || len(ch.Removed) != 1 || ch.Removed[0] != 3 {
					t.Fatalf("durable=%v at %d: %s", durable, now, ch)
				}
				continue modes
			}
		}
		if durable {
			t.Fatal("replica 3 with a stalled fsync stayed in the ISR")
		}
	}
}
