package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-io/strata/internal/server"
)

// fetchMax caps a client's Fetch version at v (tests written for the
// topic-name versions, v12 and below; kgo otherwise negotiates v15).
func fetchMax(v int16) kgo.Opt {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(1, v)
	return kgo.MaxVersions(vs)
}

// requestMax sends one request to addr with the Fetch version capped at
// maxFetch (kgo negotiates the highest version both sides have).
func requestMax(t *testing.T, addr string, maxFetch int16, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), fetchMax(maxFetch))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := cl.SeedBrokers()[0].Request(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestReplicaFetchV15: followers fetch with Fetch v15 (KIP-903
// ReplicaState, KIP-516 topic ids) and replicate; the leader answers a
// follower's fetch carrying a broker epoch older than the follower's
// registration NOT_LEADER_OR_FOLLOWER (a fetch from a previous
// incarnation; Kafka's Replica.updateFetchStateOrThrow), takes the current
// epoch, and still serves Fetch v12 (top-level replica id, no epoch) and
// consumers at v12 and v15 (by topic id; an unknown id is
// UNKNOWN_TOPIC_ID).
func TestReplicaFetchV15(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"replica.fetch.wait.max.ms": "200"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.Client())
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "v15"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ISR of three", func() error {
		if _, isr := partitionState(t, c.Brokers[0].Addr(), "v15", 0); len(isr) != 3 {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("v15"))
	for i := 0; i < 10; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	leader, _ := partitionState(t, c.Brokers[0].Addr(), "v15", 0)
	lb := c.Brokers[leaderIndex(c.Brokers, leader)]
	var follower int32
	for _, b := range c.Brokers {
		if b.NodeID != leader {
			follower = b.NodeID
			break
		}
	}
	epoch := server.BrokerEpoch(c.Brokers[leaderIndex(c.Brokers, follower)].Server())
	tds, err := adm.ListTopics(ctx, "v15")
	if err != nil {
		t.Fatal(err)
	}
	id := tds["v15"].ID

	fetch := func(max int16, replica int32, brokerEpoch int64, topicID [16]byte) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = replica
		req.ReplicaState.ID, req.ReplicaState.Epoch = replica, brokerEpoch
		req.MaxBytes, req.SessionEpoch = 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "v15", topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = 0, 0, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := requestMax(t, lb.Addr(), max, req).(*kmsg.FetchResponse)
		if resp.Version != max {
			t.Fatalf("fetch answered at v%d, want v%d", resp.Version, max)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch v%d: %+v", max, resp.Topics)
		}
		if max >= 13 && resp.Topics[0].TopicID != topicID {
			t.Fatalf("fetch v%d answered topic id %x, want %x", max, resp.Topics[0].TopicID, topicID)
		}
		return resp.Topics[0].Partitions[0]
	}
	// A previous incarnation's epoch is refused.
	if p := fetch(15, follower, epoch-1, id); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch v15 with a stale broker epoch: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(p.ErrorCode))
	}
	// The current one is served.
	if p := fetch(15, follower, epoch, id); p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != 10 {
		t.Fatalf("fetch v15 with the current broker epoch: %v, hw %d, %d bytes", kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, len(p.RecordBatches))
	}
	// Before v15 there is no epoch to check.
	if p := fetch(12, follower, epoch-1, id); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch v12 as a replica: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	// Consumers.
	for _, v := range []int16{12, 13, 15} {
		if p := fetch(v, -1, -1, id); p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != 10 {
			t.Fatalf("consumer fetch v%d: %v, hw %d", v, kerr.ErrorForCode(p.ErrorCode), p.HighWatermark)
		}
	}
	if p := fetch(15, -1, -1, [16]byte{1}); p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("consumer fetch v15 of an unknown topic id: %v, want UNKNOWN_TOPIC_ID", kerr.ErrorForCode(p.ErrorCode))
	}
	// The followers stay in sync through all this and a kgo consumer (v15)
	// reads everything.
	if _, isr := partitionState(t, lb.Addr(), "v15", 0); len(isr) != 3 {
		t.Fatalf("ISR %v after the stale fetch", isr)
	}
	cons := c.Client(kgo.ConsumeTopics("v15"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if got := readReplicated(t, cons, 10); len(got[0]) != 10 {
		t.Fatalf("read %v", got)
	}
}
