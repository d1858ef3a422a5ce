package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleCreatePartitions (key 37, v0-3) grows topics' partition counts.
// Like Kafka's controller (MAX_RECORDS_PER_USER_OP), one request may add
// at most 10,000 partitions in all; above that every topic is answered
// POLICY_VIOLATION and nothing is created (Kafka fails the topics past the
// bound, with UNKNOWN_SERVER_ERROR, after creating the ones before it).
func (s *Server) handleCreatePartitions(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	var added int64
	for _, t := range req.Topics {
		seen[t.Topic]++
		if have := s.partitionCount(t.Topic); have >= 0 && int(t.Count) > have {
			added += int64(int(t.Count) - have)
		}
	}
	if added > maxRecordsPerRequest {
		err := fmt.Errorf("Unable to perform excessively large batch operation (%d new partitions, at most %d).: %w", added, maxRecordsPerRequest, kerr.PolicyViolation)
		for _, t := range req.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, errCode(err), errMessage(err)
			resp.Topics = append(resp.Topics, rt)
		}
		return reply{msg: resp}, nil
	}
	ctx, cancel := requestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var err error
		switch {
		case seen[t.Topic] > 1:
			err = fmt.Errorf("topic %q is listed more than once: %w", t.Topic, kerr.InvalidRequest)
		case s.cfg.Cluster != nil:
			var as [][]int32
			for _, a := range t.Assignment {
				as = append(as, a.Replicas)
			}
			err = s.cfg.Cluster.CreatePartitions(ctx, t.Topic, t.Count, as, req.ValidateOnly)
		case t.Assignment != nil && !s.validAssignment(t.Assignment):
			err = fmt.Errorf("assignment names brokers other than node %d: %w", s.b.NodeID(), kerr.InvalidReplicaAssignment)
		default:
			err = s.b.CreatePartitions(t.Topic, t.Count, req.ValidateOnly)
		}
		rt.ErrorCode = errCode(err)
		rt.ErrorMessage = errMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{msg: resp}, nil
}

// partitionCount is a topic's partition count (-1: no such topic): from
// the cluster metadata in a cluster (this broker may host only some of
// them), else from the broker.
func (s *Server) partitionCount(topic string) int {
	if s.cfg.Cluster != nil {
		v := s.cfg.Cluster.View()
		t := v.Topics[topic]
		if t == nil {
			return -1
		}
		return len(v.Parts[t.ID])
	}
	if t := s.b.Topic(topic); t != nil {
		return len(t.Partitions)
	}
	return -1
}

func (s *Server) validAssignment(as []kmsg.CreatePartitionsRequestTopicAssignment) bool {
	for _, a := range as {
		if len(a.Replicas) != 1 || a.Replicas[0] != s.b.NodeID() {
			return false
		}
	}
	return true
}
