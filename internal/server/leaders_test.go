package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/servertest"
)

// createAssigned creates a topic with an explicit replica assignment
// through addr and waits until every partition's ISR is complete.
func createAssigned(t *testing.T, c *servertest.Cluster, topic string, assign [][]int32) {
	t.Helper()
	createAssignedConfigs(t, c, topic, assign, nil)
}

// createAssignedConfigs is createAssigned with topic configs.
func createAssignedConfigs(t *testing.T, c *servertest.Cluster, topic string, assign [][]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	for k, v := range configs {
		ct.Configs = append(ct.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(v)})
	}
	for i, r := range assign {
		ct.ReplicaAssignment = append(ct.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(i), Replicas: r})
	}
	req.Topics = append(req.Topics, ct)
	req.TimeoutMillis = 30000
	if rt := request(t, c.Brokers[0].Addr(), req).(*kmsg.CreateTopicsResponse).Topics[0]; rt.ErrorCode != 0 {
		t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(rt.ErrorCode))
	}
	for i, r := range assign {
		eventually(t, fmt.Sprintf("ISR of %s-%d", topic, i), func() error {
			if _, isr := partitionState(t, c.Brokers[1].Addr(), topic, int32(i)); len(isr) != len(r) {
				return fmt.Errorf("ISR %v", isr)
			}
			return nil
		})
	}
}

// leaderIs waits until broker addr's metadata names want the leader.
func leaderIs(t *testing.T, addr, topic string, p, want int32) {
	t.Helper()
	eventually(t, fmt.Sprintf("leader of %s-%d is %d", topic, p, want), func() error {
		if l, _ := partitionState(t, addr, topic, p); l != want {
			return fmt.Errorf("leader %d", l)
		}
		return nil
	})
}

// electOne runs ElectLeaders for one partition with kadm and returns its
// result's error.
func electOne(t *testing.T, adm *kadm.Client, how kadm.ElectLeadersHow, topic string, p int32) error {
	t.Helper()
	s := kadm.TopicsSet{}
	s.Add(topic, p)
	res, err := adm.ElectLeaders(ctxT(t), how, s)
	if err != nil {
		t.Fatalf("ElectLeaders: %v", err)
	}
	r, ok := res[topic][p]
	if !ok {
		t.Fatalf("ElectLeaders answered no result for %s-%d: %+v", topic, p, res)
	}
	return r.Err
}

// TestElectLeaders: ElectLeaders (key 43) through kadm on three in-process
// nodes with auto.leader.rebalance.enable=false, with Kafka's answers
// (ReplicationControlManager.electLeader): PREFERRED where the preferred
// replica leads is ELECTION_NOT_NEEDED; with it down the leader moves
// (controlled shutdown) and PREFERRED is PREFERRED_LEADER_NOT_AVAILABLE;
// UNCLEAN on a partition with a leader is ELECTION_NOT_NEEDED; the
// preferred replica returns and, once in the ISR, PREFERRED gives it the
// leadership back (no record lost); an unknown partition is
// UNKNOWN_TOPIC_OR_PARTITION; an election over all partitions leaves the
// not-needed ones out.
func TestElectLeaders(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"auto.leader.rebalance.enable": "false",
		"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createAssigned(t, c, "el", [][]int32{{1, 2, 3}})
	adm := kadm.NewClient(c.Client())
	if err := electOne(t, adm, kadm.ElectPreferredReplica, "el", 0); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("PREFERRED with the preferred leader: %v, want ELECTION_NOT_NEEDED", err)
	}
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("el"), kgo.RecordRetries(30))
	n := 0
	produce := func(k int) {
		t.Helper()
		for i := 0; i < k; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(n))}).FirstErr(); err != nil {
				t.Fatalf("record %d: %v", n, err)
			}
			n++
		}
	}
	produce(20)
	c.Brokers[0].Close() // node 1, the preferred leader
	leaderIs(t, c.Brokers[1].Addr(), "el", 0, 2)
	produce(20)
	adm2 := kadm.NewClient(c.Brokers[1].Client())
	if err := electOne(t, adm2, kadm.ElectPreferredReplica, "el", 0); !errors.Is(err, kerr.PreferredLeaderNotAvailable) {
		t.Fatalf("PREFERRED with the preferred replica down: %v, want PREFERRED_LEADER_NOT_AVAILABLE", err)
	}
	if err := electOne(t, adm2, kadm.ElectLiveReplica, "el", 0); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("UNCLEAN with a leader: %v, want ELECTION_NOT_NEEDED", err)
	}
	if err := electOne(t, adm2, kadm.ElectPreferredReplica, "el", 7); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("PREFERRED of a partition that does not exist: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	c.Brokers[0].Open()
	eventually(t, "node 1 back in the ISR", func() error {
		if _, isr := partitionState(t, c.Brokers[1].Addr(), "el", 0); !slices.Contains(isr, 1) {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
	if l, _ := partitionState(t, c.Brokers[1].Addr(), "el", 0); l != 2 {
		t.Fatalf("leader %d moved without auto.leader.rebalance.enable", l)
	}
	if err := electOne(t, adm2, kadm.ElectPreferredReplica, "el", 0); err != nil {
		t.Fatalf("PREFERRED with the preferred replica in the ISR: %v", err)
	}
	leaderIs(t, c.Brokers[1].Addr(), "el", 0, 1)
	produce(20)
	// Every partition: nothing to do, nothing listed.
	res, err := adm2.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil || len(res) != 0 {
		t.Fatalf("ElectLeaders of every partition: %v %+v", err, res)
	}
	cons := c.Client(kgo.ConsumeTopics("el"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := readReplicated(t, cons, n)[0]
	for i, v := range got {
		if v != fmt.Sprint(i) {
			t.Fatalf("record %d is %q", i, v)
		}
	}
}

// TestAutoLeaderRebalance: with auto.leader.rebalance.enable and a
// one-second leader.imbalance.check.interval.seconds, a broker that was
// stopped gets its preferred leaderships back once it is in their ISRs
// (Kafka's checkAndTriggerAutoLeaderRebalance: one of one preferred
// partition led elsewhere is above leader.imbalance.per.broker.percentage).
func TestAutoLeaderRebalance(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"leader.imbalance.check.interval.seconds": "1",
		"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200"})
	createAssigned(t, c, "bal", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	c.Brokers[2].Close() // node 3
	leaderIs(t, c.Brokers[0].Addr(), "bal", 2, 1)
	c.Brokers[2].Open()
	leaderIs(t, c.Brokers[0].Addr(), "bal", 2, 3)
	for p, want := range []int32{1, 2, 3} {
		leaderIs(t, c.Brokers[0].Addr(), "bal", int32(p), want)
	}
	if _, isr := partitionState(t, c.Brokers[0].Addr(), "bal", 2); !slices.Contains(isr, 3) {
		t.Fatalf("node 3 leads bal-2 outside the ISR %v", isr)
	}
}
