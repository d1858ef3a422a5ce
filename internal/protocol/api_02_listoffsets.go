package protocol

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Special ListOffsets timestamps.
const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3
)

// handleListOffsets (key 2, v0-7) answers earliest (-2), latest (-1, the
// high watermark, or the last stable offset for READ_COMMITTED), max
// timestamp (-3) and first-offset-at-or-after timestamp queries. v0 is Kafka's legacy offset list (handleListOffsetsV0),
// served although Kafka 4.0 dropped it because Burrow 1.2.1 sends only v0.
func (s *Server) handleListOffsets(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	if req.Version == 0 {
		return s.handleListOffsetsV0(req, resp), nil
	}
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			off, ts, epoch, err := s.listOffset(rt.Topic, rp, req.IsolationLevel == 1, req.ReplicaID >= 0)
			if errors.Is(err, kerr.OffsetNotAvailable) && req.Version < 5 {
				// OFFSET_NOT_AVAILABLE came with v5; older clients get
				// LEADER_NOT_AVAILABLE (Kafka's KafkaApis), also retriable.
				sp.ErrorCode = kerr.LeaderNotAvailable.Code
			} else {
				sp.ErrorCode = errCode(err)
			}
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, epoch
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}

func (s *Server) listOffset(topic string, rp kmsg.ListOffsetsRequestTopicPartition, readCommitted, fromReplica bool) (offset, ts int64, epoch int32, err error) {
	p, err := s.leaderPartition(topic, rp.Partition, rp.CurrentLeaderEpoch)
	if err != nil {
		return -1, -1, -1, err
	}
	leaderEpoch := leaderEpochOf(p)
	// The visible end: READ_COMMITTED clients see up to the last stable
	// offset (Kafka's fetchOffsetByTimestamp with isolation level); a
	// follower (replica id >= 0) is answered the log end offset (no
	// isolation), to reset its fetch position.
	end := p.HighWatermark()
	switch {
	case fromReplica:
		end = p.LogEndOffset()
	case readCommitted:
		end = p.LastStableOffset()
	}
	// A client asking a new leader whose high watermark has not reached
	// the start of its epoch (its followers have not fetched since the
	// election, or it restarted with an uncommitted tail) cannot be told
	// the end: it may be below one already served. Kafka's
	// Partition.fetchOffsetForTimestamp answers OFFSET_NOT_AVAILABLE for
	// the latest offset and for a timestamp found at or past the end (or
	// not found); the earliest offset is answered.
	var lagging error
	if r := p.Replica(); r != nil && !fromReplica && r.HighWatermarkLagsEpochStart() {
		lagging = fmt.Errorf("%s-%d: the high watermark %d lags the start of leader epoch %d: %w", topic, rp.Partition, p.HighWatermark(), leaderEpoch, kerr.OffsetNotAvailable)
	}
	switch rp.Timestamp {
	case listEarliest:
		return p.LogStartOffset(), -1, leaderEpoch, nil
	case listLatest:
		if lagging != nil {
			return -1, -1, -1, lagging
		}
		return end, -1, leaderEpoch, nil
	case listMaxTimestamp:
		o, t, err := p.MaxTimestamp()
		if err != nil {
			return -1, -1, -1, err
		}
		if lagging != nil && (o < 0 || o >= end) {
			return -1, -1, -1, lagging
		}
		return o, t, leaderEpoch, nil
	}
	if rp.Timestamp < 0 {
		return -1, -1, -1, fmt.Errorf("unsupported special timestamp %d: %w", rp.Timestamp, kerr.InvalidRequest)
	}
	o, t, found, err := p.OffsetForTimestamp(rp.Timestamp)
	if err != nil {
		return -1, -1, -1, err
	}
	if !found || o >= end {
		return -1, -1, -1, lagging
	}
	return o, t, leaderEpoch, nil
}

// handleListOffsetsV0 answers Kafka's legacy "offsets before" query
// (ListOffsets v0, still sent by Burrow 1.2.1 and other sarama-era tools):
// each partition gets a descending list of at most MaxNumOffsets offsets.
func (s *Server) handleListOffsetsV0(req *kmsg.ListOffsetsRequest, resp *kmsg.ListOffsetsResponse) reply {
	nowMs := time.Now().UnixMilli()
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			offs, err := s.listOffsetsV0(rt.Topic, rp, nowMs)
			sp.ErrorCode = errCode(err)
			sp.OldStyleOffsets = offs
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}
}

func (s *Server) listOffsetsV0(topic string, rp kmsg.ListOffsetsRequestTopicPartition, nowMs int64) ([]int64, error) {
	p, err := s.leaderPartition(topic, rp.Partition, -1)
	if err != nil {
		return nil, err
	}
	if rp.MaxNumOffsets < 0 {
		return nil, fmt.Errorf("max num offsets %d: %w", rp.MaxNumOffsets, kerr.InvalidRequest)
	}
	return legacyOffsetsBefore(p.Segments(), p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark(),
		nowMs, rp.Timestamp, int(rp.MaxNumOffsets)), nil
}

// legacyOffsetsBefore is Kafka's v0 offset list. The candidates are each
// segment's base offset (raised to the log start offset), stamped with the
// segment's largest timestamp (Kafka uses the file's mtime; storage reports
// the mtime only for a segment without timestamps), plus the log end offset
// stamped now when the active segment holds data. Latest (-1) starts from
// the last candidate, earliest (-2) from the first, any other timestamp from
// the last candidate stamped at or before it; from there the offsets are
// listed downwards, at most maxNum of them. As Kafka does for consumers,
// offsets above the high watermark are replaced by the high watermark (the
// readable end of this follower-less log). Unlike Kafka, repeated offsets
// (segments wholly below the log start offset, or the high watermark equal
// to a base offset) are listed once, so the list is strictly descending.
func legacyOffsetsBefore(segs []broker.SegmentInfo, logStart, leo, hw, nowMs, ts int64, maxNum int) []int64 {
	type candidate struct{ offset, ms int64 }
	cands := make([]candidate, 0, len(segs)+1)
	for _, sg := range segs {
		cands = append(cands, candidate{max(sg.BaseOffset, logStart), sg.LargestTimestamp})
	}
	if n := len(segs); n == 0 || segs[n-1].Size > 0 {
		cands = append(cands, candidate{leo, nowMs})
	}
	start := len(cands) - 1
	switch ts {
	case listLatest:
	case listEarliest:
		start = 0
	default:
		for start >= 0 && cands[start].ms > ts {
			start--
		}
	}
	var out []int64
	for i := start; i >= 0 && len(out) < maxNum; i-- {
		if o := cands[i].offset; len(out) == 0 || o < out[len(out)-1] {
			out = append(out, o)
		}
	}
	if len(out) > 0 && out[0] > hw {
		i := 0
		for i < len(out) && out[i] > hw {
			i++
		}
		rest := out[i:]
		if len(rest) > 0 && rest[0] == hw {
			rest = rest[1:]
		}
		out = append([]int64{hw}, rest...)
	}
	return out
}

// checkLeaderEpoch validates a client's current leader epoch (-1 = none).
// A replicated partition is served by its leader only, at the leader's
// epoch (KIP-320: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
func checkLeaderEpoch(p *broker.Partition, current int32) error {
	if r := p.Replica(); r != nil {
		epoch, ok := r.Leading()
		if !ok {
			return fmt.Errorf("%s-%d is led by another broker: %w", p.Topic, p.Index, kerr.NotLeaderForPartition)
		}
		return replica.CheckLeaderEpoch(current, epoch)
	}
	l := p.Leadership()
	switch {
	case !p.Leads():
		return fmt.Errorf("%s-%d is led by broker %d: %w", p.Topic, p.Index, l.Leader, kerr.NotLeaderForPartition)
	case current < 0 || current == l.LeaderEpoch:
		return nil
	case current < l.LeaderEpoch:
		return fmt.Errorf("leader epoch %d older than %d: %w", current, l.LeaderEpoch, kerr.FencedLeaderEpoch)
	default:
		return fmt.Errorf("leader epoch %d newer than %d: %w", current, l.LeaderEpoch, kerr.UnknownLeaderEpoch)
	}
}

// leaderEpochOf is the epoch at which this broker leads p.
func leaderEpochOf(p *broker.Partition) int32 {
	if r := p.Replica(); r != nil {
		if e, ok := r.Leading(); ok {
			return e
		}
	}
	return p.Leadership().LeaderEpoch
}
