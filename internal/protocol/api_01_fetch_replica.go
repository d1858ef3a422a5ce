package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/replica"
)

// handleReplicaFetch serves a follower's Fetch (replica id >= 0; Kafka's
// ReplicaManager.fetchMessages for a follower): per partition, this broker
// must lead it at the follower's current leader epoch (KIP-320); a last
// fetched epoch that ends earlier here is answered with the diverging
// epoch and no records (Fetch v12+); otherwise whole batches up to the log
// end are returned (sent with sendfile like consumer fetches) and the
// follower's position is recorded, which moves the high watermark and may
// expand the ISR. A Strata follower's fsynced end, reported apart from its
// fetch offset in replica.DurableEndTag, is recorded and echoed in the
// answer's partition with the same tag (docs/replication.md). It long-polls for new data up to the request's max wait
// and min bytes (replica.fetch.wait.max.ms / replica.fetch.min.bytes of the
// follower). Fetch sessions are not offered to followers: they send
// sessionless full fetches.
//
// From v15 the follower's id and broker epoch come in ReplicaState
// (KIP-903): a fetch carrying an epoch older than the follower's current
// registration is from a previous incarnation and is answered
// NOT_LEADER_OR_FOLLOWER without recording its position (Kafka's
// Replica.updateFetchStateOrThrow; replica.Leader.FollowerFetch).
func (s *Server) handleReplicaFetch(ctx context.Context, req *kmsg.FetchRequest, unknown []unknownFetchTopic) (reply, error) {
	replicaID, brokerEpoch := fetchReplicaID(req), fetchBrokerEpoch(req)
	maxBytes := int64(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	for {
		fr := &fetchReply{version: req.Version, topicID: s.topicID}
		waits := s.replicaFetchOnce(req, replicaID, brokerEpoch, fr, maxBytes)
		fr.addUnknownTopics(unknown)
		done := fr.bytes >= int64(req.MinBytes) || fr.hasError || req.MaxWaitMillis <= 0 || len(waits) == 0
		if !done {
			remaining := time.Until(deadline)
			if s.fetchWaits != nil && remaining > 0 {
				s.fetchWaits()
			}
			if remaining > 0 && waitAny(ctx, waits, remaining) {
				fr.release()
				continue // new data: read again
			}
		}
		return reply{fetch: fr}, nil
	}
}

// replicaFetchOnce reads every partition of a follower's fetch once and
// returns the channels that signal new data at their leaders.
func (s *Server) replicaFetchOnce(req *kmsg.FetchRequest, replicaID int32, brokerEpoch int64, fr *fetchReply, maxBytes int64) []<-chan struct{} {
	var waits []<-chan struct{}
	remaining := maxBytes
	for _, rt := range req.Topics {
		ft := fetchTopic{name: rt.Topic}
		for _, rp := range rt.Partitions {
			fp := fetchPart{partition: rp.Partition, hw: -1, lso: -1, logStart: -1}
			p, err := s.b.Partition(rt.Topic, rp.Partition)
			if err == nil {
				if ch := p.EndChanged(); ch != nil {
					waits = append(waits, ch) // before reading, so no append is missed
				}
				var ans replica.FetchAnswer
				limit := min(int64(rp.PartitionMaxBytes), remaining)
				// A Strata follower's fsynced end (replica.DurableEndTag,
				// an unknown tag to kmsg: kept in UnknownTags).
				durable, hasDurable := replica.DurableEndOf(&rp.UnknownTags)
				ans, err = p.ServeReplicaFetch(replica.FetchPart{
					Replica: replicaID, BrokerEpoch: brokerEpoch, CurrentLeaderEpoch: rp.CurrentLeaderEpoch,
					FetchOffset: rp.FetchOffset, DurableEnd: durable, HasDurableEnd: hasDurable,
					LastFetchedEpoch: rp.LastFetchedEpoch, LogStart: rp.LogStartOffset,
					MaxBytes: max(limit, 0), MinOneBatch: fr.bytes == 0,
				})
				if err == nil {
					if hasDurable && ans.Diverging == nil && ans.DurableEnd >= 0 {
						fp.durableEnd = &ans.DurableEnd
					}
					fp.hw, fp.lso, fp.logStart = ans.HighWatermark, min(ans.LastStable, ans.HighWatermark), ans.LogStart
					fp.diverging = ans.Diverging
					if ans.Diverging != nil {
						fr.hasError = true // answer now: the follower must truncate
					}
					fp.read = &ans.Read
					fp.chunks = ans.Read.Chunks
					for _, c := range fp.chunks {
						fp.size += c.Len
					}
					fr.bytes += fp.size
					remaining -= fp.size
				}
			}
			if err != nil {
				fp.errorCode = errCode(err)
				fr.hasError = true
			}
			ft.parts = append(ft.parts, fp)
		}
		fr.topics = append(fr.topics, ft)
	}
	return waits
}
