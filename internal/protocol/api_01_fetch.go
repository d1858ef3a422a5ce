package protocol

import (
	"context"
	"reflect"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleFetch (key 1, v4-12) reads whole batches up to the high watermark
// with Kafka's limits (max bytes, partition max bytes, KIP-74 first batch
// always whole) and long-polls until min bytes are available or max wait
// passes. Fetch sessions (KIP-227) are declined: every response is a full
// sessionless response (session id 0), which all clients handle; an
// unknown session id is FETCH_SESSION_ID_NOT_FOUND.
func (s *Server) handleFetch(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.FetchRequest)
	fr := &fetchReply{version: req.Version}
	if req.Version >= 7 && req.SessionID != 0 {
		fr.errorCode = kerr.FetchSessionIDNotFound.Code
		return reply{fetch: fr}, nil
	}
	maxBytes := int64(req.MaxBytes)
	if req.Version < 3 || maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	for {
		waits := s.fetchOnce(req, fr, maxBytes)
		if fr.bytes >= int64(req.MinBytes) || fr.hasError || req.MaxWaitMillis <= 0 || len(waits) == 0 {
			break
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || !waitAny(ctx, waits, remaining) {
			break
		}
		// New data arrived: read again from scratch.
		fr.release()
		*fr = fetchReply{version: req.Version}
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

// fetchOnce reads every requested partition once into fr and returns the
// channels that signal new data for the partitions read.
func (s *Server) fetchOnce(req *kmsg.FetchRequest, fr *fetchReply, maxBytes int64) []<-chan struct{} {
	var waits []<-chan struct{}
	remaining := maxBytes
	for _, rt := range req.Topics {
		ft := fetchTopic{name: rt.Topic}
		for _, rp := range rt.Partitions {
			fp := fetchPart{partition: rp.Partition, hw: -1, lso: -1, logStart: -1}
			p, err := s.b.Partition(rt.Topic, rp.Partition)
			if err == nil {
				err = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
			}
			if err != nil {
				fp.errorCode = errCode(err)
				fr.hasError = true
				ft.parts = append(ft.parts, fp)
				continue
			}
			// Take the change signal before reading so no append is missed.
			waits = append(waits, p.Log.HighWatermarkChanged())
			s.readPartition(p, rp, fr, &fp, &remaining)
			ft.parts = append(ft.parts, fp)
		}
		fr.topics = append(fr.topics, ft)
	}
	return waits
}

// readPartition fills one partition's answer.
func (s *Server) readPartition(p *broker.Partition, rp kmsg.FetchRequestTopicPartition, fr *fetchReply, fp *fetchPart, remaining *int64) {
	limit := min(int64(rp.PartitionMaxBytes), *remaining)
	minOne := fr.version >= 3 && fr.bytes == 0
	if limit <= 0 && !minOne {
		fp.hw, fp.lso, fp.logStart = p.Log.HighWatermark(), p.Log.HighWatermark(), p.Log.LogStartOffset()
		return
	}
	res, err := p.Read(rp.FetchOffset, max(limit, 0), minOne)
	if err != nil {
		fp.errorCode = errCode(err)
		fp.hw, fp.lso, fp.logStart = p.Log.HighWatermark(), p.Log.HighWatermark(), p.Log.LogStartOffset()
		if fp.errorCode == kerr.UnknownServerError.Code {
			s.logger.Warn("fetch read failed", "topic", p.Topic, "partition", p.Index, "offset", rp.FetchOffset, "err", err)
		}
		fr.hasError = true
		return
	}
	fp.hw, fp.lso, fp.logStart = res.HighWatermark, res.HighWatermark, res.LogStartOffset
	fp.read = &res
	fp.chunks = res.Chunks
	for _, c := range res.Chunks {
		fp.size += c.Len
	}
	fr.bytes += fp.size
	*remaining -= fp.size
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
	version   int16
	errorCode int16
	topics    []fetchTopic
	bytes     int64
	hasError  bool
}

type fetchTopic struct {
	name  string
	parts []fetchPart
}

type fetchPart struct {
	partition         int32
	errorCode         int16
	hw, lso, logStart int64
	chunks            []storage.Chunk
	size              int64
	read              *storage.ReadResult
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
