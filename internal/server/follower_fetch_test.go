package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/servertest"
)

// TestFollowerFetching (KIP-392): three brokers in racks a, b and c with
// replica.selector.class=RackAwareReplicaSelector, a topic on all three led
// by the broker of rack a. A consumer in rack b (kgo.Rack, Fetch rack_id)
// is sent to the follower of its rack (preferred_read_replica) and reads
// every record from it, up to that follower's high watermark; once that
// follower stops, the consumer goes back to the leader and still reads
// everything. A replica selector other than Kafka's rack-aware one is
// refused; a consumer fetch at a stale leader epoch on a follower is
// FENCED_LEADER_EPOCH.
func TestFollowerFetching(t *testing.T) {
	racks := []string{"a", "b", "c"}
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3, Metrics: true,
		Settings: map[string]string{"replica.selector.class": config.RackAwareReplicaSelector},
		Logger:   servertest.TestLogger(t, slog.LevelWarn),
		Configure: func(i int, cfg *config.Broker) error {
			return cfg.Set("broker.rack", racks[i])
		},
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // whole-test bound
	defer cancel()

	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "near", -1, -1
	ct.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1, 2, 3}}}
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 30000
	for _, rt := range request(t, c.Brokers[0].Addr(), create).(*kmsg.CreateTopicsResponse).Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("create: %v", kerr.ErrorForCode(rt.ErrorCode))
		}
	}
	eventually(t, "ISR of three", func() error {
		if l, isr := partitionState(t, c.Brokers[0].Addr(), "near", 0); l != 1 || len(isr) != 3 {
			return fmt.Errorf("leader %d ISR %v", l, isr)
		}
		return nil
	})
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("near"))
	defer prod.Close()
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 50)

	before := metricValue(t, c.Brokers[1], "strata_fetch_follower_reads_total")
	cons := c.Client(kgo.ConsumeTopics("near"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Rack("b"))
	defer cons.Close()
	check := func(got []string, from int) {
		t.Helper()
		for i, v := range got {
			if v != fmt.Sprint(from+i) {
				t.Fatalf("record %d is %q", from+i, v)
			}
		}
	}
	check(readReplicated(t, cons, 50)[0], 0)
	if after := metricValue(t, c.Brokers[1], "strata_fetch_follower_reads_total"); after <= before {
		t.Fatalf("the follower in rack b served no consumer fetch (%v -> %v)", before, after)
	}
	// More records while the consumer reads from the follower.
	produce(50, 50)
	check(readReplicated(t, cons, 50)[0], 50)

	// The follower of rack b stops and acknowledged writes go on without
	// it; it returns, catches up and the consumer reads everything. (kgo
	// keeps fetching from a preferred replica until the partition's leader
	// or leader epoch changes, and an ISR shrink changes neither, as in
	// Kafka 3.6+: while the follower is down this consumer waits for it;
	// Kafka's Java consumer goes back to the leader.)
	c.Brokers[1].Close()
	produce(100, 50)
	c.Brokers[1].RestartSamePort()
	check(readReplicated(t, cons, 50)[0], 100)
	// A consumer without a rack reads everything from the leader.
	all := c.Client(kgo.ConsumeTopics("near"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer all.Close()
	check(readReplicated(t, all, 150)[0], 0)

	// A consumer fetch on a follower (rack c's) at a leader epoch newer
	// than the follower knows: UNKNOWN_LEADER_EPOCH (KIP-320).
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	fetch.ReplicaID = -1
	fetch.MaxBytes = 1 << 20
	fetch.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "near"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.CurrentLeaderEpoch, fp.FetchOffset, fp.PartitionMaxBytes = 5, 0, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	resp := requestMax(t, c.Brokers[2].Addr(), 12, fetch).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("follower fetch at a newer epoch: %v, want UNKNOWN_LEADER_EPOCH", kerr.ErrorForCode(code))
	}
	// At the current epoch the follower serves records up to its high
	// watermark.
	fetch.Topics[0].Partitions[0].CurrentLeaderEpoch = -1
	resp = requestMax(t, c.Brokers[2].Addr(), 12, fetch).(*kmsg.FetchResponse)
	if rp := resp.Topics[0].Partitions[0]; rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 || rp.HighWatermark <= 0 {
		t.Fatalf("follower fetch: %v, %d bytes, hw %d", kerr.ErrorForCode(rp.ErrorCode), len(rp.RecordBatches), rp.HighWatermark)
	}
	// Before v11 a follower does not serve consumers.
	fetch.Version = 10
	resp = requestMax(t, c.Brokers[2].Addr(), 10, fetch).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("follower fetch v10: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}
}

// TestReplicaSelectorRefused: replica.selector.class names Kafka's
// rack-aware selector or nothing; any other class is refused.
func TestReplicaSelectorRefused(t *testing.T) {
	cfg := config.DefaultBroker()
	err := cfg.Set("replica.selector.class", "com.example.MySelector")
	if err == nil || !strings.Contains(err.Error(), config.RackAwareReplicaSelector) {
		t.Fatalf("replica.selector.class=com.example.MySelector: %v", err)
	}
	for _, v := range []string{"", config.RackAwareReplicaSelector} {
		if err := cfg.Set("replica.selector.class", v); err != nil {
			t.Fatalf("replica.selector.class=%q: %v", v, err)
		}
	}
}
