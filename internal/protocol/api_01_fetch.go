package protocol

import (
	"context"
	"time"

	"github.com/strata-io/strata/internal/authz"
	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleFetch (key 1, v4-12) reads whole batches up to the high watermark
// with Kafka's limits (max bytes, partition max bytes, KIP-74 first batch
// always whole) and long-polls until min bytes are available or max wait
// passes. Fetch sessions (KIP-227) are served: a full fetch with epoch 0
// opens one, incremental fetches name only changed partitions and get
// only partitions with news; epoch -1 is a sessionless full fetch.
func (s *Server) handleFetch(ctx context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.FetchRequest)
	unknown := s.resolveFetchTopicIDs(req) // v13+: topic ids to names
	if fetchReplicaID(req) >= 0 {
		if !c.allowedCluster(authz.OpClusterAction) { // a follower's fetch (Kafka's handleFetchRequest)
			fr := deniedFetch(req)
			fr.topicID = s.topicID
			return reply{fetch: fr}, nil
		}
		return s.handleReplicaFetch(ctx, req, unknown)
	}
	plan := s.sessions.plan(req)
	defer s.sessions.done(plan)
	readCommitted := req.IsolationLevel == 1
	fr := &fetchReply{version: req.Version, errorCode: plan.errorCode, readCommitted: readCommitted, readable: c.fetchAuth(req), topicID: s.topicID}
	if plan.session != nil {
		fr.sessionID = plan.session.id
		fr.newSession = !plan.incremental
	}
	if plan.errorCode != 0 {
		return reply{fetch: fr}, nil
	}
	maxBytes := int64(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	maxBytes = c.fetchQuotaCap(maxBytes)
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	var view *meta.View
	if s.cfg.Cluster != nil {
		view = s.cfg.Cluster.View()
	}
	// Quiet partitions are skipped only in an incremental fetch on the
	// metadata the session's last answer was built with, and when no
	// preferred read replica is chosen (the choice may have changed).
	skipQuiet := plan.incremental && plan.session.view == view && (req.Version < 11 || req.Rack == "" || !s.cfg.RackAwareReplicaSelector)
	fl := s.newFetchFill(plan, fr, maxBytes, skipQuiet)
	if req.Version >= 11 {
		// KIP-392: the request carries client metadata (rack_id), so any
		// replica may serve it (Kafka's FetchParams.fetchOnlyLeader is
		// false for a consumer with client metadata).
		fl.anyReplica, fl.rack = true, req.Rack
	}
	defer fl.unwait()
	fl.readAll()
	fr.addUnknownTopics(unknown) // after the planned slots, which index fr.topics
	var moved, tags []int
	for !fr.satisfied(int64(req.MinBytes), maxBytes) && !fr.hasError && !fr.redirected && req.MaxWaitMillis > 0 {
		if fl.waitable == 0 {
			break // no partition can wake the poll
		}
		if fl.w == nil {
			// A sessionless long poll after all: wait on every partition
			// read (and read again those that moved since).
			moved = fl.addWaiter(moved[:0])
		} else {
			remaining := time.Until(deadline)
			if s.fetchWaits != nil && remaining > 0 {
				s.fetchWaits()
			}
			if remaining <= 0 || !c.waitFill(ctx, fl, remaining) {
				break
			}
			tags = fl.w.Take(tags[:0])
			if plan.session != nil {
				moved = plan.session.moved(moved[:0], tags)
			} else {
				moved, tags = tags, moved
			}
		}
		// Read again only the partitions that moved.
		fl.reread(moved)
	}
	if plan.session != nil {
		fl.markQuiet()
		plan.session.view = view
		fr.keepNews(plan.incremental)
	}
	for _, t := range fr.topics {
		var n int64
		for _, p := range t.parts {
			n += p.size
		}
		if n > 0 {
			s.metrics.topicBytesOut.WithLabelValues(t.name).Add(float64(n))
		}
	}
	return reply{fetch: fr}, nil
}

// keepNews records what a session's client now knows and, for an
// incremental fetch, drops partitions without news (no records, no error,
// same high watermark and log start offset as last answered).
func (fr *fetchReply) keepNews(incremental bool) {
	topics := fr.topics[:0]
	for _, t := range fr.topics {
		parts := t.parts[:0]
		for _, p := range t.parts {
			sp := p.session
			news := !incremental || p.size > 0 || p.errorCode != 0 || p.preferred != nil || !sp.sent || sp.hw != p.hw || sp.lso != p.lso || sp.logStart != p.logStart
			if !news {
				if p.read != nil {
					p.read.Release()
				}
				continue
			}
			sp.hw, sp.lso, sp.logStart, sp.sent = p.hw, p.lso, p.logStart, true
			parts = append(parts, p)
		}
		if len(parts) > 0 {
			t.parts = parts
			topics = append(topics, t)
		}
	}
	fr.topics = topics
}

// fetchFill fills a Fetch reply from the planned partitions and, for a
// long poll, waits on all of them with one broker.Waiter: a wake-up costs
// one channel receive whatever the partition count, and only the
// partitions that moved are read again. A session's fetch waits on the
// session's waiter, added to each partition once for the session's life
// (setLog), so its long poll costs nothing per partition to set up or
// tear down (issue 18); a sessionless fetch adds a waiter of its own to
// every partition read when it starts to wait (addWaiter, unwait).
type fetchFill struct {
	s         *Server
	session   *fetchSession // nil: sessionless
	parts     []*sessionPart
	fr        *fetchReply
	remaining int64
	where     []fetchSlot // per planned partition: its place in fr
	logs      []*broker.Partition
	// waitable counts the partitions read that can wake a long poll
	// (logs not nil).
	waitable int
	w        *broker.Waiter
	// anyReplica: a follower replica may serve the fetch (v11+); rack is
	// the consumer's rack_id (KIP-392).
	anyReplica bool
	rack       string
	// skipQuiet: partitions whose last answer was quiet and that did not
	// change since are not read again (unchanged).
	skipQuiet bool
}

// fetchSlot locates a planned partition's answer in the reply: topic is
// its topic's entry in fr.topics, part its answer there (-1: none yet, a
// partition skipped as unchanged).
type fetchSlot struct{ topic, part int }

// newFetchFill lays out the reply: one topic entry per run of consecutive
// planned partitions of a topic. Each answer is added when its partition
// is read (slot); a partition skipped as unchanged gets none unless a long
// poll reads it. Without skipping, each topic's answers are allocated once
// at their final size (a session over 1,000 partitions otherwise regrew
// them on every fetch); with it, only the few read are (zeroing 1,000
// answers per fetch was half of a fetch's cost). A session's fetches reuse
// its slot and partition buffers (one fetch at a time runs on a session).
func (s *Server) newFetchFill(plan fetchPlan, fr *fetchReply, maxBytes int64, skipQuiet bool) *fetchFill {
	parts := plan.parts
	fl := &fetchFill{s: s, session: plan.session, parts: parts, fr: fr, remaining: maxBytes, skipQuiet: skipQuiet}
	if ss := plan.session; ss != nil {
		// Partitions forgotten by this request stop waking the session,
		// and wake-ups listed since its last fetch are dropped: every
		// partition is read (or checked unchanged) below, after its
		// waiter was added, so whatever moves from here on is listed
		// again (no lost wake-up) and what moved before is seen by the
		// read.
		ss.unregisterDropped()
		fl.w = ss.w
		select {
		case <-fl.w.C():
		default:
		}
		ss.w.Take(nil)
		if cap(ss.where) < len(parts) {
			ss.where = make([]fetchSlot, len(parts))
			ss.logs = make([]*broker.Partition, len(parts))
		}
		fl.where, fl.logs = ss.where[:len(parts)], ss.logs[:len(parts)]
		clear(fl.logs)
	} else {
		fl.where, fl.logs = make([]fetchSlot, len(parts)), make([]*broker.Partition, len(parts))
	}
	run := 0
	for i, sp := range parts {
		if n := len(fr.topics); n == 0 || fr.topics[n-1].name != sp.topic {
			for run = i + 1; run < len(parts) && parts[run].topic == sp.topic; run++ {
			}
			var answers []fetchPart
			if !skipQuiet {
				answers = make([]fetchPart, 0, run-i)
			}
			fr.topics = append(fr.topics, fetchTopic{name: sp.topic, parts: answers})
		}
		fl.where[i] = fetchSlot{len(fr.topics) - 1, -1}
	}
	return fl
}

// slot returns planned partition i's answer, adding it to the reply the
// first time.
func (fl *fetchFill) slot(i int) *fetchPart {
	w := &fl.where[i]
	ft := &fl.fr.topics[w.topic]
	if w.part < 0 {
		w.part = len(ft.parts)
		sp := fl.parts[i]
		ft.parts = append(ft.parts, fetchPart{partition: sp.partition, hw: -1, lso: -1, logStart: -1, session: sp})
	}
	return &ft.parts[w.part]
}

// readAll reads every planned partition once.
func (fl *fetchFill) readAll() {
	for i, sp := range fl.parts {
		if fl.fr.readable != nil && !fl.fr.readable(sp.topic) {
			fl.slot(i).errorCode = kerr.TopicAuthorizationFailed.Code // not hasError: the others may still wait
			continue
		}
		if p := fl.unchanged(i); p != nil {
			fl.setLog(i, p) // no answer, still waited on by a long poll
			continue
		}
		fl.read(i)
	}
}

// read resolves planned partition i (this broker must lead it at the
// client's epoch, or serve it as a follower for a v11+ consumer) and
// reads it into its answer. A long poll's re-read resolves it again too,
// so a partition deleted, or led elsewhere, since the first read is
// answered with its error at once (Kafka's DelayedFetch.tryComplete
// completes a fetch whose partition it no longer leads or knows).
func (fl *fetchFill) read(i int) {
	sp := fl.parts[i]
	fp := fl.slot(i)
	p, err := fl.s.leaderPartition(sp.topic, sp.partition, sp.epoch)
	if err != nil && fl.anyReplica {
		p, err = fl.s.followerRead(sp.topic, sp.partition, sp.epoch, err)
	} else if err == nil && fl.rack != "" && fl.s.cfg.RackAwareReplicaSelector {
		if id := fl.s.preferredReadReplica(p, sp.offset, fl.rack); id >= 0 {
			// Answered without records: the consumer fetches from
			// the replica named, at once (Kafka's fetchMessages
			// answers a preferred read replica without waiting).
			fp.setOffsets(p, fl.fr.readCommitted)
			fp.preferred = &id
			fl.fr.redirected = true
			fl.setLog(i, nil)
			return
		}
	}
	if err != nil {
		fp.errorCode = errCode(err)
		if id, epoch := currentLeader(err); id >= 0 {
			fp.leader = &[2]int32{id, epoch}
		}
		fl.fr.hasError = true
		fl.setLog(i, nil)
		return
	}
	fl.setLog(i, p) // before reading: no append is missed
	fl.s.readPartition(p, sp, fl.fr, fp, &fl.remaining)
}

// setLog records p (nil: none) as the partition planned partition i is
// read from and keeps the fetch's waiter on it. A session's waiter is
// added to a partition once, at its first read, and moved only when the
// partition read changes (a topic deleted and created again; issue 18):
// it stays on a partition answered with an error, whose wake-ups reread
// skips. A sessionless fetch adds its waiter when it starts to wait
// (addWaiter), and from then on here.
func (fl *fetchFill) setLog(i int, p *broker.Partition) {
	old := fl.logs[i]
	if old != nil {
		fl.waitable--
	}
	if p != nil {
		fl.waitable++
	}
	fl.logs[i] = p
	sp := fl.parts[i]
	switch {
	case fl.session != nil:
		if p != nil && sp.reg != p {
			if sp.reg != nil {
				sp.reg.RemoveWaiter(fl.w)
			}
			p.AddWaiter(fl.w, sp.tag)
			sp.reg = p
		}
	case fl.w != nil && old != p:
		if old != nil {
			old.RemoveWaiter(fl.w)
		}
		if p != nil {
			p.AddWaiter(fl.w, sp.tag)
		}
	}
}

// unchanged returns the partition of sp when reading it again would give
// the answer the session's last fetch gave, which carried nothing new for
// the client: sp was not named in this request (same offset), its last
// answer had nothing to read (high watermark <= offset, no error), this
// broker still leads it at the epoch the client sent, and its high
// watermark, last stable offset and log start offset are those last
// answered. Such a partition is left out of an incremental answer anyway
// (keepNews; Kafka's CachedPartition.maybeUpdateResponseData responds for
// records, a changed high watermark or log start offset, or an error), so
// it is not read: a fetch over a session of 1,000 mostly idle partitions
// read (issue 18, end-to-end latency). It is only skipped when the
// session's waiter is on it (a long poll hears of its next move). Nil:
// read it.
func (fl *fetchFill) unchanged(i int) *broker.Partition {
	sp := fl.parts[i]
	p := sp.quiet
	if p == nil || !fl.skipQuiet || !sp.sent || sp.reg != p {
		return nil
	}
	if fl.s.cfg.Cluster == nil {
		// No metadata view to vouch for the partition: it must still be
		// the broker's (a topic deleted and created again is another).
		if cur, err := fl.s.b.Partition(sp.topic, sp.partition); err != nil || cur != p {
			return nil
		}
	}
	if checkLeaderEpoch(p, sp.epoch) != nil {
		return nil
	}
	hw := p.HighWatermark()
	if hw != sp.hw || hw > sp.offset || min(p.LastStableOffset(), hw) != sp.lso || p.LogStartOffset() != sp.logStart {
		return nil
	}
	return p
}

// markQuiet records, for each partition of the session, whether its final
// answer in this fetch was quiet: no error, no preferred replica, nothing
// to read at its offset (a follower's read is marked too; unchanged, which
// checks leadership, never skips it). Call it before keepNews (which
// reorders the answers) and after the long poll (whose re-reads replaced
// answers). It touches no partition.
func (fl *fetchFill) markQuiet() {
	for i, sp := range fl.parts {
		if fl.where[i].part < 0 {
			continue // skipped as unchanged and not read since: still quiet
		}
		sp.quiet = nil
		p := fl.logs[i]
		if p == nil {
			continue
		}
		fp := fl.slot(i)
		if fp.errorCode == 0 && fp.size == 0 && fp.preferred == nil && fp.hw >= 0 && fp.hw <= sp.offset {
			sp.quiet = p
		}
	}
}

// addWaiter adds one waiter to every partition a sessionless fetch read,
// then appends to moved those whose high watermark or last stable offset
// moved since they were read (an append between the read and the
// registration).
func (fl *fetchFill) addWaiter(moved []int) []int {
	fl.w = broker.NewWaiter()
	for i, p := range fl.logs {
		if p == nil {
			continue
		}
		p.AddWaiter(fl.w, fl.parts[i].tag)
		readHW, readLSO := fl.parts[i].hw, fl.parts[i].lso // skipped: as last answered
		if fl.where[i].part >= 0 {
			fp := fl.slot(i)
			readHW, readLSO = fp.hw, fp.lso
		}
		hw := p.HighWatermark()
		if hw != readHW || min(p.LastStableOffset(), hw) != readLSO {
			moved = append(moved, i)
		}
	}
	return moved
}

// wait blocks until a partition moves (true), or d passes or ctx ends.
func (fl *fetchFill) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-fl.w.C():
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// reread reads again the partitions of moved (positions in the plan, any
// order, each once: Waiter.Take lists a tag once), replacing their
// previous answers. A partition not read by this fetch (an error, or a
// registration left from an earlier fetch of the session) is skipped.
func (fl *fetchFill) reread(moved []int) {
	for _, i := range moved {
		if fl.logs[i] == nil {
			continue
		}
		fp := fl.slot(i)
		if fp.read != nil {
			fp.read.Release()
		}
		fl.fr.bytes -= fp.size
		fl.remaining += fp.size
		fl.fr.readableBytes -= fp.readable
		if fp.olderSegment {
			fl.fr.olderSegments--
		}
		*fp = fetchPart{partition: fp.partition, hw: -1, lso: -1, logStart: -1, session: fp.session}
		fl.read(i)
	}
}

// unwait removes a sessionless fetch's waiter from every partition it was
// added to (a session's stays: release).
func (fl *fetchFill) unwait() {
	if fl.w == nil || fl.session != nil {
		return
	}
	for _, p := range fl.logs {
		if p != nil {
			p.RemoveWaiter(fl.w)
		}
	}
}

// readPartition fills one partition's answer.
func (s *Server) readPartition(p *broker.Partition, rp *sessionPart, fr *fetchReply, fp *fetchPart, remaining *int64) {
	limit := min(int64(rp.maxBytes), *remaining)
	minOne := fr.version >= 3 && fr.bytes == 0
	if limit <= 0 && !minOne {
		fp.setOffsets(p, fr.readCommitted)
		return
	}
	read := p.Read
	if fr.readCommitted {
		read = p.ReadCommitted
	}
	res, err := read(rp.offset, max(limit, 0), minOne)
	if err != nil {
		fp.errorCode = errCode(err)
		fp.setOffsets(p, fr.readCommitted)
		if fp.errorCode == kerr.UnknownServerError.Code {
			s.logger.Warn("fetch read failed", "topic", p.Topic, "partition", p.Index, "offset", rp.offset, "err", err)
		}
		fr.hasError = true
		return
	}
	fp.hw, fp.lso, fp.logStart = res.HighWatermark, min(res.LastStableOffset, res.HighWatermark), res.LogStartOffset
	fp.olderSegment, fp.readable = res.OlderSegment, min(res.Readable, int64(rp.maxBytes))
	fr.readableBytes += fp.readable
	if fp.olderSegment {
		fr.olderSegments++
	}
	if len(res.Chunks) > 0 {
		// Kept only when it holds chunks to release: most partitions of a
		// many-partition session have nothing new, and a heap copy per
		// partition per fetch was one allocation each (issue 18).
		held := res
		fp.read = &held
	}
	fp.chunks = res.Chunks
	for _, c := range res.Chunks {
		fp.size += c.Len
	}
	if fr.readCommitted {
		// The aborted transactions the returned batches may hold (Kafka
		// bounds the range by the fetched bytes; up to the LSO is a
		// superset clients filter by offset). Never nil: an empty list.
		fp.aborted = p.AbortedTransactions(rp.offset, fp.lso)
		if fp.aborted == nil {
			fp.aborted = []broker.AbortedTxn{}
		}
	}
	fr.bytes += fp.size
	*remaining -= fp.size
}

// setOffsets fills the high watermark, last stable offset and log start
// offset of an answer without records; the last stable offset never
// exceeds the high watermark.
func (fp *fetchPart) setOffsets(p *broker.Partition, readCommitted bool) {
	hw := p.HighWatermark()
	fp.hw, fp.lso, fp.logStart = hw, min(p.LastStableOffset(), hw), p.LogStartOffset()
	if readCommitted {
		fp.aborted = []broker.AbortedTxn{}
	}
}

// fetchReply is a Fetch response whose record bytes stay in segment files
// until written (see writeFetch).
type fetchReply struct {
	version       int16
	readCommitted bool // isolation level READ_COMMITTED
	errorCode     int16
	sessionID     int32
	newSession    bool  // a full fetch that opened its session
	throttleMs    int32 // throttle_time_ms (client quotas)
	// readable reports whether the principal may read a topic (nil: no
	// authorizer; security.go fetchAuth).
	readable func(topic string) bool
	// topicID names a topic by id in v13+ answers (KIP-516).
	topicID func(name string) [16]byte
	topics  []fetchTopic
	bytes   int64
	// readableBytes sums the partitions' readable bytes (each at most
	// its partition max bytes) and olderSegments counts the partitions
	// read from a segment older than their high watermark's: Kafka's
	// DelayedFetch measures a waiting fetch by these (satisfied).
	readableBytes int64
	olderSegments int
	hasError      bool
	// redirected: a partition names a preferred read replica, answered
	// at once.
	redirected bool
}

// satisfied reports whether a consumer's fetch is answered now rather than
// waiting for more records. The bytes read (min bytes, capped by max bytes,
// since a reply never exceeds it) is Kafka's first test in
// ReplicaManager.fetchMessages; DelayedFetch.tryComplete then answers at
// once when a partition is read from a segment older than the one holding
// its high watermark ("fetching older segments"), or when the bytes
// readable up to the high watermarks, each capped by its partition max
// bytes, reach min bytes, whatever whole batches fit in the reply.
func (fr *fetchReply) satisfied(minBytes, maxBytes int64) bool {
	return fr.bytes >= min(minBytes, maxBytes) || fr.olderSegments > 0 || fr.readableBytes >= minBytes
}

type fetchTopic struct {
	name string
	// id is the topic's id written by v13+ answers when hasID (an unknown
	// id answered UNKNOWN_TOPIC_ID); otherwise fetchReply.topicID(name).
	id    [16]byte
	hasID bool
	parts []fetchPart
}

type fetchPart struct {
	partition         int32
	errorCode         int16
	hw, lso, logStart int64
	chunks            []broker.Chunk
	size              int64
	read              *broker.ReadResult
	session           *sessionPart
	// aborted lists the aborted transactions for READ_COMMITTED answers
	// (nil: the null array of READ_UNCOMMITTED).
	aborted []broker.AbortedTxn
	// diverging is set in an answer to a follower whose last fetched
	// epoch ends earlier on this leader (Fetch v12+).
	diverging *replica.EpochEnd
	// leader is the current leader and epoch of a NOT_LEADER_OR_FOLLOWER
	// answer (Fetch v12+ CurrentLeader, KIP-951).
	leader *[2]int32
	// durableEnd, when set, is a follower's fsynced end as the leader
	// recorded it, echoed with replica.DurableEndTag (Strata to Strata).
	durableEnd *int64
	// preferred is the replica the consumer should fetch from (v11+
	// preferred_read_replica, KIP-392); nil: -1.
	preferred *int32
	// olderSegment and readable: the read's storage.ReadResult fields,
	// readable capped by the partition max bytes (fetchReply.satisfied).
	olderSegment bool
	readable     int64
}

// release releases every chunk held by the reply.
func (fr *fetchReply) release() {
	for i := range fr.topics {
		for j := range fr.topics[i].parts {
			p := &fr.topics[i].parts[j]
			if p.read != nil {
				p.read.Release()
				p.read = nil
			}
		}
	}
}
