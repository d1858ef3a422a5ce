package protocol

import (
	"context"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// longPollRig is a broker with topics "t" (3 partitions) and "u" (1), each
// partition holding one record, and a protocol server whose long polls
// run fetchWaits' action once they are about to block.
type longPollRig struct {
	t     *testing.T
	br    *broker.Broker
	srv   *Server
	parts map[string][]*broker.Partition
}

func newLongPollRig(t *testing.T) *longPollRig {
	br := openTestBroker(t, map[string]string{"strata.durable.acks": "false"}, "t", 3)
	if _, err := br.CreateTopic(broker.CreateTopicRequest{Name: "u", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	r := &longPollRig{t: t, br: br, srv: newTestServer(t, br), parts: map[string][]*broker.Partition{}}
	for name, n := range map[string]int32{"t": 3, "u": 1} {
		for i := range n {
			p, err := br.Partition(name, i)
			if err != nil {
				t.Fatal(err)
			}
			r.parts[name] = append(r.parts[name], p)
			r.append(p)
		}
	}
	return r
}

func (r *longPollRig) append(p *broker.Partition) {
	r.t.Helper()
	if err := appendValue(p, []byte("v"), 1); err != nil {
		r.t.Fatal(err)
	}
}

// fetchReq is one Fetch request: named partitions "topic" -> partition ->
// fetch offset, forgotten partitions, and the max wait.
type fetchReq struct {
	id, epoch int32
	named     map[string]map[int32]int64
	forgotten map[string][]int32
	maxWait   int32
}

// fetch sends req; during its long poll, once it is about to block, the
// fetch runs onWait (once). It returns the partitions answered by
// "topic/partition" and the session id.
func (r *longPollRig) fetch(req fetchReq, onWait func()) (map[string]fetchPart, int32) {
	r.t.Helper()
	kr := kmsg.NewPtrFetchRequest()
	kr.Version = 12
	kr.MaxBytes, kr.MinBytes, kr.MaxWaitMillis = 1<<20, 1, req.maxWait
	kr.SessionID, kr.SessionEpoch = req.id, req.epoch
	for _, name := range []string{"t", "u"} {
		ps, ok := req.named[name]
		if !ok {
			continue
		}
		tp := kmsg.NewFetchRequestTopic()
		tp.Topic = name
		for i := range int32(3) {
			if off, ok := ps[i]; ok {
				p := kmsg.NewFetchRequestTopicPartition()
				p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch = i, off, 1<<20, -1
				tp.Partitions = append(tp.Partitions, p)
			}
		}
		kr.Topics = append(kr.Topics, tp)
	}
	for name, ps := range req.forgotten {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = name, ps
		kr.ForgottenTopics = append(kr.ForgottenTopics, ft)
	}
	waited := false
	r.srv.fetchWaits = func() {
		if !waited && onWait != nil {
			waited = true
			onWait()
		}
	}
	defer func() { r.srv.fetchWaits = nil }()
	rep, err := r.srv.handleFetch(context.Background(), nil, kr)
	if err != nil {
		r.t.Fatal(err)
	}
	fr := rep.fetch
	defer fr.release()
	if fr.errorCode != 0 {
		r.t.Fatalf("fetch: error %d", fr.errorCode)
	}
	if onWait != nil && !waited {
		r.t.Fatal("the fetch did not long-poll")
	}
	out := map[string]fetchPart{}
	for _, ft := range fr.topics {
		for _, fp := range ft.parts {
			out[ft.name+"/"+string(rune('0'+fp.partition))] = fp
		}
	}
	return out, fr.sessionID
}

// waiters is how many waiters each partition of "t" then "u" holds.
func (r *longPollRig) waiters() []int {
	var n []int
	for _, name := range []string{"t", "u"} {
		for _, p := range r.parts[name] {
			n = append(n, p.Log.Waiters())
		}
	}
	return n
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// long is a max wait no test waits out: a lost wake-up shows as an
// answer without the records (after it), never as a slow pass.
const long = 60_000

// TestFetchSessionWaiterAddedPartition: a partition an incremental fetch
// adds to its session wakes that fetch's long poll and the session's next
// ones, with the session's one waiter added to it once (issue 18).
func TestFetchSessionWaiterAddedPartition(t *testing.T) {
	r := newLongPollRig(t)
	got, id := r.fetch(fetchReq{epoch: 0, named: map[string]map[int32]int64{"t": {0: 0, 1: 0}}}, nil)
	if len(got) != 2 || id == 0 {
		t.Fatalf("full fetch: %d partitions, session %d", len(got), id)
	}
	if w := r.waiters(); !equalInts(w, []int{1, 1, 0, 0}) {
		t.Fatalf("waiters after the full fetch: %v, want [1 1 0 0]", w)
	}
	// Add t-2 at its end (nothing to read): the poll waits, the append
	// to t-2 answers it.
	tp := r.parts["t"]
	got, _ = r.fetch(fetchReq{id: id, epoch: 1, named: map[string]map[int32]int64{"t": {0: 1, 1: 1, 2: 1}}, maxWait: long},
		func() { r.append(tp[2]) })
	if fp, ok := got["t/2"]; !ok || fp.size == 0 || fp.hw != 2 {
		t.Fatalf("long poll on the added partition: answered %+v, want t-2 with its record", got)
	}
	// The next long poll, which names nothing, wakes on t-2 too.
	got, _ = r.fetch(fetchReq{id: id, epoch: 2, named: map[string]map[int32]int64{"t": {2: 2}}, maxWait: long},
		func() { r.append(tp[2]) })
	if fp, ok := got["t/2"]; !ok || fp.size == 0 || fp.hw != 3 || len(got) != 1 {
		t.Fatalf("second long poll: answered %+v, want only t-2 with its record", got)
	}
	if w := r.waiters(); !equalInts(w, []int{1, 1, 1, 0}) {
		t.Fatalf("waiters: %v, want [1 1 1 0] (one per partition of the session)", w)
	}
}

// TestFetchSessionWaiterForgottenPartition: a partition the session
// forgets loses the session's waiter, and a record appended to it does
// not answer the session's long poll.
func TestFetchSessionWaiterForgottenPartition(t *testing.T) {
	r := newLongPollRig(t)
	_, id := r.fetch(fetchReq{named: map[string]map[int32]int64{"t": {0: 1, 1: 1, 2: 1}}}, nil)
	if w := r.waiters(); !equalInts(w, []int{1, 1, 1, 0}) {
		t.Fatalf("waiters after the full fetch: %v, want [1 1 1 0]", w)
	}
	tp := r.parts["t"]
	got, _ := r.fetch(fetchReq{id: id, epoch: 1, forgotten: map[string][]int32{"t": {1}}, maxWait: long},
		func() {
			if w := r.waiters(); !equalInts(w, []int{1, 0, 1, 0}) {
				t.Errorf("waiters while polling: %v, want [1 0 1 0]", w)
			}
			r.append(tp[1])
			r.append(tp[0])
		})
	if fp, ok := got["t/0"]; !ok || fp.size == 0 || len(got) != 1 {
		t.Fatalf("answered %+v, want only t-0 with its record", got)
	}
}

// TestFetchSessionWaiterReleased: a session's waiter leaves all its
// partitions when the session ends: evicted idle, closed by a fetch with
// epoch -1, replaced by a new full fetch, or closed while a fetch runs
// on it (then by that fetch, once answered). None is left behind.
func TestFetchSessionWaiterReleased(t *testing.T) {
	all := map[string]map[int32]int64{"t": {0: 1, 1: 1, 2: 1}, "u": {0: 1}}
	none := []int{0, 0, 0, 0}
	open := func(r *longPollRig) int32 {
		t.Helper()
		_, id := r.fetch(fetchReq{named: all}, nil)
		if w := r.waiters(); !equalInts(w, []int{1, 1, 1, 1}) {
			t.Fatalf("waiters of an open session: %v, want [1 1 1 1]", w)
		}
		return id
	}
	t.Run("evicted", func(t *testing.T) {
		r := newLongPollRig(t)
		open(r)
		later := time.Now().Add(fetchSessionIdle + time.Minute)
		r.srv.sessions.nowFn = func() time.Time { return later }
		r.fetch(fetchReq{epoch: -1, named: map[string]map[int32]int64{"u": {0: 1}}}, nil) // sweeps
		if n := len(r.srv.sessions.byID); n != 0 {
			t.Fatalf("%d sessions left", n)
		}
		if w := r.waiters(); !equalInts(w, none) {
			t.Fatalf("waiters after eviction: %v, want none", w)
		}
	})
	t.Run("closed", func(t *testing.T) {
		r := newLongPollRig(t)
		id := open(r)
		r.fetch(fetchReq{id: id, epoch: -1, named: all}, nil)
		if w := r.waiters(); !equalInts(w, none) {
			t.Fatalf("waiters after close: %v, want none", w)
		}
	})
	t.Run("replaced", func(t *testing.T) {
		r := newLongPollRig(t)
		id := open(r)
		_, id2 := r.fetch(fetchReq{id: id, epoch: 0, named: map[string]map[int32]int64{"u": {0: 1}}}, nil)
		if id2 == 0 || id2 == id {
			t.Fatalf("new session %d (old %d)", id2, id)
		}
		if w := r.waiters(); !equalInts(w, []int{0, 0, 0, 1}) {
			t.Fatalf("waiters after a new session over u-0: %v, want [0 0 0 1]", w)
		}
	})
	t.Run("closed while polling", func(t *testing.T) {
		r := newLongPollRig(t)
		id := open(r)
		got, _ := r.fetch(fetchReq{id: id, epoch: 1, maxWait: long}, func() {
			// Another connection closes the session (a sessionless
			// fetch that does not wait), then a record arrives.
			kr := kmsg.NewPtrFetchRequest()
			kr.Version, kr.SessionID, kr.SessionEpoch = 12, id, -1
			if _, err := r.srv.handleFetch(context.Background(), nil, kr); err != nil {
				t.Error(err)
			}
			if w := r.waiters(); !equalInts(w, []int{1, 1, 1, 1}) {
				t.Errorf("waiters while the closed session's fetch runs: %v, want [1 1 1 1]", w)
			}
			r.append(r.parts["u"][0])
		})
		if fp, ok := got["u/0"]; !ok || fp.size == 0 {
			t.Fatalf("answered %+v, want u-0 with its record", got)
		}
		if w := r.waiters(); !equalInts(w, none) {
			t.Fatalf("waiters after the closed session's fetch: %v, want none", w)
		}
	})
}

// TestFetchLongPollPartitionGone: a long poll answers at once, with the
// partition's error, when a partition it waits on is deleted or led
// elsewhere, in a session or not (Kafka's DelayedFetch completes when a
// partition is no longer led here).
func TestFetchLongPollPartitionGone(t *testing.T) {
	for _, session := range []bool{true, false} {
		name := "sessionless"
		if session {
			name = "session"
		}
		t.Run(name+"/deleted", func(t *testing.T) {
			r := newLongPollRig(t)
			req := fetchReq{epoch: -1, named: map[string]map[int32]int64{"t": {0: 1}, "u": {0: 1}}, maxWait: long}
			if session {
				_, req.id = r.fetch(fetchReq{named: req.named}, nil)
				req.epoch, req.named = 1, nil
			}
			got, _ := r.fetch(req, func() {
				if err := r.br.DeleteTopic("u"); err != nil {
					t.Error(err)
				}
			})
			if fp := got["u/0"]; fp.errorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("answered %+v, want UNKNOWN_TOPIC_OR_PARTITION for u-0", got)
			}
		})
		t.Run(name+"/led elsewhere", func(t *testing.T) {
			r := newLongPollRig(t)
			req := fetchReq{epoch: -1, named: map[string]map[int32]int64{"t": {0: 1, 1: 1}}, maxWait: long}
			if session {
				_, req.id = r.fetch(fetchReq{named: req.named}, nil)
				req.epoch, req.named = 1, nil
			}
			got, _ := r.fetch(req, func() {
				p := r.parts["t"][1]
				l := p.Leadership()
				l.Leader, l.LeaderEpoch = l.Leader+1, l.LeaderEpoch+1
				p.SetLeadership(l)
			})
			if fp := got["t/1"]; fp.errorCode != kerr.NotLeaderForPartition.Code {
				t.Fatalf("answered %+v, want NOT_LEADER_OR_FOLLOWER for t-1", got)
			}
		})
	}
}
