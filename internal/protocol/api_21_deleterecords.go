package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDeleteRecords (key 21, v0-2) advances log start offsets (offset -1
// = high watermark); compact-only topics answer POLICY_VIOLATION.
func (s *Server) handleDeleteRecords(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			p, err := s.leaderPartition(rt.Topic, rp.Partition, -1)
			if err == nil {
				sp.LowWatermark, err = p.DeleteRecords(rp.Offset)
				if err != nil {
					sp.LowWatermark = -1
				}
			}
			sp.ErrorCode = errCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}
