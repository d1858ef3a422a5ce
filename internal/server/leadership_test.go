package server_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// One node leads every partition: elections are not needed, moving a
// partition to this node is a no-op, to any other broker is invalid, and
// no reassignment is ever listed.
func TestElectLeadersAndReassignments(t *testing.T) {
	tb := startBroker(t, "", nil)
	createTopics(t, tb, 2, "lead")
	cl := tb.Client()
	ctx := ctxT(t)

	el := kmsg.NewPtrElectLeadersRequest()
	et := kmsg.NewElectLeadersRequestTopic()
	et.Topic, et.Partitions = "lead", []int32{0, 1, 9}
	el.Topics = append(el.Topics, et)
	er, err := el.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	ps := er.Topics[0].Partitions
	if er.ErrorCode != 0 || len(ps) != 3 || ps[0].ErrorCode != kerr.ElectionNotNeeded.Code ||
		ps[1].ErrorCode != kerr.ElectionNotNeeded.Code || ps[2].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("ElectLeaders: %+v", er)
	}

	ar := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	at.Topic = "lead"
	for _, c := range []struct {
		p        int32
		replicas []int32
	}{{0, []int32{tb.Server().Broker().NodeID()}}, {1, []int32{7}}, {0, nil}} {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = c.p, c.replicas
		at.Partitions = append(at.Partitions, rp)
	}
	ar.Topics = append(ar.Topics, at)
	arr, err := ar.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	aps := arr.Topics[0].Partitions
	if arr.ErrorCode != 0 || aps[0].ErrorCode != 0 || aps[1].ErrorCode != kerr.InvalidReplicaAssignment.Code ||
		aps[2].ErrorCode != kerr.NoReassignmentInProgress.Code {
		t.Errorf("AlterPartitionReassignments: %+v", arr)
	}

	lr, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if lr.ErrorCode != 0 || len(lr.Topics) != 0 {
		t.Errorf("ListPartitionReassignments: %+v", lr)
	}
}
