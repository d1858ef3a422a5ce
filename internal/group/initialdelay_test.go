package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's first initial-rebalance window is group.initial.rebalance.delay.ms
// even when the members' rebalance timeout is shorter (InitialDelayedJoin /
// tryCompleteInitialRebalanceElseSchedule: delay = initial delay, remaining =
// max(rebalanceTimeout - initialDelay, 0)).
func TestInitialRebalanceDelayLongerThanRebalanceTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	r := joinReq("g", "", nil, "t")
	r.Version = 2 // no KIP-394, like kafka-go
	r.RebalanceTimeoutMillis = 2000
	ch := h.joinAsync(r)
	h.waitParked("g", 1)
	h.clk.Advance(2500 * time.Millisecond)
	notReady(t, ch)
	h.clk.Advance(500 * time.Millisecond)
	if j := recv(t, ch); j.ErrorCode != 0 || j.Generation != 1 {
		t.Fatalf("join after the 3s initial delay: %+v", j)
	}
}

// Kafka extends the initial delay for new members only while the group is
// at generation 0 (GroupCoordinator.addMemberAndRebalance sets
// newMemberAdded only then): a group that emptied after a generation and
// is joined by two members gets one window of group.initial.rebalance.delay.ms.
func TestInitialRebalanceDelayNotExtendedAfterFirstGeneration(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	join := func() <-chan *kmsg.JoinGroupResponse {
		r := joinReq("g", "", nil, "t")
		r.Version = 2 // no KIP-394, like kafka-go
		r.RebalanceTimeoutMillis = 10000
		return h.joinAsync(r)
	}
	first := join()
	h.waitParked("g", 1)
	h.clk.Advance(3 * time.Second)
	j := recv(t, first)
	if j.ErrorCode != 0 || j.Generation != 1 {
		t.Fatalf("first generation: %+v", j)
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "g", j.MemberID
	if resp := h.do(leave).(*kmsg.LeaveGroupResponse); resp.ErrorCode != 0 {
		t.Fatalf("leave: %d", resp.ErrorCode)
	}
	if st := h.state("g"); st != "Empty" {
		t.Fatalf("state after leave: %s", st)
	}
	a := join()
	h.waitParked("g", 1)
	h.clk.Advance(time.Second)
	b := join()
	h.waitParked("g", 2)
	notReady(t, a)
	h.clk.Advance(2 * time.Second) // the first window ends: no extension
	ja, jb := recv(t, a), recv(t, b)
	if ja.ErrorCode != 0 || jb.ErrorCode != 0 || ja.Generation != jb.Generation || ja.Generation < 2 {
		t.Fatalf("after one window: %+v / %+v", ja, jb)
	}
}
