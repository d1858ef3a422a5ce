package protocol

import (
	"context"
	"reflect"
	"time"

	"github.com/strata-io/strata/internal/broker"
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
func (s *Server) handleFetch(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.FetchRequest)
	if req.ReplicaID >= 0 {
		return s.handleReplicaFetch(ctx, req)
	}
	plan := s.sessions.plan(req)
	defer s.sessions.done(plan)
	readCommitted := req.IsolationLevel == 1
	fr := &fetchReply{version: req.Version, errorCode: plan.errorCode, readCommitted: readCommitted}
	if plan.session != nil {
		fr.sessionID = plan.session.id
	}
	if plan.errorCode != 0 {
		return reply{fetch: fr}, nil
	}
	maxBytes := int64(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	for {
		waits := s.fetchOnce(plan.parts, fr, maxBytes)
		if fr.bytes >= int64(req.MinBytes) || fr.hasError || req.MaxWaitMillis <= 0 || len(waits) == 0 {
			break
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || !waitAny(ctx, waits, remaining) {
			break
		}
		// New data arrived: read again from scratch.
		fr.release()
		*fr = fetchReply{version: req.Version, sessionID: fr.sessionID, readCommitted: readCommitted}
	}
	if plan.session != nil {
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
			news := !incremental || p.size > 0 || p.errorCode != 0 || !sp.sent || sp.hw != p.hw || sp.lso != p.lso || sp.logStart != p.logStart
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

// fetchOnce reads every planned partition once into fr and returns the
// channels that signal new data for the partitions read.
func (s *Server) fetchOnce(parts []*sessionPart, fr *fetchReply, maxBytes int64) []<-chan struct{} {
	var waits []<-chan struct{}
	remaining := maxBytes
	for _, sp := range parts {
		if n := len(fr.topics); n == 0 || fr.topics[n-1].name != sp.topic {
			fr.topics = append(fr.topics, fetchTopic{name: sp.topic})
		}
		ft := &fr.topics[len(fr.topics)-1]
		fp := fetchPart{partition: sp.partition, hw: -1, lso: -1, logStart: -1, session: sp}
		p, err := s.b.Partition(sp.topic, sp.partition)
		if err == nil {
			err = checkLeaderEpoch(p, sp.epoch)
		}
		if err != nil {
			fp.errorCode = errCode(err)
			fr.hasError = true
			ft.parts = append(ft.parts, fp)
			continue
		}
		// Take the change signal before reading so no append is missed.
		waits = append(waits, p.HighWatermarkChanged())
		s.readPartition(p, sp, fr, &fp, &remaining)
		ft.parts = append(ft.parts, fp)
	}
	return waits
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
	fp.read = &res
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

// waitAny blocks until one channel is closed (true), or d passes or ctx
// ends (false).
func waitAny(ctx context.Context, chans []<-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	i, _, _ := reflect.Select(cases)
	return i >= 2
}

// fetchReply is a Fetch response whose record bytes stay in segment files
// until written (see writeFetch).
type fetchReply struct {
	version       int16
	readCommitted bool // isolation level READ_COMMITTED
	errorCode     int16
	sessionID     int32
	topics        []fetchTopic
	bytes         int64
	hasError      bool
}

type fetchTopic struct {
	name  string
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
