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
	// tag names the partition to its fetch's waiter: for a session, its
	// slot in fetchSession.byTag (stable while it is in the session);
	// sessionless, its position in the request. idx is its position in
	// the session's list (fetchSession.list).
	tag, idx int
	// reg is the partition the session's waiter is added to for it (nil:
	// none); only the fetch running on the session changes it.
	reg *broker.Partition
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
	// w is the session's one waiter, added to each of its partitions
	// once (fetchFill.setLog) and left there between fetches: a long
	// poll on the session costs no registration per partition (issue
	// 18). It is removed from a partition the session forgets (dropped,
	// by the fetch that forgot it) and from all of them when the session is
	// closed or evicted (release). byTag maps its tags to the session's
	// partitions (nil: a free tag, listed in freeTags).
	w        *broker.Waiter
	byTag    []*sessionPart
	freeTags []int
	dropped  []*broker.Partition
	// running: a fetch is running on the session; closed: the session
	// left the cache while one was, and that fetch releases it (done).
	running, closed bool
}

// fetchSessions is the broker's session cache.
type fetchSessions struct {
	mu    sync.Mutex
	next  int32
	byID  map[int32]*fetchSession
	nowFn func() time.Time
	swept time.Time // last idle sweep
}

func newFetchSessions() *fetchSessions {
	return &fetchSessions{next: 1, byID: map[int32]*fetchSession{}, nowFn: time.Now}
}

// fetchPlan is what one Fetch request reads.
type fetchPlan struct {
	parts       []*sessionPart
	session     *fetchSession // nil = sessionless
	incremental bool
	errorCode   int16
}

// plan resolves a request against the session cache. Sessions it closes
// or evicts are released (their waiter removed from their partitions)
// after the cache lock is let go.
func (fs *fetchSessions) plan(req *kmsg.FetchRequest) fetchPlan {
	var gone []*fetchSession
	defer func() {
		for _, s := range gone {
			s.release()
		}
	}()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.planLocked(req, &gone)
}

// fullParts is a full fetch's partitions in request order, tagged by
// position, from one allocation (sessionless fetches are answered without
// a cost per partition in allocations).
func fullParts(req *kmsg.FetchRequest) []*sessionPart {
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	all := make([]sessionPart, n)
	out := make([]*sessionPart, 0, n)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			sp := &all[len(out)]
			*sp = sessionPart{topic: t.Topic, partition: p.Partition, offset: p.FetchOffset,
				maxBytes: p.PartitionMaxBytes, epoch: p.CurrentLeaderEpoch, hw: -1, logStart: -1, tag: len(out), idx: len(out)}
			out = append(out, sp)
		}
	}
	return out
}

// planLocked is plan under fs.mu; the sessions to release are added to
// gone.
func (fs *fetchSessions) planLocked(req *kmsg.FetchRequest, gone *[]*fetchSession) fetchPlan {
	if req.Version < 7 {
		return fetchPlan{parts: fullParts(req)}
	}
	*gone = fs.evictLocked(*gone)
	switch {
	case req.SessionEpoch == finalEpoch:
		if req.SessionID != sessionlessSession {
			*gone = fs.closeLocked(req.SessionID, *gone)
		}
		return fetchPlan{parts: fullParts(req)}
	case req.SessionEpoch == initialEpoch:
		if req.SessionID != sessionlessSession {
			*gone = fs.closeLocked(req.SessionID, *gone)
		}
		parts := fullParts(req)
		if len(fs.byID) >= maxFetchSessions || len(parts) == 0 {
			return fetchPlan{parts: parts} // no room: sessionless answer
		}
		s := &fetchSession{id: fs.newIDLocked(), epoch: 1, parts: map[partKey]*sessionPart{}, lastUsed: fs.nowFn(),
			usesIDs: req.Version >= 13, w: broker.NewWaiter(), running: true}
		for _, p := range parts {
			k := partKey{p.topic, p.partition}
			if old, dup := s.parts[k]; dup {
				// Named twice: the last one counts, in the first one's place.
				p.tag = old.tag
			} else {
				s.order = append(s.order, k)
				p.tag = len(s.byTag)
				s.byTag = append(s.byTag, nil)
			}
			s.byTag[p.tag] = p
			s.parts[k] = p
		}
		fs.byID[s.id] = s
		return fetchPlan{parts: s.list(), session: s}
	}
	s := fs.byID[req.SessionID]
	if req.SessionID == sessionlessSession || s == nil {
		return fetchPlan{errorCode: kerr.FetchSessionIDNotFound.Code}
	}
	if req.SessionEpoch != s.epoch || s.running {
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
				sp = &sessionPart{topic: t.Topic, partition: p.Partition, hw: -1, logStart: -1, tag: s.newTag()}
				s.byTag[sp.tag] = sp
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
			if sp, ok := s.parts[k]; ok {
				delete(s.parts, k)
				s.forget(sp)
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
	s.running = true
	return fetchPlan{parts: s.list(), session: s, incremental: true}
}

// done ends a fetch on its session; a session closed meanwhile is
// released.
func (fs *fetchSessions) done(p fetchPlan) {
	s := p.session
	if s == nil {
		return
	}
	fs.mu.Lock()
	s.running = false
	s.lastUsed = fs.nowFn()
	closed := s.closed
	fs.mu.Unlock()
	if closed {
		s.release()
	}
}

// newTag returns a free tag of the session's waiter.
func (s *fetchSession) newTag() int {
	if n := len(s.freeTags); n > 0 {
		tag := s.freeTags[n-1]
		s.freeTags = s.freeTags[:n-1]
		return tag
	}
	s.byTag = append(s.byTag, nil)
	return len(s.byTag) - 1
}

// forget frees the tag of a partition the session no longer has and
// leaves its waiter's removal to the running fetch (unregisterDropped),
// outside the cache lock. A wake-up already listed under the tag is
// ignored (byTag nil) or, once the tag is reused, costs one read.
func (s *fetchSession) forget(sp *sessionPart) {
	s.byTag[sp.tag] = nil
	s.freeTags = append(s.freeTags, sp.tag)
	if sp.reg != nil {
		s.dropped = append(s.dropped, sp.reg)
		sp.reg = nil
	}
}

// unregisterDropped removes the session's waiter from the partitions it
// forgot (by the fetch running on it).
func (s *fetchSession) unregisterDropped() {
	for i, p := range s.dropped {
		p.RemoveWaiter(s.w)
		s.dropped[i] = nil
	}
	s.dropped = s.dropped[:0]
}

// release removes the session's waiter from every partition it was added
// to: the session left the cache and no fetch runs on it.
func (s *fetchSession) release() {
	s.unregisterDropped()
	for _, sp := range s.parts {
		if sp.reg != nil {
			sp.reg.RemoveWaiter(s.w)
			sp.reg = nil
		}
	}
}

// moved appends to dst the list positions of the session's partitions
// whose tags are in tags (tags of forgotten partitions are skipped).
func (s *fetchSession) moved(dst, tags []int) []int {
	for _, tag := range tags {
		if tag < len(s.byTag) {
			if sp := s.byTag[tag]; sp != nil {
				dst = append(dst, sp.idx)
			}
		}
	}
	return dst
}

// list returns the session's partitions in order, rebuilt only after the
// set changed (a lookup each of 1,000 partitions per fetch otherwise).
// Only the fetch running on the session uses it.
func (s *fetchSession) list() []*sessionPart {
	if s.listed == nil {
		s.listed = make([]*sessionPart, 0, len(s.order))
		for i, k := range s.order {
			sp := s.parts[k]
			sp.idx = i
			s.listed = append(s.listed, sp)
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

// closeLocked removes session id from the cache and appends it to gone
// to be released, unless a fetch runs on it: that fetch releases it
// (done).
func (fs *fetchSessions) closeLocked(id int32, gone []*fetchSession) []*fetchSession {
	s := fs.byID[id]
	if s == nil {
		return gone
	}
	delete(fs.byID, id)
	if s.running {
		s.closed = true
		return gone
	}
	return append(gone, s)
}

// evictLocked drops sessions idle for longer than fetchSessionIdle, at
// most once per fetchSessionSweep unless the cache is full, and appends
// them to gone to be released.
func (fs *fetchSessions) evictLocked(gone []*fetchSession) []*fetchSession {
	now := fs.nowFn()
	if now.Sub(fs.swept) < fetchSessionSweep && len(fs.byID) < maxFetchSessions {
		return gone
	}
	fs.swept = now
	for id, s := range fs.byID {
		if !s.running && now.Sub(s.lastUsed) > fetchSessionIdle {
			delete(fs.byID, id)
			gone = append(gone, s)
		}
	}
	return gone
}

// String describes a session (logs).
func (s *fetchSession) String() string {
	return fmt.Sprintf("fetch session %d epoch %d (%d partitions)", s.id, s.epoch, len(s.parts))
}
