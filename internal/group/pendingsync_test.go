package group_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawMember drives the classic protocol with raw kmsg requests through a
// kgo client (which routes them to the group's coordinator).
type rawMember struct {
	t     *testing.T
	cl    *kgo.Client
	group string
	id    string
	gen   int32
}

func (m *rawMember) join(ctx context.Context) *kmsg.JoinGroupResponse {
	m.t.Helper()
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version = 5
	j.Group, j.MemberID = m.group, m.id
	j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 6000, 1000
	j.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	j.Protocols = append(j.Protocols, p)
	resp, err := j.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Errorf("JoinGroup: %v", err)
		return nil
	}
	m.id, m.gen = resp.MemberID, resp.Generation
	return resp
}

func (m *rawMember) heartbeat(ctx context.Context) int16 {
	m.t.Helper()
	h := kmsg.NewPtrHeartbeatRequest()
	h.Version = 3
	h.Group, h.MemberID, h.Generation = m.group, m.id, m.gen
	resp, err := h.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("Heartbeat: %v", err)
	}
	return resp.ErrorCode
}

// TestPendingSyncExpiry: two members join and get their JoinGroup
// answers; only the leader sends its SyncGroup. The other, which keeps
// heartbeating, is removed once the rebalance timeout (1 s) has passed
// since the join completed, and the group rebalances: the leader's next
// heartbeat is REBALANCE_IN_PROGRESS (Kafka's expirePendingSync).
func TestPendingSyncExpiry(t *testing.T) {
	b := startBroker(t, nil)
	ctx := ctxFor(t, 120*time.Second)
	a := &rawMember{t: t, cl: b.Client(), group: "ps"}
	c := &rawMember{t: t, cl: b.Client(), group: "ps"}
	// JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED and an id.
	for _, m := range []*rawMember{a, c} {
		if r := m.join(ctx); r == nil || r.ErrorCode != kerr.MemberIDRequired.Code {
			t.Fatalf("first join: %+v", r)
		}
	}
	var wg sync.WaitGroup
	resps := make([]*kmsg.JoinGroupResponse, 2)
	for i, m := range []*rawMember{a, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i] = m.join(ctx)
		}()
	}
	wg.Wait()
	for _, r := range resps {
		if r == nil || r.ErrorCode != 0 {
			t.Fatalf("join: %+v", r)
		}
	}
	leader, other := a, c
	if resps[1].LeaderID == c.id {
		leader, other = c, a
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version = 3
	s.Group, s.MemberID, s.Generation = "ps", leader.id, leader.gen
	for _, m := range []*rawMember{leader, other} {
		as := kmsg.NewSyncGroupRequestGroupAssignment()
		as.MemberID, as.MemberAssignment = m.id, []byte(m.id)
		s.GroupAssignment = append(s.GroupAssignment, as)
	}
	sr, err := s.RequestWith(ctx, leader.cl)
	if err != nil || sr.ErrorCode != 0 || string(sr.MemberAssignment) != leader.id {
		t.Fatalf("leader SyncGroup: %v %+v", err, sr)
	}
	// Both heartbeat (the other member's session stays alive: 6 s) until
	// the leader learns of the rebalance.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code := leader.heartbeat(ctx); code == kerr.RebalanceInProgress.Code {
			break
		} else if code != 0 {
			t.Fatalf("leader heartbeat: %v", kerr.ErrorForCode(code))
		}
		if code := other.heartbeat(ctx); code != 0 && code != kerr.UnknownMemberID.Code {
			t.Fatalf("other heartbeat: %v", kerr.ErrorForCode(code))
		}
		if time.Now().After(deadline) {
			t.Fatal("the member that never sent SyncGroup is still in the group after 60 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code := other.heartbeat(ctx); code != kerr.UnknownMemberID.Code {
		t.Fatalf("removed member's heartbeat: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
	dg, err := b.Admin().DescribeGroups(ctx, "ps")
	if err != nil {
		t.Fatal(err)
	}
	g := dg["ps"]
	if g.State != "PreparingRebalance" || len(g.Members) != 1 || g.Members[0].MemberID != leader.id {
		t.Fatalf("group after expiry: state %s, members %+v", g.State, g.Members)
	}
	// The leader rejoins alone: generation+1.
	gen := leader.gen
	if r := leader.join(ctx); r == nil || r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
}
