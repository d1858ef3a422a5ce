package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/broker"
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
	maxBytes := int64(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	rf := &replicaFetch{s: s, req: req, replicaID: fetchReplicaID(req), brokerEpoch: fetchBrokerEpoch(req),
		fr: &fetchReply{version: req.Version, topicID: s.topicID}, remaining: maxBytes}
	rf.readAll()
	rf.fr.addUnknownTopics(unknown) // after the read slots, which index fr.topics
	defer rf.unwait()
	var moved []int
	for rf.fr.bytes < int64(req.MinBytes) && !rf.fr.hasError && req.MaxWaitMillis > 0 && len(rf.parts) > 0 {
		if rf.w == nil {
			// About to wait: one waiter on every partition's log end,
			// and read again those whose end moved since their read.
			moved = rf.addWaiter(moved[:0])
		} else {
			remaining := time.Until(deadline)
			if s.fetchWaits != nil && remaining > 0 {
				s.fetchWaits()
			}
			if remaining <= 0 || !rf.wait(ctx, remaining) {
				break
			}
			moved = rf.w.Take(moved[:0])
		}
		rf.reread(moved) // only the partitions that moved
	}
	return reply{fetch: rf.fr}, nil
}

// replicaFetch is one follower Fetch being answered. Its long poll costs
// nothing per partition per wake-up (issue 18): one broker.Waiter, added
// to every partition's log end once the fetch is about to wait
// (AddEndWaiter; the end each partition had before its read is compared
// after, so no append is missed), kept across the re-reads of the
// request and removed at its end; a wake-up reads again only the
// partitions that fired (Waiter.Take). The log end fires it on appends,
// truncations, leadership changes (broker.setLeaderships and the replica
// layer's "no longer leading" call Log.WakeWaiters, so the re-read
// answers NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH at once, as
// Kafka's ReplicaManager completes the partition's delayed fetches when
// it stops leading it), and when the log fails or closes (deleted: the
// re-read answers UNKNOWN_TOPIC_OR_PARTITION).
type replicaFetch struct {
	s           *Server
	req         *kmsg.FetchRequest
	replicaID   int32
	brokerEpoch int64
	fr          *fetchReply
	remaining   int64 // response bytes left (max bytes)
	// parts are the request's partitions in order; a partition's index is
	// its waiter tag.
	parts []replicaPart
	w     *broker.Waiter
}

type replicaPart struct {
	topic string
	rp    *kmsg.FetchRequestTopicPartition
	slot  [2]int // fr.topics[slot[0]].parts[slot[1]]
	// p is the partition last read (nil: none); the waiter is on its log
	// once w is set. end is its log end offset before that read.
	p   *broker.Partition
	end int64
}

// readAll reads every partition of the request once.
func (rf *replicaFetch) readAll() {
	for ti := range rf.req.Topics {
		rt := &rf.req.Topics[ti]
		ft := fetchTopic{name: rt.Topic, parts: make([]fetchPart, len(rt.Partitions))}
		for pi := range rt.Partitions {
			rf.parts = append(rf.parts, replicaPart{topic: rt.Topic, rp: &rt.Partitions[pi], slot: [2]int{len(rf.fr.topics), pi}})
		}
		rf.fr.topics = append(rf.fr.topics, ft)
	}
	for i := range rf.parts {
		rf.read(i)
	}
}

// addWaiter adds the request's waiter to the log end of every partition
// read and appends to moved the partitions whose end moved since their
// read (register, then check).
func (rf *replicaFetch) addWaiter(moved []int) []int {
	rf.w = broker.NewWaiter()
	for i := range rf.parts {
		rp := &rf.parts[i]
		if rp.p == nil {
			continue
		}
		rp.p.AddEndWaiter(rf.w, i)
		if rp.p.Log.LogEndOffset() != rp.end {
			moved = append(moved, i)
		}
	}
	return moved
}

// wait blocks until a partition fires the waiter (true), or d passes or
// ctx ends.
func (rf *replicaFetch) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-rf.w.C():
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// reread reads the moved partitions again, replacing their answers.
func (rf *replicaFetch) reread(moved []int) {
	for _, i := range moved {
		fp := rf.slotOf(i)
		if fp.read != nil {
			fp.read.Release()
		}
		rf.fr.bytes -= fp.size
		rf.remaining += fp.size
		*fp = fetchPart{}
		rf.read(i)
	}
}

// unwait removes the waiter from every log it was added to.
func (rf *replicaFetch) unwait() {
	if rf.w == nil {
		return
	}
	for i := range rf.parts {
		if p := rf.parts[i].p; p != nil {
			p.RemoveEndWaiter(rf.w)
		}
	}
}

func (rf *replicaFetch) slotOf(i int) *fetchPart {
	at := rf.parts[i].slot
	return &rf.fr.topics[at[0]].parts[at[1]]
}

// read reads partition i of the request into its slot: the partition is
// resolved each time, so a re-read after a wake-up answers a deletion or
// a leadership change at once.
func (rf *replicaFetch) read(i int) {
	part := &rf.parts[i]
	rp, fr := part.rp, rf.fr
	fp := rf.slotOf(i)
	*fp = fetchPart{partition: rp.Partition, hw: -1, lso: -1, logStart: -1}
	p, err := rf.s.b.Partition(part.topic, rp.Partition)
	if err == nil {
		if part.p != p && part.p != nil && rf.w != nil && part.p.Log != p.Log {
			// Another log (the topic was re-created): move the waiter
			// before reading, so no append is missed.
			part.p.RemoveEndWaiter(rf.w)
			p.AddEndWaiter(rf.w, i)
		}
		part.p, part.end = p, p.Log.LogEndOffset() // before reading
		var ans replica.FetchAnswer
		limit := min(int64(rp.PartitionMaxBytes), rf.remaining)
		// A Strata follower's fsynced end (replica.DurableEndTag, an
		// unknown tag to kmsg: kept in UnknownTags).
		durable, hasDurable := replica.DurableEndOf(&rp.UnknownTags)
		ans, err = p.ServeReplicaFetch(replica.FetchPart{
			Replica: rf.replicaID, BrokerEpoch: rf.brokerEpoch, CurrentLeaderEpoch: rp.CurrentLeaderEpoch,
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
			rf.remaining -= fp.size
		}
	}
	if err != nil {
		fp.errorCode = errCode(err)
		fr.hasError = true
	}
}
