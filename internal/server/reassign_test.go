package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replicasOf returns a partition's replica list as addr's Metadata reports it.
func replicasOf(t *testing.T, addr, topic string, p int32) []int32 {
	t.Helper()
	md := request(t, addr, &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}}).(*kmsg.MetadataResponse)
	for _, mp := range md.Topics[0].Partitions {
		if mp.Partition == p {
			return mp.Replicas
		}
	}
	return nil
}

// TestReassignUnderLoad: AlterPartitionReassignments (45) moves a
// replication-factor-2 partition from nodes 1 and 2 to nodes 3 and 4 while
// an idempotent acks=all producer writes to it (KIP-455: the adding
// replicas fetch and join the ISR, then the replica set becomes the target,
// the leader moves into it and the removed replicas leave). Every
// acknowledged record is read back once, in order; ListPartitionReassignments
// is empty once done; refusals are Kafka's: an unregistered broker is
// INVALID_REPLICA_ASSIGNMENT, cancelling with nothing in progress
// NO_REASSIGNMENT_IN_PROGRESS, an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
func TestReassignUnderLoad(t *testing.T) {
	c := startCluster(t, 4, map[string]string{"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200",
		"auto.leader.rebalance.enable": "false"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createAssigned(t, c, "mv", [][]int32{{1, 2}})
	adm := kadm.NewClient(c.Client())

	var (
		mu    sync.Mutex
		acked []string
		perr  error
	)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("mv"), kgo.RecordRetries(1000),
		kgo.RecordDeliveryTimeout(time.Minute))
	go func() {
		defer close(done)
		for i := 0; pctx.Err() == nil; i++ {
			v := fmt.Sprint(i)
			err := prod.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr()
			mu.Lock()
			if err == nil {
				acked = append(acked, v)
			} else if pctx.Err() == nil {
				perr = err
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	ackedN := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	eventually(t, "records acknowledged before the move", func() error {
		if n := ackedN(); n < 50 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("mv", 0, []int32{3, 4})
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil || res["mv"][0].Err != nil {
		t.Fatalf("reassign: %v %+v", err, res)
	}
	eventually(t, "the move completes", func() error {
		l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"mv": {0: {}}})
		if err != nil {
			return err
		}
		if len(l["mv"]) != 0 {
			return fmt.Errorf("in progress: %+v", l["mv"][0])
		}
		if r := replicasOf(t, c.Brokers[2].Addr(), "mv", 0); !slices.Equal(r, []int32{3, 4}) {
			return fmt.Errorf("replicas %v", r)
		}
		if l, isr := partitionState(t, c.Brokers[2].Addr(), "mv", 0); l != 3 || !slices.Equal(isr, []int32{3, 4}) {
			return fmt.Errorf("leader %d isr %v", l, isr)
		}
		return nil
	})
	before := ackedN()
	eventually(t, "records acknowledged after the move", func() error {
		if n := ackedN(); n < before+50 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	stop()
	<-done
	if perr != nil {
		t.Fatalf("produce failed: %v", perr)
	}
	// Refusals.
	var bad kadm.AlterPartitionAssignmentsReq
	bad.Assign("mv", 0, []int32{3, 9})
	bad.CancelAssign("mv", 1)
	res, err = adm.AlterPartitionAssignments(ctx, bad)
	if err != nil || !errors.Is(res["mv"][0].Err, kerr.InvalidReplicaAssignment) || !errors.Is(res["mv"][1].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("bad reassignments: %v %+v", err, res)
	}
	var cancelReq kadm.AlterPartitionAssignmentsReq
	cancelReq.CancelAssign("mv", 0)
	if res, err = adm.AlterPartitionAssignments(ctx, cancelReq); err != nil || !errors.Is(res["mv"][0].Err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel with nothing in progress: %v %+v", err, res)
	}
	// Every acknowledged record, once, in order, from the new replicas.
	cons := c.Client(kgo.ConsumeTopics("mv"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := readReplicated(t, cons, len(acked))[0]
	if !slices.Equal(got[:len(acked)], acked) {
		t.Fatalf("read %d records, acknowledged %d; first difference in %v", len(got), len(acked), firstDiff(got, acked))
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("record %d: read %q, acknowledged %q", i, a[i], b[i])
		}
	}
	return "length"
}
