package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleOffsetForLeaderEpoch (key 23, v2-4) answers, from the log's
// leader epoch history, the largest epoch <= the requested one and the
// offset where the next epoch starts (the log end offset for the current
// epoch); an epoch newer than all known is answered -1/-1, as Kafka does.
func (s *Server) handleOffsetForLeaderEpoch(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			p, err := s.leaderPartition(rt.Topic, rp.Partition, rp.CurrentLeaderEpoch)
			if err == nil && req.Version >= 3 && req.ReplicaID >= 0 && p.Replica() == nil {
				err = fmt.Errorf("%s-%d has no followers: %w", p.Topic, p.Index, kerr.NotLeaderForPartition)
			}
			if err == nil {
				sp.LeaderEpoch, sp.EndOffset = p.EndOffsetForEpoch(rp.LeaderEpoch)
				if cur := leaderEpochOf(p); sp.LeaderEpoch < 0 && rp.LeaderEpoch >= cur {
					// Nothing appended yet in the current epoch: this node has
					// led since the log's end, as Kafka's leader assigns its
					// epoch at the log end offset on election.
					sp.LeaderEpoch, sp.EndOffset = cur, p.LogEndOffset()
				}
			}
			sp.ErrorCode = errCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}
