package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDescribeProducers (key 61, v0) lists each partition's producers
// with live idempotence/transaction state (kafka-transactions.sh
// describe-producers, kadm.DescribeProducers): epoch, last sequence, last
// timestamp, coordinator epoch and the start offset of an open
// transaction (-1 when none).
func (s *Server) handleDescribeProducers(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			p, err := s.leaderPartition(rt.Topic, idx, -1)
			if err != nil {
				sp.ErrorCode = errCode(err)
				sp.ErrorMessage = errMessage(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, pi := range p.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID = pi.ProducerID
				ap.ProducerEpoch = int32(pi.Epoch)
				ap.LastSequence = pi.LastSequence
				ap.LastTimestamp = pi.LastTimestamp
				ap.CoordinatorEpoch = pi.CoordinatorEpoch
				ap.CurrentTxnStartOffset = pi.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}
