package protocol

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sessionFetch(id, epoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.SessionID, req.SessionEpoch = id, epoch
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "t"
	p := kmsg.NewFetchRequestTopicPartition()
	p.PartitionMaxBytes = 1 << 20
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// TestFetchSessionIdleEviction: a session idle past fetchSessionIdle is
// gone at the next sweep, one in use is never evicted, and a full cache is
// swept before a new session is refused.
func TestFetchSessionIdleEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := newFetchSessions()
	fs.nowFn = func() time.Time { return now }

	open := func() int32 {
		p := fs.plan(sessionFetch(0, initialEpoch))
		fs.done(p)
		if p.session == nil {
			t.Fatal("no session opened")
		}
		return p.session.id
	}
	idle := open()
	busy := open()
	pb := fs.plan(sessionFetch(busy, 1)) // stays in use
	if pb.errorCode != 0 {
		t.Fatalf("incremental fetch: error %d", pb.errorCode)
	}

	now = now.Add(fetchSessionIdle + time.Second)
	if p := fs.plan(sessionFetch(idle, 1)); p.errorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("idle session still served (error %d)", p.errorCode)
	}
	if fs.byID[busy] == nil {
		t.Fatal("in-use session evicted")
	}
	fs.done(pb)

	// Fill the cache with sessions that all go idle; a new session is
	// still granted at once, because a full cache is swept regardless of
	// the sweep interval.
	for len(fs.byID) < maxFetchSessions {
		open()
	}
	now = now.Add(fetchSessionIdle + time.Second)
	fs.swept = now // a sweep just ran
	if open() == 0 {
		t.Fatal("no session id")
	}
	if n := len(fs.byID); n != 1 {
		t.Fatalf("%d sessions after sweeping a full cache, want 1", n)
	}
}
