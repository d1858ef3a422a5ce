package protocol

import (
	"context"
	"fmt"

	"github.com/strata-io/strata/internal/broker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Special ListOffsets timestamps.
const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3
)

// handleListOffsets (key 2, v1-7) answers earliest (-2), latest (-1, the
// high watermark), max timestamp (-3) and first-offset-at-or-after
// timestamp queries.
func (s *Server) handleListOffsets(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			off, ts, epoch, err := s.listOffset(rt.Topic, rp)
			sp.ErrorCode = errCode(err)
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, epoch
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}

func (s *Server) listOffset(topic string, rp kmsg.ListOffsetsRequestTopicPartition) (offset, ts int64, epoch int32, err error) {
	p, err := s.b.Partition(topic, rp.Partition)
	if err != nil {
		return -1, -1, -1, err
	}
	if err := checkLeaderEpoch(p, rp.CurrentLeaderEpoch); err != nil {
		return -1, -1, -1, err
	}
	switch rp.Timestamp {
	case listEarliest:
		return p.Log.LogStartOffset(), -1, p.LeaderEpoch, nil
	case listLatest:
		return p.Log.HighWatermark(), -1, p.LeaderEpoch, nil
	case listMaxTimestamp:
		o, t, err := p.Log.MaxTimestamp()
		if err != nil {
			return -1, -1, -1, err
		}
		return o, t, p.LeaderEpoch, nil
	}
	if rp.Timestamp < 0 {
		return -1, -1, -1, fmt.Errorf("unsupported special timestamp %d: %w", rp.Timestamp, kerr.InvalidRequest)
	}
	o, t, found, err := p.Log.OffsetForTimestamp(rp.Timestamp)
	if err != nil {
		return -1, -1, -1, err
	}
	if !found || o >= p.Log.HighWatermark() {
		return -1, -1, -1, nil
	}
	return o, t, p.LeaderEpoch, nil
}

// checkLeaderEpoch validates a client's current leader epoch (-1 = none).
func checkLeaderEpoch(p *broker.Partition, current int32) error {
	switch {
	case current < 0 || current == p.LeaderEpoch:
		return nil
	case current < p.LeaderEpoch:
		return fmt.Errorf("leader epoch %d older than %d: %w", current, p.LeaderEpoch, kerr.FencedLeaderEpoch)
	default:
		return fmt.Errorf("leader epoch %d newer than %d: %w", current, p.LeaderEpoch, kerr.UnknownLeaderEpoch)
	}
}
