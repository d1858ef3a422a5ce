package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleOffsetForLeaderEpoch (key 23, v2-4) answers the end offset of a
// leader epoch. Every partition has had one leader epoch on this node, so
// a requested epoch at or below it ends at the log end offset; a newer
// epoch is UNKNOWN_LEADER_EPOCH... answered as Kafka does with -1/-1.
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
			p, err := s.b.Partition(rt.Topic, rp.Partition)
			if err == nil {
				err = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
			}
			if err == nil && req.Version >= 3 && req.ReplicaID >= 0 {
				err = fmt.Errorf("follower requests are not served: %w", kerr.NotLeaderForPartition)
			}
			if err == nil && rp.LeaderEpoch <= p.LeaderEpoch {
				sp.LeaderEpoch = p.LeaderEpoch
				sp.EndOffset = p.Log.LogEndOffset()
			}
			sp.ErrorCode = errCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}
