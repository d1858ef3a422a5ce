package protocol

import (
	"fmt"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227): a consumer's full fetch can open a session; its
// following fetches only name partitions whose position changed, and the
// answers only carry partitions with news (records, a moved high
// watermark or log start offset, an error).

const (
	maxFetchSessions = 1000            // max.incremental.fetch.session.cache.slots
	fetchSessionIdle = 2 * time.Minute // an unused session is evicted after this
	// fetchSessionSweep is how often idle sessions are looked for (the
	// sweep walks every session under the cache lock, so not per fetch);
	// a full cache is always swept before a new session is refused.
	fetchSessionSweep  = time.Second
	finalEpoch         = -1
	initialEpoch       = 0
	sessionlessSession = 0
)

// sessionPart is one partition of a session.
type sessionPart struct {
	topic     string
	partition int32
	offset    int64
	maxBytes  int32
	epoch     int32 // current leader epoch the client sent
	// last values sent to the client (to decide what changed)
	hw, lso, logStart int64
	sent              bool
	// quiet is the partition this broker led when the session's last
	// answer found nothing to read at offset (high watermark <= offset,
	// no error); nil otherwise. See fetchFill.unchanged.
	quiet *broker.Partition
}

type partKey struct {
	topic     string
	partition int32
}

// fetchSession is one open session.
type fetchSession struct {
	id       int32
	epoch    int32 // the epoch the next request must carry
	parts    map[partKey]*sessionPart
	order    []partKey // stable response order
	lastUsed time.Time
	// usesIDs: opened by a v13+ fetch (topic ids, KIP-516); its
	// incremental fetches must use ids too.
	usesIDs bool
	// view is the cluster metadata the last fetch was answered with: the
	// quiet marks of its partitions hold only while it is current.
	view *meta.View
	// listed is parts in order (nil: to be rebuilt after a change);
	// where and logs are the running fetch's buffers (newFetchFill).
	listed []*sessionPart
	where  []fetchSlot
	logs   []*broker.Partition
}

// fetchSessions is the broker's session cache.
type fetchSessions struct {
	mu    sync.Mutex
	next  int32
	byID  map[int32]*fetchSession
	inUse map[int32]bool // sessions a fetch is currently running on
	nowFn func() time.Time
	swept time.Time // last idle sweep
}

func newFetchSessions() *fetchSessions {
	return &fetchSessions{next: 1, byID: map[int32]*fetchSession{}, inUse: map[int32]bool{}, nowFn: time.Now}
}

// fetchPlan is what one Fetch request reads.
type fetchPlan struct {
	parts       []*sessionPart
	session     *fetchSession // nil = sessionless
	incremental bool
	errorCode   int16
}

// plan resolves a request against the session cache.
func (fs *fetchSessions) plan(req *kmsg.FetchRequest) fetchPlan {
	full := func() []*sessionPart {
		var out []*sessionPart
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				out = append(out, &sessionPart{topic: t.Topic, partition: p.Partition, offset: p.FetchOffset,
					maxBytes: p.PartitionMaxBytes, epoch: p.CurrentLeaderEpoch, hw: -1, logStart: -1})
			}
		}
		return out
	}
	if req.Version < 7 {
		return fetchPlan{parts: full()}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.evictLocked()
	switch {
	case req.SessionEpoch == finalEpoch:
		if req.SessionID != sessionlessSession {
			fs.closeLocked(req.SessionID)
		}
		return fetchPlan{parts: full()}
	case req.SessionEpoch == initialEpoch:
		if req.SessionID != sessionlessSession {
			fs.closeLocked(req.SessionID)
		}
		parts := full()
		if len(fs.byID) >= maxFetchSessions || len(parts) == 0 {
			return fetchPlan{parts: parts} // no room: sessionless answer
		}
		s := &fetchSession{id: fs.newIDLocked(), epoch: 1, parts: map[partKey]*sessionPart{}, lastUsed: fs.nowFn(), usesIDs: req.Version >= 13}
		for _, p := range parts {
			k := partKey{p.topic, p.partition}
			if _, dup := s.parts[k]; !dup {
				s.order = append(s.order, k)
			}
			s.parts[k] = p
		}
		fs.byID[s.id] = s
		fs.inUse[s.id] = true
		return fetchPlan{parts: s.list(), session: s}
	}
	s := fs.byID[req.SessionID]
	if req.SessionID == sessionlessSession || s == nil {
		return fetchPlan{errorCode: kerr.FetchSessionIDNotFound.Code}
	}
	if req.SessionEpoch != s.epoch || fs.inUse[s.id] {
		return fetchPlan{errorCode: kerr.InvalidFetchSessionEpoch.Code}
	}
	if s.usesIDs != (req.Version >= 13) {
		// A session opened with topic ids continued without them, or the
		// reverse (Kafka's FetchManager.newContext, KIP-516).
		return fetchPlan{errorCode: kerr.FetchSessionTopicIDError.Code}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := partKey{t.Topic, p.Partition}
			sp, ok := s.parts[k]
			if !ok {
				sp = &sessionPart{topic: t.Topic, partition: p.Partition, hw: -1, logStart: -1}
				s.parts[k] = sp
				s.order = append(s.order, k)
				s.listed = nil
			}
			sp.offset, sp.maxBytes, sp.epoch = p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch
			sp.sent = false // the client changed it: answer it at least once
		}
	}
	forgot := false
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := partKey{ft.Topic, p}
			if _, ok := s.parts[k]; ok {
				delete(s.parts, k)
				forgot = true
			}
		}
	}
	if forgot {
		kept := s.order[:0]
		for _, k := range s.order {
			if _, ok := s.parts[k]; ok {
				kept = append(kept, k)
			}
		}
		s.order = kept
		s.listed = nil
	}
	s.epoch = nextEpoch(s.epoch)
	s.lastUsed = fs.nowFn()
	fs.inUse[s.id] = true
	return fetchPlan{parts: s.list(), session: s, incremental: true}
}

// done releases a session after its fetch was answered.
func (fs *fetchSessions) done(p fetchPlan) {
	if p.session == nil {
		return
	}
	fs.mu.Lock()
	delete(fs.inUse, p.session.id)
	p.session.lastUsed = fs.nowFn()
	fs.mu.Unlock()
}

// list returns the session's partitions in order, rebuilt only after the
// set changed (a lookup each of 1,000 partitions per fetch otherwise).
// Only the fetch running on the session uses it.
func (s *fetchSession) list() []*sessionPart {
	if s.listed == nil {
		s.listed = make([]*sessionPart, 0, len(s.order))
		for _, k := range s.order {
			s.listed = append(s.listed, s.parts[k])
		}
	}
	return s.listed
}

func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

func (fs *fetchSessions) newIDLocked() int32 {
	for {
		id := fs.next
		fs.next++
		if fs.next <= 0 {
			fs.next = 1
		}
		if _, taken := fs.byID[id]; !taken {
			return id
		}
	}
}

func (fs *fetchSessions) closeLocked(id int32) {
	delete(fs.byID, id)
	delete(fs.inUse, id)
}

// evictLocked drops sessions idle for longer than fetchSessionIdle, at
// most once per fetchSessionSweep unless the cache is full.
func (fs *fetchSessions) evictLocked() {
	now := fs.nowFn()
	if now.Sub(fs.swept) < fetchSessionSweep && len(fs.byID) < maxFetchSessions {
		return
	}
	fs.swept = now
	for id, s := range fs.byID {
		if !fs.inUse[id] && now.Sub(s.lastUsed) > fetchSessionIdle {
			delete(fs.byID, id)
		}
	}
}

// String describes a session (logs).
func (s *fetchSession) String() string {
	return fmt.Sprintf("fetch session %d epoch %d (%d partitions)", s.id, s.epoch, len(s.parts))
}
