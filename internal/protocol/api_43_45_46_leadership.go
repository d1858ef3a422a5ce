package protocol

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Leadership and reassignment requests. In a cluster they go to the
// metadata store (electLeadersCluster and below). On a one-node cluster: Every
// partition's only replica is this node and is its leader, so there is
// nothing to elect and nothing to move; the answers say exactly that, in
// Kafka's terms, and change nothing.

// handleElectLeaders (key 43, v0-2): a preferred (or unclean) election is
// ELECTION_NOT_NEEDED (84) for every named partition, since the preferred
// replica already leads; unknown partitions are UNKNOWN_TOPIC_OR_PARTITION.
// A request for all partitions (null topics) reports nothing, as Kafka
// leaves ELECTION_NOT_NEEDED out of such answers.
func (s *Server) handleElectLeaders(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply{msg: resp}, nil
	}
	if s.cfg.Cluster != nil {
		return s.electLeadersCluster(ctx, req, resp)
	}
	for _, rt := range req.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, idx := range rt.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition = idx
			if !s.b.PartitionExists(rt.Topic, idx) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				sp.ErrorCode = kerr.ElectionNotNeeded.Code
				sp.ErrorMessage = kmsg.StringPtr("Leader election not needed for topic partition: the preferred replica (this node) leads it")
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}

// electLeadersCluster runs ElectLeaders in a cluster (Kafka's
// ReplicationControlManager.electLeaders): each named partition is elected
// by compare-and-set in the metadata store; the answer per partition is
// Kafka's code (ELECTION_NOT_NEEDED 84, PREFERRED_LEADER_NOT_AVAILABLE 80,
// ELIGIBLE_LEADERS_NOT_AVAILABLE 83, UNKNOWN_TOPIC_OR_PARTITION 3) with its
// message. v0 has no election type: PREFERRED.
func (s *Server) electLeadersCluster(ctx context.Context, req *kmsg.ElectLeadersRequest, resp *kmsg.ElectLeadersResponse) (reply, error) {
	typ := int8(0)
	if req.Version >= 1 {
		typ = req.ElectionType
	}
	var parts map[string][]int32
	if req.Topics != nil {
		parts = map[string][]int32{}
		for _, rt := range req.Topics {
			parts[rt.Topic] = append(parts[rt.Topic], rt.Partitions...)
		}
	}
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	results, err := s.cfg.Cluster.ElectLeaders(ctx, typ, parts)
	if err != nil && len(results) == 0 {
		resp.ErrorCode = errCode(err)
		return reply{msg: resp}, nil
	}
	byTopic := map[string]int{}
	for _, r := range results {
		i, ok := byTopic[r.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[r.Topic] = i
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = r.Topic
			resp.Topics = append(resp.Topics, st)
		}
		sp := kmsg.NewElectLeadersResponseTopicPartition()
		sp.Partition = r.Partition
		if r.Err != nil {
			sp.ErrorCode = errCode(r.Err)
			sp.ErrorMessage = errMessage(r.Err)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
	}
	return reply{msg: resp}, nil
}

// handleAlterPartitionReassignments (key 45, v0-1): moving a partition to
// its current replica set (this node) completes at once; any other broker
// id is INVALID_REPLICA_ASSIGNMENT (39), as Kafka answers for a broker
// that is not registered; cancelling (null replicas) is
// NO_REASSIGNMENT_IN_PROGRESS (85).
func (s *Server) handleAlterPartitionReassignments(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	if s.cfg.Cluster != nil {
		return s.alterReassignmentsCluster(ctx, req, resp)
	}
	node := s.b.NodeID()
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case !s.b.PartitionExists(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Replicas == nil:
				sp.ErrorCode = kerr.NoReassignmentInProgress.Code
			case len(rp.Replicas) != 1 || rp.Replicas[0] != node:
				sp.ErrorCode = kerr.InvalidReplicaAssignment.Code
				sp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("replicas %v: this cluster has one broker, %d", rp.Replicas, node))
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}

// handleListPartitionReassignments (key 46, v0): no reassignment is ever in
// progress, so the answer lists none (Kafka lists only ongoing ones).
func (s *Server) handleListPartitionReassignments(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if s.cfg.Cluster != nil {
		return s.listReassignmentsCluster(ctx, req, resp)
	}
	return reply{msg: resp}, nil
}

// alterReassignmentsCluster runs AlterPartitionReassignments in a cluster
// (KIP-455; Kafka's ReplicationControlManager.alterPartitionReassignments):
// each partition's new target (or cancellation, null replicas) is one
// compare-and-set; errors per partition are Kafka's
// (UNKNOWN_TOPIC_OR_PARTITION 3, INVALID_REPLICA_ASSIGNMENT 39,
// INVALID_REPLICATION_FACTOR 38 without AllowReplicationFactorChange,
// NO_REASSIGNMENT_IN_PROGRESS 85).
func (s *Server) alterReassignmentsCluster(ctx context.Context, req *kmsg.AlterPartitionAssignmentsRequest, resp *kmsg.AlterPartitionAssignmentsResponse) (reply, error) {
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	var rs []Reassignment
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			rs = append(rs, Reassignment{Topic: rt.Topic, Partition: rp.Partition, Target: rp.Replicas})
		}
	}
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	results := s.cfg.Cluster.AlterReassignments(ctx, rs, allowRF)
	i := 0
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			if i < len(results) && results[i].Err != nil {
				sp.ErrorCode = errCode(results[i].Err)
				sp.ErrorMessage = errMessage(results[i].Err)
			}
			i++
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}

// listReassignmentsCluster runs ListPartitionReassignments in a cluster:
// the partitions with a reassignment in progress (all, or among the named
// ones), with their replicas, adding and removing replicas.
func (s *Server) listReassignmentsCluster(ctx context.Context, req *kmsg.ListPartitionReassignmentsRequest, resp *kmsg.ListPartitionReassignmentsResponse) (reply, error) {
	ctx, cancel := requestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	var parts map[string][]int32
	if req.Topics != nil {
		parts = map[string][]int32{}
		for _, rt := range req.Topics {
			parts[rt.Topic] = append(parts[rt.Topic], rt.Partitions...)
		}
	}
	list, err := s.cfg.Cluster.ListReassignments(ctx, parts)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), errMessage(err)
		return reply{msg: resp}, nil
	}
	byTopic := map[string]int{}
	for _, r := range list {
		i, ok := byTopic[r.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[r.Topic] = i
			st := kmsg.NewListPartitionReassignmentsResponseTopic()
			st.Topic = r.Topic
			resp.Topics = append(resp.Topics, st)
		}
		sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		sp.Partition, sp.Replicas, sp.AddingReplicas, sp.RemovingReplicas = r.Partition, r.Replicas, r.Adding, r.Removing
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
	}
	return reply{msg: resp}, nil
}
