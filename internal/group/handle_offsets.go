package group

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/record"
)

// partitionCodes holds one error code per requested topic partition of an
// offset commit (plain or transactional).
type partitionCodes [][]int16

// newPartitionCodes sizes codes for n topics of size(i) partitions each.
func newPartitionCodes(n int, size func(i int) int) partitionCodes {
	codes := make(partitionCodes, n)
	for i := range codes {
		codes[i] = make([]int16, size(i))
	}
	return codes
}

// fill sets code on every partition that has no error yet.
func (codes partitionCodes) fill(code int16) {
	for i := range codes {
		for j := range codes[i] {
			if codes[i][j] == 0 {
				codes[i][j] = code
			}
		}
	}
}

func (c *Coordinator) partitionExists(topic string, p int32) bool {
	return c.cfg.TopicPartitionExists == nil || c.cfg.TopicPartitionExists(topic, p)
}

func (c *Coordinator) offsetCommit(ctx context.Context, r *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	codes := newPartitionCodes(len(r.Topics), func(i int) int { return len(r.Topics[i].Partitions) })
	defer func() {
		for i, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}()
	if code := c.status(r.Group); code != 0 {
		codes.fill(code)
		return resp
	}
	now := c.env.clock.Now()
	expireMs := int64(-1)
	if r.Version >= 2 && r.Version <= 4 && r.RetentionTimeMillis >= 0 {
		expireMs = now.UnixMilli() + r.RetentionTimeMillis
	}
	offs := map[tp]offset{}
	var recs []record.Record
	for i, t := range r.Topics {
		for j, p := range t.Partitions {
			switch {
			case p.Metadata != nil && len(*p.Metadata) > c.cfg.MaxMetadataSize:
				codes[i][j] = kerr.OffsetMetadataTooLarge.Code
			case !c.partitionExists(t.Topic, p.Partition):
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			default:
				o := offset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, commitMs: now.UnixMilli(), expireMs: expireMs}
				if r.Version < 6 {
					o.leaderEpoch = -1
				}
				if p.Metadata != nil {
					o.metadata = *p.Metadata
				}
				k := tp{t.Topic, p.Partition}
				offs[k] = o
			}
		}
	}
	g := c.lockGroup(r.Group, r.Generation < 0)
	if g == nil {
		if code := c.status(r.Group); code != 0 {
			codes.fill(code)
			return resp
		}
		// Kafka's OffsetMetadataManager.validateOffsetCommit: a commit with
		// a generation to a group that does not exist is GROUP_ID_NOT_FOUND
		// from v9 on, ILLEGAL_GENERATION before.
		if r.Version >= 9 {
			codes.fill(kerr.GroupIDNotFound.Code)
		} else {
			codes.fill(kerr.IllegalGeneration.Code)
		}
		return resp
	}
	if code := g.validateCommit(r.Version, r.MemberID, r.InstanceID, r.Generation); code != 0 {
		codes.fill(code)
		if g.removable() {
			c.removeGroup(g)
		}
		c.unlockAndComplete(g, "offset commit")
		return resp
	}
	if len(offs) == 0 {
		c.unlockAndComplete(g, "offset commit")
		return resp
	}
	keys := make([]tp, 0, len(offs))
	for k := range offs {
		keys = append(keys, k)
	}
	sortTPs(keys)
	for _, k := range keys {
		recs = append(recs, record.Record{Key: offsetKey(g.id, k), Value: offsetValue(offs[k])})
	}
	// Appended under the lock (log order), waited for without it; the
	// offsets are visible once durable (Kafka's pending offset commits).
	w := c.appendLocked(g, recs)
	order := c.nextOrder()
	g.mu.Unlock()
	err := c.await(w)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		c.logger.Warn("store offset commit", "group", g.id, "err", err)
		codes.fill(storeErrorCode(err, kerr.InvalidCommitOffsetSize.Code))
		if g.removable() {
			c.removeGroup(g)
		}
		return resp
	}
	if g.state != stateDead {
		g.applyCommit(offs, order)
	}
	c.m.commits.Add(float64(len(offs)))
	return resp
}

func sortTPs(ks []tp) {
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].topic != ks[j].topic {
			return ks[i].topic < ks[j].topic
		}
		return ks[i].partition < ks[j].partition
	})
}

// fetchedTopic is one topic of an OffsetFetch answer.
type fetchedTopic struct {
	topic      string
	partitions []kmsg.OffsetFetchResponseGroupTopicPartition
}

// fetchOffsets answers OffsetFetch for one group; topics nil means all
// (the partitions with a committed offset). With requireStable, a
// partition with pending transactional offsets answers
// UNSTABLE_OFFSET_COMMIT instead of its committed offset (KIP-447).
func (c *Coordinator) fetchOffsets(id string, memberID *string, epoch int32, topics map[string][]int32, order []string, requireStable bool) ([]fetchedTopic, int16) {
	if code := c.status(id); code != 0 {
		return nil, code
	}
	var offs map[tp]offset
	var unstable map[tp]bool
	if g := c.lockGroup(id, false); g != nil {
		if code := g.validateFetch(memberID, epoch); code != 0 {
			g.mu.Unlock()
			return nil, code
		}
		offs = make(map[tp]offset, len(g.offsets))
		for k, o := range g.offsets {
			offs[k] = o
		}
		if requireStable && len(g.txn) > 0 {
			unstable = map[tp]bool{}
			for _, m := range g.txn {
				for k := range m {
					unstable[k] = true
				}
			}
		}
		g.mu.Unlock()
	}
	part := func(k tp) kmsg.OffsetFetchResponseGroupTopicPartition {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition = k.partition
		rp.Offset, rp.LeaderEpoch = -1, -1
		md := ""
		if o, ok := offs[k]; ok && !unstable[k] {
			rp.Offset, rp.LeaderEpoch, md = o.offset, o.leaderEpoch, o.metadata
		}
		if unstable[k] {
			rp.ErrorCode = kerr.UnstableOffsetCommit.Code
		}
		rp.Metadata = &md
		return rp
	}
	var out []fetchedTopic
	if topics == nil {
		keys := make([]tp, 0, len(offs))
		for k := range offs {
			keys = append(keys, k)
		}
		sortTPs(keys)
		for _, k := range keys {
			if len(out) == 0 || out[len(out)-1].topic != k.topic {
				out = append(out, fetchedTopic{topic: k.topic})
			}
			ft := &out[len(out)-1]
			ft.partitions = append(ft.partitions, part(k))
		}
		return out, 0
	}
	for _, t := range order {
		ft := fetchedTopic{topic: t}
		for _, p := range topics[t] {
			ft.partitions = append(ft.partitions, part(tp{t, p}))
		}
		out = append(out, ft)
	}
	return out, 0
}

func (c *Coordinator) offsetFetch(r *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, rg := range r.Groups {
			var topics map[string][]int32
			var order []string
			if rg.Topics != nil {
				topics = map[string][]int32{}
				for _, t := range rg.Topics {
					if _, ok := topics[t.Topic]; !ok {
						order = append(order, t.Topic)
					}
					topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
				}
			}
			ft, code := c.fetchOffsets(rg.Group, rg.MemberID, rg.MemberEpoch, topics, order, r.RequireStable)
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, code
			for _, t := range ft {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic, rt.Partitions = t.topic, t.partitions
				g.Topics = append(g.Topics, rt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
	var topics map[string][]int32
	var order []string
	if r.Topics != nil || r.Version < 2 {
		topics = map[string][]int32{}
		for _, t := range r.Topics {
			if _, ok := topics[t.Topic]; !ok {
				order = append(order, t.Topic)
			}
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
	}
	ft, code := c.fetchOffsets(r.Group, nil, -1, topics, order, r.Version >= 7 && r.RequireStable)
	if code != 0 && r.Version < 2 {
		// No top-level error code before v2: report it per partition.
		for _, t := range order {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t
			for _, p := range topics[t] {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	resp.ErrorCode = code
	for _, t := range ft {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.topic
		for _, p := range t.partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (c *Coordinator) offsetDelete(ctx context.Context, r *kmsg.OffsetDeleteRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	g, code := c.lockExisting(r.Group, kerr.GroupIDNotFound.Code)
	if g == nil {
		resp.ErrorCode = code
		return resp
	}
	defer g.mu.Unlock()
	var subscribed map[string]bool
	if g.state != stateEmpty {
		var ok bool
		if subscribed, ok = g.subscribedTopics(); !ok {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			return resp
		}
	}
	var recs []record.Record
	var gone []tp
	for _, t := range r.Topics {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition}
			k := tp{t.Topic, p.Partition}
			switch {
			case subscribed[t.Topic]:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case !c.partitionExists(t.Topic, p.Partition):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				if _, ok := g.offsets[k]; ok || g.hasPending(k) {
					recs = append(recs, record.Record{Key: offsetKey(g.id, k)})
					gone = append(gone, k)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) == 0 {
		return resp
	}
	if err := c.appendRecordsWait(g, recs); err != nil {
		c.logger.Warn("store offset delete", "group", g.id, "err", err)
		resp.Topics = nil
		resp.ErrorCode = storeErrorCode(err, kerr.UnknownServerError.Code)
		return resp
	}
	for _, k := range gone {
		delete(g.offsets, k)
		dropPending(g.txn, k)
	}
	return resp
}
