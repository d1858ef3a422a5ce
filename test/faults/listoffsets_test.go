package faults

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestListOffsetsLeaderHWLagsEpochStart: a new leader whose high
// watermark lags the start of its leader epoch cannot tell a client the
// end of the log (it may lie below an end the old leader already served),
// so it answers ListOffsets for the latest offset, and for a timestamp it
// finds at or past its high watermark, OFFSET_NOT_AVAILABLE (v5+; retriable)
// and LEADER_NOT_AVAILABLE to older versions, and the earliest offset as
// usual (Kafka's Partition.fetchOffsetForTimestamp and KafkaApis). Three
// combined nodes over the wire, franz-go clients:
//
//   - topic with replicas [1 2 3], leader 1; broker 3 killed (it stays
//     registered and in the ISR: long session and replica lag timeouts);
//   - records produced with acks=1 reach broker 2 but not broker 3, so the
//     high watermark stays below them;
//   - the replicas were reordered to [2 1 3] beforehand; the preferred
//     leader is elected: broker 2 leads from its log end, above its high
//     watermark;
//   - once broker 3 leaves the replicas (reassignment to [2 1]) the ISR is
//     brokers 1 and 2, which hold everything: the end is answered, the log
//     end.
//
// (Broker 3 is killed, not SIGSTOPped: a stopped node's etcd member keeps
// its connections open and the other brokers' metadata writes routed to it
// hang; see the session-7 notes of issue 14.)
func TestListOffsetsLeaderHWLagsEpochStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	procs, addrs := replicatedCluster(t, ctx, "--broker.session.timeout.ms", "300000",
		"--replica.lag.time.max.ms", "300000")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	listOffset := listOffsetsAt(t, addrs[:2]) // brokers 1 and 2: broker 3 is killed
	const topic = "lagging-hw"
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2, 3}
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, ra)
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 30000
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(cresp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	waitFor(t, ctx, "broker 1 leads "+topic+"-0", func() bool { return leaderOf(ctx, addrs, topic, 0) == 0 })
	// Broker 2 becomes the preferred leader; broker 1 keeps leading until
	// the election below (a reordering moves no data and elects no one).
	var reorder kadm.AlterPartitionAssignmentsReq
	reorder.Assign(topic, 0, []int32{2, 1, 3})
	rres, err := adm.AlterPartitionAssignments(ctx, reorder)
	if err != nil {
		t.Fatal(err)
	}
	if err := rres.Error(); err != nil {
		t.Fatalf("reorder the replicas: %v", err)
	}
	if l := leaderOf(ctx, addrs, topic, 0); l != 0 {
		t.Fatalf("after reordering the replicas broker %d leads, want broker 1", l+1)
	}

	// Committed records: timestamps base+i.
	const committed, uncommitted = 10, 5
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := 0; i < committed; i++ {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "c%d", i), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// Broker 3 is dead but stays in the ISR: the high watermark cannot
	// pass what it fetched.
	waitFor(t, ctx, "every replica's log holds the committed records", func() bool {
		return replicasEqualSize(ctx, adm, topic, []int32{1, 2, 3})
	})
	if err := procs[2].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	one, err := kgo.NewClient(kgo.SeedBrokers(addrs[0], addrs[1]), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	later := base.Add(time.Minute)
	for i := 0; i < uncommitted; i++ {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "u%d", i), Timestamp: later.Add(time.Duration(i) * time.Millisecond)}
		if err := one.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce acks=1: %v", err)
		}
	}
	waitFor(t, ctx, "broker 2 fetched the acks=1 records", func() bool {
		return replicasEqualSize(ctx, adm, topic, []int32{1, 2})
	})
	if hw := listOffset(ctx, 1, topic, -1, 7); hw.ErrorCode != 0 || hw.Offset != committed {
		t.Fatalf("leader 1 before the move: latest offset %d, error %v; want %d (broker 3 holds the high watermark)", hw.Offset, kerr.ErrorForCode(hw.ErrorCode), committed)
	}

	// Broker 2 leads from its log end (committed+uncommitted), above its
	// high watermark (committed). ElectLeaders goes to broker 2 itself
	// (the metadata may name the dead broker 3 as the controller).
	waitUntil(t, ctx, "broker 2 leads "+topic+"-0", func() error {
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType = 0 // preferred
		req.TimeoutMillis = 10000
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		resp, err := req.RequestWith(rctx, cl.Broker(2))
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && !errors.Is(err, kerr.ElectionNotNeeded) {
					return fmt.Errorf("%w (%v)", err, rp.ErrorMessage)
				}
			}
		}
		if l := leaderOf(ctx, addrs[:2], topic, 0); l != 1 {
			return fmt.Errorf("the metadata names leader index %d", l)
		}
		return nil
	})
	var got *kmsg.ListOffsetsResponseTopicPartition
	waitFor(t, ctx, "broker 2 answers as the leader", func() bool {
		got = listOffset(ctx, 2, topic, -1, 7)
		return got.ErrorCode != kerr.NotLeaderForPartition.Code && got.ErrorCode != kerr.UnknownLeaderEpoch.Code &&
			got.ErrorCode != kerr.FencedLeaderEpoch.Code
	})
	checks := []struct {
		what    string
		ts      int64
		version int16
		code    int16
		offset  int64
	}{
		{"latest, v7", -1, 7, kerr.OffsetNotAvailable.Code, -1},
		{"latest, v5", -1, 5, kerr.OffsetNotAvailable.Code, -1},
		{"latest, v4", -1, 4, kerr.LeaderNotAvailable.Code, -1},
		{"latest, v1", -1, 1, kerr.LeaderNotAvailable.Code, -1},
		{"earliest, v7", -2, 7, 0, 0},
		{"max timestamp (an uncommitted record), v7", -3, 7, kerr.OffsetNotAvailable.Code, -1},
		{"timestamp of an uncommitted record, v7", later.UnixMilli(), 7, kerr.OffsetNotAvailable.Code, -1},
		{"timestamp of a committed record, v7", base.Add(3 * time.Millisecond).UnixMilli(), 7, 0, 3},
	}
	for _, c := range checks {
		got := listOffset(ctx, 2, topic, c.ts, c.version)
		if got.ErrorCode != c.code || (c.code == 0 && got.Offset != c.offset) {
			t.Errorf("%s: offset %d, error %v; want offset %d, error %v", c.what, got.Offset, kerr.ErrorForCode(got.ErrorCode), c.offset, kerr.ErrorForCode(c.code))
		}
	}
	// The client's own call: kadm's ListEndOffsets (newest version), routed
	// by its metadata (broker 1 may still answer as the epoch-0 leader until
	// it learns of the election).
	waitUntil(t, ctx, "kadm ListEndOffsets answers OFFSET_NOT_AVAILABLE", func() error {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ends, err := kadm.NewClient(cl).ListEndOffsets(rctx, topic)
		if err != nil {
			return err
		}
		o, ok := ends.Lookup(topic, 0)
		switch {
		case !ok:
			return errors.New("no answer for the partition")
		case errors.Is(o.Err, kerr.OffsetNotAvailable):
			return nil
		case o.Err == nil && o.LeaderEpoch == 0:
			return fmt.Errorf("answered by the old leader: %+v", o)
		}
		t.Fatalf("kadm ListEndOffsets while the high watermark lags: %+v, want OFFSET_NOT_AVAILABLE", o)
		return nil
	})

	// Broker 3 leaves the replicas: the ISR is brokers 1 and 2, the high
	// watermark reaches the epoch start and the end is answered.
	waitUntil(t, ctx, "reassign "+topic+"-0 to [2 1]", func() error {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = 0, []int32{2, 1}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		resp, err := req.RequestWith(rctx, cl.Broker(2))
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	})
	waitFor(t, ctx, "broker 2 answers the latest offset", func() bool {
		return listOffset(ctx, 2, topic, -1, 7).ErrorCode == 0
	})
	for _, v := range []int16{7, 4} {
		if got := listOffset(ctx, 2, topic, -1, v); got.ErrorCode != 0 || got.Offset != committed+uncommitted {
			t.Errorf("latest after the high watermark caught up, v%d: offset %d, error %v; want %d", v, got.Offset, kerr.ErrorForCode(got.ErrorCode), committed+uncommitted)
		}
	}
}

// listOffsetsAt returns a function that sends one ListOffsets request at
// the given version straight to broker id (not routed to the leader) and
// returns its partition; each version has its own client, capped at it
// (kgo.MaxVersions), closed with the test.
func listOffsetsAt(t *testing.T, addrs []string) func(ctx context.Context, id int32, topic string, ts int64, version int16) *kmsg.ListOffsetsResponseTopicPartition {
	clients := map[int16]*kgo.Client{}
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	return func(ctx context.Context, id int32, topic string, ts int64, version int16) *kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		pinned := clients[version]
		if pinned == nil {
			vs := kversion.Stable()
			vs.SetMaxKeyVersion(kmsg.ListOffsets.Int16(), version)
			var err error
			if pinned, err = kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.MaxVersions(vs)); err != nil {
				t.Fatal(err)
			}
			clients[version] = pinned
		}
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch, rp.MaxNumOffsets = 0, ts, -1, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		resp, err := req.RequestWith(rctx, pinned.Broker(int(id)))
		if err != nil {
			t.Logf("ListOffsets v%d to broker %d: %v", version, id, err)
			return &kmsg.ListOffsetsResponseTopicPartition{ErrorCode: kerr.RequestTimedOut.Code, Offset: -1}
		}
		if resp.Version != version {
			t.Fatalf("ListOffsets sent at v%d, want v%d", resp.Version, version)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("ListOffsets response %+v", resp)
		}
		return &resp.Topics[0].Partitions[0]
	}
}

// replicasEqualSize reports whether the given brokers' copies of topic-0
// have the same size on disk (DescribeLogDirs), none empty.
func replicasEqualSize(ctx context.Context, adm *kadm.Client, topic string, brokers []int32) bool {
	size := int64(-1)
	for _, b := range brokers {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		dirs, err := adm.DescribeBrokerLogDirs(rctx, b, kadm.TopicsSet{topic: {0: {}}})
		cancel()
		if err != nil {
			return false
		}
		s := int64(-1)
		dirs.EachPartition(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == topic && p.Partition == 0 {
				s = p.Size
			}
		})
		if s <= 0 || (size >= 0 && s != size) {
			return false
		}
		size = s
	}
	return true
}

// waitFor is waitUntil for a condition without a reason.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	waitUntil(t, ctx, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}
