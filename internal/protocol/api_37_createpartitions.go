package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleCreatePartitions (key 37, v0-3) grows topics' partition counts.
func (s *Server) handleCreatePartitions(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
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

func (s *Server) validAssignment(as []kmsg.CreatePartitionsRequestTopicAssignment) bool {
	for _, a := range as {
		if len(a.Replicas) != 1 || a.Replicas[0] != s.b.NodeID() {
			return false
		}
	}
	return true
}
