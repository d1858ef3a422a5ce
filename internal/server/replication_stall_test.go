package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/servertest"
)

// stallSettings make a follower's long poll (replica.fetch.wait.max.ms)
// 20 s: a follower that left a partition out of its fetch while that
// partition's fsync was pending, and long-polled for its other partitions
// meanwhile, held every acks=all produce for the whole poll (the 90
// sequential produces below would take half an hour). Nothing else waits
// on the poll once every partition is in it: new data at the leader ends
// it (a partition added to a follower while its poll is in flight joins at
// the next fetch, as in Kafka: the first requests may wait that long).
var stallSettings = map[string]string{
	"replica.fetch.wait.max.ms": "20000",
	"replica.lag.time.max.ms":   "60000",
}

// TestReplicatedAcksAllNoStall: three brokers, strata.durable.acks=true
// (followers report only what they fsynced), a replicated topic whose
// leaders' followers also follow idle partitions of the same leader.
// Sequential acks=all produces of one small record each, and sequential
// OffsetCommits (__consumer_offsets has replication factor 3), each
// complete: the follower fetches again as soon as its own fsync is done,
// with every partition, instead of long-polling for the idle ones (the
// session-3 high-watermark stall: ~0.5 s per request at the default
// replica.fetch.wait.max.ms, and kgo's TestClient_Produce hanging at RF=3).
func TestReplicatedAcksAllNoStall(t *testing.T) {
	c := startCluster(t, 3, stallSettings)
	// A bound on the whole test that only the stall reaches (it would
	// take 30 minutes); a loaded machine needs well under a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.Client())
	// The written partitions, then idle partitions on every leader.
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "seq"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 6, 3, nil, "idle"); err != nil {
		t.Fatal(err)
	}
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer prod.Close()
	const n = 30
	for i := 0; i < n; i++ {
		for p := int32(0); p < 3; p++ {
			err := within(ctx, func() error {
				return prod.ProduceSync(ctx, &kgo.Record{Topic: "seq", Partition: p, Value: []byte(fmt.Sprint(i))}).FirstErr()
			})
			if err != nil {
				t.Fatalf("acks=all produce %d to partition %d: %v", i, p, err)
			}
		}
	}
	// OffsetCommit through a replicated __consumer_offsets.
	grp := kadm.NewClient(c.Client())
	for i := 0; i < n; i++ {
		offs := kadm.Offsets{}
		offs.AddOffset("seq", 0, int64(i), -1)
		err := within(ctx, func() error {
			resp, err := grp.CommitOffsets(ctx, "stall-group", offs)
			if err == nil {
				err = resp.Error()
			}
			return err
		})
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	// Every acknowledged record is there, from any replica's leader.
	cons := c.Client(kgo.ConsumeTopics("seq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cons.Close()
	got := readReplicated(t, cons, 3*n)
	for p := int32(0); p < 3; p++ {
		if len(got[p]) != n {
			t.Fatalf("partition %d: %d records, want %d", p, len(got[p]), n)
		}
	}
}

// within runs f and returns its error, or ctx's once ctx ends first (a
// client keeps waiting for a request it sent whatever its context says).
func within(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("not answered: %w", ctx.Err())
	}
}

// BenchmarkReplicatedAcksAll is the latency of one acks=all produce of a
// small record (sequential requests) at replication factor 3 and 1 on the
// same three-broker cluster; every follower also follows idle partitions
// of its leader. Compare the two as a ratio within one run:
//
//	go test ./internal/server -run '^$' -bench BenchmarkReplicatedAcksAll -benchtime 400x
func BenchmarkReplicatedAcksAll(b *testing.B) {
	c := servertest.StartN(b, 3, servertest.Options{Controllers: 3})
	ctx := context.Background()
	adm := kadm.NewClient(c.Client())
	if _, err := adm.CreateTopic(ctx, 6, 3, nil, "idle"); err != nil {
		b.Fatal(err)
	}
	for _, rf := range []int16{1, 3} {
		topic := fmt.Sprintf("rf%d", rf)
		if _, err := adm.CreateTopic(ctx, 1, rf, nil, topic); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("RF=%d", rf), func(b *testing.B) {
			prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
			defer prod.Close()
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
