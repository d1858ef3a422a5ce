package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/servertest"
)

// partitionState returns a partition's leader and ISR as broker addr's
// Metadata reports them.
func partitionState(t *testing.T, addr, topic string, p int32) (leader int32, isr []int32) {
	t.Helper()
	md := request(t, addr, &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}}).(*kmsg.MetadataResponse)
	for _, mp := range md.Topics[0].Partitions {
		if mp.Partition == p {
			return mp.Leader, slices.Sorted(slices.Values(mp.ISR))
		}
	}
	return -1, nil
}

// readReplicated consumes a topic from the start through the cluster until want
// records arrived, and returns their values in order per partition.
func readReplicated(t *testing.T, cl *kgo.Client, want int) map[int32][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[int32][]string{}
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", n, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			n++
		})
	}
	return out
}

// TestReplicatedCluster: three combined nodes and a broker-only fourth, a
// topic with replication factor 3 on nodes 1, 2 and 4 and
// min.insync.replicas=2 (the controllers 1-3 keep a quorum whichever two
// of its replicas stop). acks=all produce through the leader is replicated
// to every replica (the ISR is all three); with one follower stopped the
// ISR shrinks and produce goes on; with both followers stopped the leader
// refuses acks=all with NOT_ENOUGH_REPLICAS (Kafka's
// Partition.appendRecordsToLeader); the followers return, catch up and
// rejoin the ISR; when the leader's broker stops, the controller elects
// another ISR member and every acknowledged record is read back from it.
// A second topic with replication factor 2 (nodes 1 and 4) and
// min.insync.replicas=1 accepts acks=all with its follower down, as Kafka
// does, and fails over to it with every record.
func TestReplicatedCluster(t *testing.T) {
	c := startCluster(t, 4, map[string]string{"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200"})
	// A bound on the whole test (stops and restarts included), not a
	// timed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	create := kmsg.NewPtrCreateTopicsRequest()
	for _, spec := range []struct {
		name     string
		replicas []int32
		minISR   string
	}{{"rep", []int32{1, 2, 4}, "2"}, {"rep2", []int32{1, 4}, "1"}} {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = spec.name, -1, -1
		ct.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: spec.replicas}}
		ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "min.insync.replicas", Value: kmsg.StringPtr(spec.minISR)}}
		create.Topics = append(create.Topics, ct)
	}
	create.TimeoutMillis = 30000
	for _, rt := range request(t, c.Brokers[2].Addr(), create).(*kmsg.CreateTopicsResponse).Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("create %s: %v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
		}
	}
	all, all2 := []int32{1, 2, 4}, []int32{1, 4}
	isrIs := func(addr, topic string, want []int32) func() error {
		return func() error {
			if _, isr := partitionState(t, addr, topic, 0); !slices.Equal(isr, want) {
				return fmt.Errorf("ISR of %s: %v, want %v", topic, isr, want)
			}
			return nil
		}
	}
	eventually(t, "ISR of three", isrIs(c.Brokers[0].Addr(), "rep", all))
	eventually(t, "ISR of two", isrIs(c.Brokers[0].Addr(), "rep2", all2))
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(20))
	acked := map[string]int{}
	produce := func(topic string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(acked[topic]))}).FirstErr(); err != nil {
				t.Fatalf("%s record %d: %v", topic, acked[topic], err)
			}
			acked[topic]++
		}
	}
	produce("rep", 50)
	produce("rep2", 50)

	leader, _ := partitionState(t, c.Brokers[0].Addr(), "rep", 0)
	if leader != 1 {
		t.Fatalf("leader %d, want the first assigned replica, 1", leader)
	}
	followers := []int{3, 1} // nodes 4 and 2
	// One follower down: the ISR shrinks to two, acks=all goes on.
	c.Brokers[followers[0]].Close()
	eventually(t, "ISR without the stopped follower", func() error {
		if _, isr := partitionState(t, c.Brokers[leaderIndex(c.Brokers, leader)].Addr(), "rep", 0); len(isr) != 2 {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
	produce("rep", 20)
	// Replication factor 2 with min.insync.replicas=1 keeps accepting
	// acks=all with its one follower down.
	eventually(t, "rep2's ISR without its follower", isrIs(c.Brokers[0].Addr(), "rep2", []int32{1}))
	produce("rep2", 20)
	// Two down: NOT_ENOUGH_REPLICAS for acks=all.
	c.Brokers[followers[1]].Close()
	eventually(t, "ISR of the leader alone", func() error {
		if _, isr := partitionState(t, c.Brokers[leaderIndex(c.Brokers, leader)].Addr(), "rep", 0); len(isr) != 1 {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
	one := c.Brokers[leaderIndex(c.Brokers, leader)].Client(kgo.DefaultProduceTopic("rep"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	err := one.ProduceSync(ctx, &kgo.Record{Value: []byte("refused")}).FirstErr()
	one.Close()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with an ISR of one: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	produce("rep2", 10)
	// Both return and catch up; the ISR is whole again.
	c.Brokers[followers[0]].RestartSamePort()
	c.Brokers[followers[1]].RestartSamePort()
	eventually(t, "ISR of three again", isrIs(c.Brokers[2].Addr(), "rep", all))
	eventually(t, "ISR of two again", isrIs(c.Brokers[2].Addr(), "rep2", all2))
	produce("rep", 20)
	produce("rep2", 20)
	// The leader stops: another ISR member leads with every record.
	c.Brokers[leaderIndex(c.Brokers, leader)].Close()
	other := c.Brokers[followers[0]]
	for _, topic := range []string{"rep", "rep2"} {
		eventually(t, "a new leader", func() error {
			if l, _ := partitionState(t, other.Addr(), topic, 0); l == leader || l < 0 {
				return fmt.Errorf("leader of %s: %d", topic, l)
			}
			return nil
		})
		produce(topic, 10)
		cons := other.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := readReplicated(t, cons, acked[topic])[0]
		cons.Close()
		for i, v := range got {
			if v != fmt.Sprint(i) {
				t.Fatalf("%s record %d is %q (of %d acknowledged)", topic, i, v, acked[topic])
			}
		}
	}
	prod.Close()
}

// leaderIndex is the index in bs of broker id.
func leaderIndex(bs []*servertest.Broker, id int32) int {
	for i, b := range bs {
		if b.NodeID == id {
			return i
		}
	}
	return -1
}
