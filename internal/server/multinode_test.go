package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/server"
	"github.com/strata-io/strata/internal/servertest"
)

// startCluster starts n nodes forming one cluster: the first three (at
// most) combined nodes, the others broker-only.
func startCluster(t *testing.T, n int, settings map[string]string) *servertest.Cluster {
	t.Helper()
	return servertest.StartN(t, n, servertest.Options{Controllers: min(n, 3), Settings: settings,
		Logger:     servertest.TestLogger(t, slog.LevelWarn),
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)}})
}

// eventually retries cond until it holds (the brokers apply metadata
// asynchronously) or 60 s pass (a deadline only a real failure reaches on
// a loaded machine).
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// request sends one request to the broker at addr.
func request(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
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

// TestClusterTopics: three combined nodes and a broker-only fourth. Topics
// created through any broker spread over all four; every broker's Metadata
// lists every broker and the partitions' leaders; a client produces and
// consumes through the right leaders; a broker that does not lead a
// partition answers NOT_LEADER_OR_FOLLOWER with the current leader
// (KIP-951); configs, partitions and deletion go through any broker and
// reach every replica.
func TestClusterTopics(t *testing.T) {
	c := startCluster(t, 4, nil)
	ctx := ctxT(t)
	adm := kadm.NewClient(c.Client())
	if _, err := adm.CreateTopic(ctx, 8, 1, map[string]*string{"retention.ms": kmsg.StringPtr("3600000")}, "spread"); err != nil {
		t.Fatal(err)
	}
	// Every broker knows every broker and leads two partitions. The
	// answer to CreateTopics waits only for the receiving broker's view;
	// the others apply the new topic from their metadata watch a little
	// later (as Kafka's brokers from the metadata log), so each broker is
	// asked until its view has it. The placement itself is checked once:
	// it is decided when the topic is written.
	for _, b := range c.Brokers {
		eventually(t, fmt.Sprintf("broker %d's Metadata lists the topic", b.NodeID), func() error {
			md := request(t, b.Addr(), &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("spread")}}}).(*kmsg.MetadataResponse)
			if len(md.Brokers) != 4 {
				t.Fatalf("broker %d lists %d brokers", b.NodeID, len(md.Brokers))
			}
			if tp := md.Topics[0]; tp.ErrorCode != 0 || len(tp.Partitions) != 8 {
				return fmt.Errorf("topic error %d, %d partitions", tp.ErrorCode, len(tp.Partitions))
			}
			leaders := map[int32]int{}
			for _, p := range md.Topics[0].Partitions {
				if p.ErrorCode != 0 || len(p.Replicas) != 1 || p.Replicas[0] != p.Leader || !slices.Equal(p.ISR, p.Replicas) {
					t.Fatalf("partition %+v", p)
				}
				leaders[p.Leader]++
			}
			if len(leaders) != 4 {
				t.Fatalf("leaders not spread over the four brokers: %v", leaders)
			}
			return nil
		})
	}
	dc := request(t, c.Brokers[3].Addr(), kmsg.NewPtrDescribeClusterRequest()).(*kmsg.DescribeClusterResponse)
	if len(dc.Brokers) != 4 || dc.ControllerID < 1 || dc.ControllerID > 3 {
		t.Fatalf("DescribeCluster: %d brokers, controller %d", len(dc.Brokers), dc.ControllerID)
	}

	// Produce and consume through the leaders (idempotent producer: its id
	// comes from a cluster-wide block).
	cl := c.Client(kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := 0; i < 40; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := c.Client(kgo.ConsumeTopics("spread"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ConsumerGroup("g"))
	got := 0
	for got < 40 {
		fs := cons.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatal(errs)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	// A produce to a broker that does not lead the partition.
	md, err := adm.Metadata(ctx, "spread")
	if err != nil {
		t.Fatal(err)
	}
	p0 := md.Topics["spread"].Partitions[0]
	other := c.Brokers[(int(p0.Leader))%4] // node ids are 1..4
	if other.NodeID == p0.Leader {
		t.Fatal("picked the leader")
	}
	preq := kmsg.NewPtrProduceRequest()
	preq.Version, preq.Acks, preq.TimeoutMillis = 11, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "spread"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = []byte{0}
	rt.Partitions = append(rt.Partitions, rp)
	preq.Topics = append(preq.Topics, rt)
	presp := request(t, other.Addr(), preq).(*kmsg.ProduceResponse)
	pp := presp.Topics[0].Partitions[0]
	if pp.ErrorCode != kerr.NotLeaderForPartition.Code || pp.CurrentLeader.LeaderID != p0.Leader ||
		pp.CurrentLeader.LeaderEpoch != p0.LeaderEpoch || len(presp.Brokers) != 1 || presp.Brokers[0].NodeID != p0.Leader {
		t.Fatalf("produce to a follower: %+v brokers %+v", pp, presp.Brokers)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.Version, freq.MaxWaitMillis, freq.MaxBytes = 12, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "spread"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp := requestMax(t, other.Addr(), 12, freq).(*kmsg.FetchResponse)
	if fpr := fresp.Topics[0].Partitions[0]; fpr.ErrorCode != kerr.NotLeaderForPartition.Code || fpr.CurrentLeader.LeaderID != p0.Leader {
		t.Fatalf("fetch from a follower: %+v", fpr)
	}

	// Configs through one broker, applied by every replica.
	if _, err := kadm.NewClient(c.Brokers[1].Client()).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("7200000")}}, "spread"); err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Brokers {
		// DescribeConfigs answers from the broker's view, which the other
		// brokers update from their metadata watch after the answer to
		// AlterConfigs (as Kafka's brokers from the metadata log).
		eventually(t, fmt.Sprintf("broker %d describes the new retention.ms", b.NodeID), func() error {
			rc, err := kadm.NewClient(b.Client()).DescribeTopicConfigs(ctx, "spread")
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := rc.On("spread", nil); v.Err != nil {
				t.Fatal(v.Err)
			}
			for _, e := range rc[0].Configs {
				if e.Key == "retention.ms" && (e.Value == nil || *e.Value != "7200000") {
					return fmt.Errorf("retention.ms %v", e.MaybeValue())
				}
			}
			return nil
		})
		eventually(t, "retention.ms applied", func() error {
			for _, p := range b.Server().Broker().Topic("spread").Partitions {
				if got := p.Log.Config().RetentionMs; got != 7200000 {
					return fmt.Errorf("broker %d partition %d retention %d", b.NodeID, p.Index, got)
				}
			}
			return nil
		})
	}

	// CreatePartitions through a broker-only node.
	if _, err := kadm.NewClient(c.Brokers[3].Client()).CreatePartitions(ctx, 4, "spread"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "12 partitions", func() error {
		n := 0
		for _, b := range c.Brokers {
			n += len(b.Server().Broker().Topic("spread").Partitions)
		}
		if n != 12 {
			return fmt.Errorf("%d partitions hosted", n)
		}
		return nil
	})

	// Two idempotent producers on different brokers get different ids.
	ids := map[int64]bool{}
	for _, b := range c.Brokers[:2] {
		r := request(t, b.Addr(), kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
		if r.ErrorCode != 0 || ids[r.ProducerID] {
			t.Fatalf("InitProducerID on %d: %+v (seen %v)", b.NodeID, r, ids)
		}
		ids[r.ProducerID] = true
	}

	// Admin requests through another broker right after a creation are
	// decided on a view synced with the store (as Kafka's controller on
	// its committed state): before, the other broker's unsynced view
	// answered IncrementalAlterConfigs UNKNOWN_TOPIC_OR_PARTITION and
	// DeleteTopics by id UNKNOWN_TOPIC_ID while its watch had not
	// delivered the topic. Several rounds: each is a race.
	for i := 0; i < 5; i++ {
		name := fmt.Sprint("fresh-", i)
		creq := kmsg.NewPtrCreateTopicsRequest()
		creq.Version, creq.TimeoutMillis = 7, 30000
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 1, 1
		creq.Topics = append(creq.Topics, ct)
		cr := request(t, c.Brokers[0].Addr(), creq).(*kmsg.CreateTopicsResponse).Topics[0]
		if cr.ErrorCode != 0 {
			t.Fatalf("create %s: %v", name, kerr.ErrorForCode(cr.ErrorCode))
		}
		areq := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ar := kmsg.NewIncrementalAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, name
		ar.Configs = append(ar.Configs, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: "retention.ms", Value: kmsg.StringPtr("7200000")})
		areq.Resources = append(areq.Resources, ar)
		if r := request(t, c.Brokers[3].Addr(), areq).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
			t.Fatalf("IncrementalAlterConfigs of %s through another broker right after its creation: %v", name, kerr.ErrorForCode(r.ErrorCode))
		}
		dreq := kmsg.NewPtrDeleteTopicsRequest()
		dreq.Version, dreq.TimeoutMillis = 6, 30000
		dreq.Topics = append(dreq.Topics, kmsg.DeleteTopicsRequestTopic{TopicID: cr.TopicID})
		if r := request(t, c.Brokers[2].Addr(), dreq).(*kmsg.DeleteTopicsResponse).Topics[0]; r.ErrorCode != 0 {
			t.Fatalf("DeleteTopics of %s by id through another broker right after its creation: %v", name, kerr.ErrorForCode(r.ErrorCode))
		}
	}

	// Deletion through another broker: answered when no broker serves it;
	// every replica's directory is gone.
	if _, err := kadm.NewClient(c.Brokers[2].Client()).DeleteTopic(ctx, "spread"); err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Brokers {
		if b.Server().Broker().Topic("spread") != nil {
			t.Fatalf("broker %d still holds the topic after DeleteTopics", b.NodeID)
		}
		for i := 0; i < 12; i++ {
			if _, err := os.Stat(filepath.Join(b.Dir, fmt.Sprintf("spread-%d", i))); err == nil {
				t.Fatalf("broker %d still has spread-%d", b.NodeID, i)
			}
		}
	}
}

// TestClusterBrokerDown: a topic whose only replica is on a stopped broker
// answers LEADER_NOT_AVAILABLE until it returns; a topic deleted while a
// broker is down is deleted from it (stray replicas) when it returns.
func TestClusterBrokerDown(t *testing.T) {
	c := startCluster(t, 4, nil)
	ctx := ctxT(t)
	adm := kadm.NewClient(c.Brokers[0].Client())
	b4 := c.Brokers[3]
	assign := func(name string) {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Replicas = []int32{4}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10000
		resp := request(t, c.Brokers[0].Addr(), req).(*kmsg.CreateTopicsResponse)
		if resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %+v", name, resp.Topics[0])
		}
	}
	assign("on4")
	assign("gone")
	eventually(t, "broker 4 holds the replicas", func() error {
		_, err := os.Stat(filepath.Join(b4.Dir, "gone-0"))
		return err
	})
	b4.Close()
	eventually(t, "on4 offline", func() error {
		md := request(t, c.Brokers[0].Addr(), &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("on4")}}}).(*kmsg.MetadataResponse)
		p := md.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1 || !slices.Equal(p.OfflineReplicas, []int32{4}) || len(md.Brokers) != 3 {
			return fmt.Errorf("%+v, %d brokers", p, len(md.Brokers))
		}
		return nil
	})
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := adm.DeleteTopic(dctx, "gone"); err != nil {
		t.Fatal(err)
	}
	b4.Open()
	eventually(t, "on4 back", func() error {
		md := request(t, c.Brokers[1].Addr(), &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("on4")}}}).(*kmsg.MetadataResponse)
		if p := md.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Leader != 4 || p.LeaderEpoch != 2 {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(b4.Dir, "gone-0")); err == nil {
		t.Fatal("the stray replica of a deleted topic survived the broker's return")
	}
	cl := c.Client(kgo.DefaultProduceTopic("on4"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("back")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestClusterLeaseLost: a broker whose session lease is found gone (it
// expired while the broker was paused or cut off; here revoked) has lost
// its registration and with it its leaderships (definitive evidence,
// docs/cluster.md "Fencing"): it registers again with a new broker epoch
// and leads its partitions again at a newer leader epoch; produce works
// throughout retries.
func TestClusterLeaseLost(t *testing.T) {
	c := startCluster(t, 2, map[string]string{"broker.heartbeat.interval.ms": "200"})
	ctx := ctxT(t)
	b2 := c.Brokers[1]
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "on2", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Replicas = []int32{2}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	if r := request(t, c.Brokers[0].Addr(), req).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %+v", r.Topics[0])
	}
	epochOf := func() (int32, int32, error) {
		md := request(t, c.Brokers[0].Addr(), &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("on2")}}}).(*kmsg.MetadataResponse)
		p := md.Topics[0].Partitions[0]
		return p.Leader, p.LeaderEpoch, kerr.ErrorForCode(p.ErrorCode)
	}
	_, before, _ := epochOf()
	oldEpoch := b2.Server().BrokerEpoch()
	if err := server.RevokeSession(ctx, b2.Server()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "registered again", func() error {
		if e := b2.Server().BrokerEpoch(); e <= oldEpoch {
			return fmt.Errorf("broker epoch %d (was %d)", e, oldEpoch)
		}
		return nil
	})
	eventually(t, "leading again at a newer epoch", func() error {
		leader, epoch, err := epochOf()
		if err != nil || leader != 2 || epoch <= before {
			return fmt.Errorf("leader %d epoch %d (was %d): %v", leader, epoch, before, err)
		}
		return nil
	})
	cl := c.Client(kgo.DefaultProduceTopic("on2"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
