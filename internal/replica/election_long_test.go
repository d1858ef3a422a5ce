package replica_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/servertest"
)

// TestElectionOfManyPartitionsTime (STRATA_LONG=1; STRATA_ELECTION_PARTS,
// default 1,000) measures a mass leadership change on three in-process
// combined nodes: node 1 leads every partition of an RF=3 topic and shuts
// down (its controlled shutdown hands every leadership to node 2 at once),
// and the test logs the time from the start of the shutdown until a
// produce (acks=all) to every partition succeeded through the new leader.
// It asserts only that every partition gets there.
func TestElectionOfManyPartitionsTime(t *testing.T) {
	if os.Getenv("STRATA_LONG") == "" {
		t.Skip("STRATA_LONG=1: a 1,000-partition election on three in-process nodes")
	}
	parts := 1000
	if s := os.Getenv("STRATA_ELECTION_PARTS"); s != "" {
		parts, _ = strconv.Atoi(s)
	}
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3, Logger: servertest.TestLogger(t, slog.LevelWarn)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "mass", -1, -1
	for p := range parts {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), []int32{1, 2, 3}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 120000
	cl := c.Brokers[1].Client(kgo.SeedBrokers(c.Brokers[1].Addr(), c.Brokers[2].Addr()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1000), kgo.RetryTimeout(5*time.Minute),
		kgo.MetadataMinAge(50*time.Millisecond)) // a refresh after NOT_LEADER_OR_FOLLOWER is not held 5 s
	defer cl.Close()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatal(err)
	}
	produceAll := func() {
		t.Helper()
		recs := make([]*kgo.Record, parts)
		for p := range recs {
			recs[p] = &kgo.Record{Topic: "mass", Partition: int32(p), Value: []byte("v")}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produceAll() // every partition led by node 1 and replicated
	start := time.Now()
	done := make(chan struct{})
	go func() { c.Brokers[0].Close(); close(done) }()
	b2 := c.Brokers[1].Server().Broker()
	for led := 0; led < parts; {
		led = 0
		for p := range parts {
			if bp, err := b2.Partition("mass", int32(p)); err == nil && bp.Leads() {
				led++
			}
		}
		if led < parts {
			time.Sleep(5 * time.Millisecond)
		}
	}
	elected := time.Since(start)
	produceAll()
	took := time.Since(start)
	<-done
	t.Logf("%d partitions: node 1's shutdown to node 2 leading all: %v; to an acks=all produce to every partition through it: %v", parts, elected, took)
}
