package group

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errFsync is a failed fsync as storage reports it.
var errFsync = fmt.Errorf("fdatasync: input/output error: %w", kerr.KafkaStorageError)

// groupView is what DescribeGroups shows of a group, for comparing the
// coordinator's memory with what a restart loads from the store.
func (h *harness) groupView(id string) string {
	h.t.Helper()
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{id}
	dg := h.do(d).(*kmsg.DescribeGroupsResponse).Groups[0]
	state := dg.State
	if state == "Dead" && len(dg.Members) == 0 {
		state = "Empty" // a group nothing is stored of
	}
	var ms []string
	for _, m := range dg.Members {
		ms = append(ms, m.MemberID+"="+string(m.MemberAssignment))
	}
	sort.Strings(ms)
	return fmt.Sprintf("%s %s [%s]", state, dg.Protocol, strings.Join(ms, " "))
}

// sameAsStored checks that the coordinator's view of group id is what a
// coordinator loading the store now would have.
func (h *harness) sameAsStored(id, when string) {
	h.t.Helper()
	mem := h.groupView(id)
	h.restart()
	if stored := h.groupView(id); stored != mem {
		h.t.Fatalf("%s: the coordinator showed %q, the store holds %q", when, mem, stored)
	}
}

// staticMember makes instance the only member of a Stable group and
// returns its member id.
func staticMember(t *testing.T, h *harness, group, instance string) string {
	t.Helper()
	j := recv(t, h.joinAsync(joinReq(group, "", &instance, "t")))
	if j.ErrorCode != 0 {
		t.Fatalf("join: %+v", j)
	}
	s := recv(t, h.syncAsync(syncReq(group, j.MemberID, j.Generation, map[string]string{j.MemberID: "a"})))
	if s.ErrorCode != 0 {
		t.Fatalf("sync: %+v", s)
	}
	return j.MemberID
}

// TestFailedGroupWritesSurface: when the group metadata record cannot be
// stored, the JoinGroup, SyncGroup or LeaveGroup that wrote it is answered
// with Kafka's error (NOT_COORDINATOR for a storage error) instead of
// success, and the group is what the store holds (it was swallowed and the
// group kept changes nothing stored).
func TestFailedGroupWritesSurface(t *testing.T) {
	h := newHarness(t, nil)
	inst := "i1"
	id := staticMember(t, h, "g", inst)
	stable := h.groupView("g")

	// A static member restarting in a Stable group takes a new member id,
	// which is written: it fails, so the old id stays.
	h.store.failWait = errFsync
	j := recv(t, h.joinAsync(joinReq("g", "", &inst, "t")))
	if j.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("static rejoin with a failing store: error %d, want NOT_COORDINATOR", j.ErrorCode)
	}
	if v := h.groupView("g"); v != stable {
		t.Fatalf("after the failed static rejoin: %q, want %q", v, stable)
	}
	h.store.failWait = nil
	h.sameAsStored("g", "failed static rejoin")

	// The last member leaving writes the Empty group: failing, the member
	// is still there; once the store works the leave goes through.
	h.store.failWait = errFsync
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version, r.Group = 5, "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID, lm.InstanceID = id, &inst
	r.Members = append(r.Members, lm)
	if lr := h.do(r).(*kmsg.LeaveGroupResponse); lr.ErrorCode != kerr.NotCoordinator.Code || len(lr.Members) != 0 {
		t.Fatalf("leave with a failing store: %+v, want NOT_COORDINATOR", lr)
	}
	h.store.failWait = nil
	h.sameAsStored("g", "failed leave")
	if lr := h.do(r).(*kmsg.LeaveGroupResponse); lr.ErrorCode != 0 || lr.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %+v", lr)
	}
	if v := h.groupView("g"); !strings.HasPrefix(v, "Empty") {
		t.Fatalf("after leaving: %q", v)
	}
	h.sameAsStored("g", "leave")

	// The leader's assignment not stored: every SyncGroup of the
	// generation gets the error and nothing of the generation is kept.
	id1, ch1 := h.joinNew("g2", "t")
	j1 := recv(t, ch1)
	h.store.failWait = errFsync
	if s := recv(t, h.syncAsync(syncReq("g2", id1, j1.Generation, map[string]string{id1: "a"}))); s.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("leader sync with a failing store: error %d, want NOT_COORDINATOR", s.ErrorCode)
	}
	h.store.failWait = nil
	h.sameAsStored("g2", "failed sync")
	// The member rejoins and the group forms again.
	id1, ch1 = h.joinNew("g2", "t")
	j1 = recv(t, ch1)
	if s := recv(t, h.syncAsync(syncReq("g2", id1, j1.Generation, map[string]string{id1: "a"}))); s.ErrorCode != 0 {
		t.Fatalf("sync after the store recovered: %d", s.ErrorCode)
	}
	h.sameAsStored("g2", "sync")

	// A too large write is UNKNOWN_SERVER_ERROR for group metadata, as
	// Kafka's coordinator answers it.
	if c := storeErrorCode(fmt.Errorf("x: %w", kerr.MessageTooLarge), kerr.UnknownServerError.Code); c != kerr.UnknownServerError.Code {
		t.Fatalf("too large: %d", c)
	}
}

// TestTimerWriteFailureReloads: a session expiring empties the group; when
// that cannot be stored the group goes back to what is stored instead of
// going on as if it were.
func TestTimerWriteFailureReloads(t *testing.T) {
	h := newHarness(t, nil)
	staticMember(t, h, "g", "i1")
	stable := h.groupView("g")
	h.store.failWait = errFsync
	h.clk.Advance(11 * time.Second) // the member's session ends
	if v := h.groupView("g"); v != stable {
		t.Fatalf("after a failed expiry write: %q, want %q (stored)", v, stable)
	}
	h.store.failWait = nil
	h.clk.Advance(11 * time.Second) // and ends again, now stored
	if v := h.groupView("g"); !strings.HasPrefix(v, "Empty") {
		t.Fatalf("after the expiry was stored: %q", v)
	}
	h.sameAsStored("g", "expiry")
}

// TestGroupNotLockedDuringWrites: while a member's offset commit or the
// leader's SyncGroup waits for its write to be durable, the other members
// of the group are answered (the group's lock is not held over the wait),
// and the waiting requests complete once the write is durable.
func TestGroupNotLockedDuringWrites(t *testing.T) {
	h := newHarness(t, nil)
	id1, id2, gen := twoMembers(t, h, "g")
	hold := make(chan struct{})
	h.store.hold = hold
	commit := make(chan *kmsg.OffsetCommitResponse, 1)
	before := appendCount(h)
	go func() {
		commit <- h.do(commitReq("g", id1, gen, "t", map[int32]int64{0: 7})).(*kmsg.OffsetCommitResponse)
	}()
	appendsAfter(t, h, before)
	notReady(t, commit)
	if hb := h.do(hbReq("g", id2, gen)).(*kmsg.HeartbeatResponse); hb.ErrorCode != 0 {
		t.Fatalf("heartbeat while a commit waits: %d", hb.ErrorCode)
	}
	if v := h.groupView("g"); !strings.HasPrefix(v, "Stable") {
		t.Fatalf("describe while a commit waits: %q", v)
	}
	if got := h.fetch("g", "t", 0); got["t"][0] != -1 {
		t.Fatalf("offset visible before it is durable: %v", got)
	}
	h.store.hold = nil
	close(hold)
	if c := recv(t, commit); c.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %+v", c)
	}
	if got := h.fetch("g", "t", 0); got["t"][0] != 7 {
		t.Fatalf("offset after the write: %v", got)
	}

	// Two commits of one partition becoming durable in the other order:
	// the later one wins.
	hold = make(chan struct{})
	h.store.hold = hold
	first := make(chan *kmsg.OffsetCommitResponse, 1)
	before = appendCount(h)
	go func() {
		first <- h.do(commitReq("g", id1, gen, "t", map[int32]int64{0: 8})).(*kmsg.OffsetCommitResponse)
	}()
	appendsAfter(t, h, before)
	h.store.hold = nil
	if c := h.do(commitReq("g", id2, gen, "t", map[int32]int64{0: 9})).(*kmsg.OffsetCommitResponse); c.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("second commit: %+v", c)
	}
	close(hold)
	recv(t, first)
	if got := h.fetch("g", "t", 0); got["t"][0] != 9 {
		t.Fatalf("offset %v, want the later commit's 9", got)
	}
}

// appendsAfter waits until the store has taken more appends than before.
func appendsAfter(t *testing.T, h *harness, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		h.store.mu.Lock()
		n := h.store.appends
		h.store.mu.Unlock()
		if n > before {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the append was never made")
}

// appendCount is how many appends the store has taken.
func appendCount(h *harness) int {
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	return h.store.appends
}

// TestJoinWhileAssignmentIsWritten: a member that joins while the leader's
// assignment is being written finds the group Stable, as on Kafka, whose
// group is Stable once the record is committed (at once on a single
// replica: no fsync), rather than in CompletingRebalance, which would fail
// the generation's SyncGroups for as long as the fsync takes. The
// SyncGroups of the generation, the leader's and a follower's, are answered
// with their assignments only once the write is durable; the members learn
// of the new rebalance from their heartbeats and rejoin.
func TestJoinWhileAssignmentIsWritten(t *testing.T) {
	h := newHarness(t, nil)
	id1, ch1 := h.joinNew("g", "t")
	j1 := recv(t, ch1)
	hold := make(chan struct{})
	h.store.hold = hold
	before := appendCount(h)
	s1 := h.syncAsync(syncReq("g", id1, j1.Generation, map[string]string{id1: "all"}))
	appendsAfter(t, h, before)
	h.store.hold = nil
	if st := h.state("g"); st != "Stable" {
		t.Fatalf("group %s once the assignment is appended, want Stable", st)
	}
	id2, ch2 := h.joinNew("g", "t")
	h.waitParked("g", 1)
	notReady(t, s1) // the assignment is not durable yet
	close(hold)
	if s := recv(t, s1); s.ErrorCode != 0 || string(s.MemberAssignment) != "all" {
		t.Fatalf("leader's SyncGroup: error %d assignment %q, want its assignment", s.ErrorCode, s.MemberAssignment)
	}
	if hb := h.do(hbReq("g", id1, j1.Generation)).(*kmsg.HeartbeatResponse); hb.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat after the join: error %d, want REBALANCE_IN_PROGRESS", hb.ErrorCode)
	}
	notReady(t, ch2)
	j1, j2 := recv(t, h.joinAsync(joinReq("g", id1, nil, "t"))), recv(t, ch2)
	if j1.ErrorCode != 0 || j2.ErrorCode != 0 || j1.Generation != 2 || j2.Generation != 2 || len(j1.Members) != 2 {
		t.Fatalf("rejoin: %+v / %+v", j1, j2)
	}

	// Generation 2: a follower's SyncGroup that comes while the leader's
	// assignment is written waits for it too.
	hold = make(chan struct{})
	h.store.hold = hold
	before = appendCount(h)
	s1 = h.syncAsync(syncReq("g", id1, 2, map[string]string{id1: "a", id2: "b"}))
	appendsAfter(t, h, before)
	h.store.hold = nil
	s2 := h.syncAsync(syncReq("g", id2, 2, nil))
	notReady(t, s2)
	notReady(t, s1)
	close(hold)
	if a, b := recv(t, s1), recv(t, s2); a.ErrorCode != 0 || b.ErrorCode != 0 || string(a.MemberAssignment) != "a" || string(b.MemberAssignment) != "b" {
		t.Fatalf("SyncGroups of generation 2: %+v / %+v", a, b)
	}
	h.sameAsStored("g", "generation 2")
}
