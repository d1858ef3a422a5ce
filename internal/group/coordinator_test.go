package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestPartitionFor(t *testing.T) {
	cases := []struct {
		id   string
		want int32
	}{
		{"", 0},
		{"a", 97 % 50},
		{"hello", 99162322 % 50},
		{"polygenelubricants", 0}, // hashCode == Integer.MIN_VALUE
		{"\u00e9t\u00e9", int32((0xe9*31*31 + 't'*31 + 0xe9) % 50)},
	}
	for _, c := range cases {
		if got := PartitionFor(c.id, 50); got != c.want {
			t.Errorf("PartitionFor(%q) = %d, want %d", c.id, got, c.want)
		}
	}
}

func TestFindCoordinator(t *testing.T) {
	h := newHarness(t, nil)
	r := kmsg.NewPtrFindCoordinatorRequest()
	r.Version = 4
	r.CoordinatorKeys = []string{"g1", "g2"}
	resp := h.do(r).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 2 || resp.Coordinators[1].Key != "g2" || resp.Coordinators[0].NodeID != 1 || resp.Coordinators[0].Port != 9092 {
		t.Fatalf("v4: %+v", resp.Coordinators)
	}
	r = kmsg.NewPtrFindCoordinatorRequest()
	r.Version = 2
	r.CoordinatorKey = "g"
	resp = h.do(r).(*kmsg.FindCoordinatorResponse)
	if resp.ErrorCode != 0 || resp.Host != "127.0.0.1" || resp.NodeID != 1 {
		t.Fatalf("v2: %+v", resp)
	}
	r.CoordinatorType = 1
	resp = h.do(r).(*kmsg.FindCoordinatorResponse)
	if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("txn coordinator: %+v", resp)
	}
}

// twoMembers brings group g to Stable with two members; it returns the
// member ids (leader first) and the generation.
func twoMembers(t *testing.T, h *harness, g string) (string, string, int32) {
	t.Helper()
	id1, ch1 := h.joinNew(g, "t")
	j1 := recv(t, ch1) // alone: completes at once (no initial delay)
	if j1.ErrorCode != 0 || j1.LeaderID != id1 || len(j1.Members) != 1 {
		t.Fatalf("join 1: %+v", j1)
	}
	s1 := recv(t, h.syncAsync(syncReq(g, id1, j1.Generation, map[string]string{id1: "all"})))
	if s1.ErrorCode != 0 || string(s1.MemberAssignment) != "all" {
		t.Fatalf("sync 1: %+v", s1)
	}
	// A second member triggers a rebalance; member 1 learns it by heartbeat.
	id2, ch2 := h.joinNew(g, "t")
	h.waitParked(g, 1)
	if hb := h.do(hbReq(g, id1, j1.Generation)).(*kmsg.HeartbeatResponse); hb.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %d", hb.ErrorCode)
	}
	notReady(t, ch2)
	ch1 = h.joinAsync(joinReq(g, id1, nil, "t"))
	j1, j2 := recv(t, ch1), recv(t, ch2)
	if j1.ErrorCode != 0 || j2.ErrorCode != 0 || j1.Generation != j2.Generation || j1.Generation != 2 {
		t.Fatalf("rejoin: %+v / %+v", j1, j2)
	}
	if j1.LeaderID != id1 || len(j1.Members) != 2 || len(j2.Members) != 0 {
		t.Fatalf("leader %s members %d/%d", j1.LeaderID, len(j1.Members), len(j2.Members))
	}
	sc2 := h.syncAsync(syncReq(g, id2, j2.Generation, nil))
	notReady(t, sc2)
	s1 = recv(t, h.syncAsync(syncReq(g, id1, j1.Generation, map[string]string{id1: "p0", id2: "p1"})))
	s2 := recv(t, sc2)
	if string(s1.MemberAssignment) != "p0" || string(s2.MemberAssignment) != "p1" {
		t.Fatalf("assignments %q %q", s1.MemberAssignment, s2.MemberAssignment)
	}
	if h.state(g) != "Stable" {
		t.Fatalf("state %s", h.state(g))
	}
	return id1, id2, j1.Generation
}

func TestJoinSyncTwoMembers(t *testing.T) {
	h := newHarness(t, nil)
	id1, id2, gen := twoMembers(t, h, "g")
	for _, id := range []string{id1, id2} {
		if hb := h.do(hbReq("g", id, gen)).(*kmsg.HeartbeatResponse); hb.ErrorCode != 0 {
			t.Fatalf("heartbeat %s: %d", id, hb.ErrorCode)
		}
	}
	if hb := h.do(hbReq("g", id1, gen-1)).(*kmsg.HeartbeatResponse); hb.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("old generation heartbeat: %d", hb.ErrorCode)
	}
	if hb := h.do(hbReq("g", "nobody", gen)).(*kmsg.HeartbeatResponse); hb.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member heartbeat: %d", hb.ErrorCode)
	}
	// DescribeGroups shows both members and their assignments.
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Version = 5
	d.Groups = []string{"g", "nope"}
	dr := h.do(d).(*kmsg.DescribeGroupsResponse)
	if dr.Groups[0].State != "Stable" || dr.Groups[0].Protocol != "range" || len(dr.Groups[0].Members) != 2 {
		t.Fatalf("describe: %+v", dr.Groups[0])
	}
	if dr.Groups[0].Members[0].ClientID != "client" {
		t.Fatalf("client id %q", dr.Groups[0].Members[0].ClientID)
	}
	if dr.Groups[1].State != "Dead" || dr.Groups[1].ErrorCode != 0 {
		t.Fatalf("describe unknown: %+v", dr.Groups[1])
	}
	// The group metadata (with assignments) is stored.
	recs := h.store.records(t, PartitionFor("g", 50))
	var gv kmsg.GroupMetadataValue
	if err := gv.ReadFrom(recs[len(recs)-1].Value); err != nil {
		t.Fatal(err)
	}
	if gv.Generation != gen || len(gv.Members) != 2 || *gv.Leader != id1 {
		t.Fatalf("stored metadata %+v", gv)
	}
}

func TestSessionTimeoutExpiresMember(t *testing.T) {
	h := newHarness(t, nil)
	id1, id2, gen := twoMembers(t, h, "g")
	// Member 2 dies; member 1 keeps heartbeating.
	for i := 0; i < 3; i++ {
		h.clk.Advance(4 * time.Second)
		if hb := h.do(hbReq("g", id1, gen)).(*kmsg.HeartbeatResponse); hb.ErrorCode != 0 && i < 2 {
			t.Fatalf("heartbeat %d: %d", i, hb.ErrorCode)
		}
	}
	if st := h.state("g"); st != "PreparingRebalance" {
		t.Fatalf("state after member 2 expired: %s", st)
	}
	j := recv(t, h.joinAsync(joinReq("g", id1, nil, "t")))
	if j.ErrorCode != 0 || len(j.Members) != 1 || j.Generation != gen+1 {
		t.Fatalf("rejoin alone: %+v", j)
	}
	if hb := h.do(hbReq("g", id2, gen)).(*kmsg.HeartbeatResponse); hb.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %d", hb.ErrorCode)
	}
}

func TestRebalanceTimeoutDropsSilentMember(t *testing.T) {
	h := newHarness(t, nil)
	id1, _, _ := twoMembers(t, h, "g")
	// Member 1 rejoins (leader rejoin triggers a rebalance); member 2 never does.
	ch := h.joinAsync(joinReq("g", id1, nil, "t"))
	h.waitParked("g", 1)
	notReady(t, ch)
	h.clk.Advance(60 * time.Second) // rebalance.timeout.ms
	j := recv(t, ch)
	if j.ErrorCode != 0 || len(j.Members) != 1 {
		t.Fatalf("join after rebalance timeout: %+v", j)
	}
}

func TestLeaveGroupBatched(t *testing.T) {
	h := newHarness(t, nil)
	id1, id2, _ := twoMembers(t, h, "g")
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = 5
	r.Group = "g"
	for _, id := range []string{id1, id2, "ghost"} {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		r.Members = append(r.Members, m)
	}
	resp := h.do(r).(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode != 0 || resp.Members[0].ErrorCode != 0 || resp.Members[1].ErrorCode != 0 || resp.Members[2].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %+v", resp)
	}
	if st := h.state("g"); st != "Empty" {
		t.Fatalf("state after everyone left: %s", st)
	}
	// v0 single member on an unknown group.
	r0 := kmsg.NewPtrLeaveGroupRequest()
	r0.Group, r0.MemberID = "nope", "x"
	if resp := h.do(r0).(*kmsg.LeaveGroupResponse); resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave v0: %d", resp.ErrorCode)
	}
}

func TestStaticMemberRestartKeepsAssignment(t *testing.T) {
	h := newHarness(t, nil)
	inst := "instance-a"
	j := recv(t, h.joinAsync(joinReq("g", "", &inst, "t")))
	if j.ErrorCode != 0 {
		t.Fatalf("static join: %d", j.ErrorCode)
	}
	s := recv(t, h.syncAsync(syncReq("g", j.MemberID, j.Generation, map[string]string{j.MemberID: "mine"})))
	if s.ErrorCode != 0 {
		t.Fatalf("sync: %d", s.ErrorCode)
	}
	// The process restarts: joins with no member id but the same instance id.
	j2 := recv(t, h.joinAsync(joinReq("g", "", &inst, "t")))
	if j2.ErrorCode != 0 || j2.Generation != j.Generation || j2.MemberID == j.MemberID || !j2.SkipAssignment {
		t.Fatalf("static rejoin: %+v (first %+v)", j2, j)
	}
	if st := h.state("g"); st != "Stable" {
		t.Fatalf("state %s: a static restart must not rebalance", st)
	}
	s2 := recv(t, h.syncAsync(syncReq("g", j2.MemberID, j2.Generation, nil)))
	if string(s2.MemberAssignment) != "mine" {
		t.Fatalf("assignment after restart %q", s2.MemberAssignment)
	}
	// The old member id is fenced.
	hb := hbReq("g", j.MemberID, j.Generation)
	hb.InstanceID = &inst
	if r := h.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old static member heartbeat: %d", r.ErrorCode)
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	id1, ch1 := h.joinNew("g", "t")
	h.waitParked("g", 1)
	notReady(t, ch1)
	h.clk.Advance(2 * time.Second)
	_, ch2 := h.joinNew("g", "t") // extends the delay by another 3s
	h.waitParked("g", 2)
	h.clk.Advance(1 * time.Second)
	notReady(t, ch1)
	h.clk.Advance(3 * time.Second)
	j1, j2 := recv(t, ch1), recv(t, ch2)
	if j1.Generation != 1 || j2.Generation != 1 || j1.LeaderID != id1 || len(j1.Members) != 2 {
		t.Fatalf("delayed join: %+v / %+v", j1, j2)
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t, nil)
	r := joinReq("", "", nil, "t")
	if j := recv(t, h.joinAsync(r)); j.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group: %d", j.ErrorCode)
	}
	r = joinReq("g", "", nil, "t")
	r.SessionTimeoutMillis = 1000
	if j := recv(t, h.joinAsync(r)); j.ErrorCode != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("short session: %d", j.ErrorCode)
	}
	r = joinReq("g", "", nil, "t")
	r.ProtocolType = ""
	if j := recv(t, h.joinAsync(r)); j.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("no protocol type: %d", j.ErrorCode)
	}
	if j := recv(t, h.joinAsync(joinReq("g", "made-up", nil, "t"))); j.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %d", j.ErrorCode)
	}
	// A member with another protocol type cannot join a live group.
	twoMembers(t, h, "g2")
	r = joinReq("g2", "", nil, "t")
	r.ProtocolType = "connect"
	if j := recv(t, h.joinAsync(r)); j.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("other protocol type: %d", j.ErrorCode)
	}
	// JoinGroup v3 (no KIP-394) joins in one step.
	r = joinReq("g3", "", nil, "t")
	r.Version = 3
	if j := recv(t, h.joinAsync(r)); j.ErrorCode != 0 || j.MemberID == "" {
		t.Fatalf("v3 join: %+v", j)
	}
}

func TestSimpleCommitFetchPersist(t *testing.T) {
	h := newHarness(t, nil)
	resp := h.do(commitReq("tool", "", -1, "t", map[int32]int64{0: 10, 1: 20})).(*kmsg.OffsetCommitResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("commit: %+v", resp)
		}
	}
	got := h.fetch("tool", "t", 0, 1, 2)
	if got["t"][0] != 10 || got["t"][1] != 20 || got["t"][2] != -1 {
		t.Fatalf("fetch: %v", got)
	}
	h.restart()
	got = h.fetch("tool", "")
	if got["t"][0] != 10 || got["t"][1] != 20 || len(got["t"]) != 2 {
		t.Fatalf("fetch after restart: %v", got)
	}
	// Records use Kafka's schemas.
	recs := h.store.records(t, PartitionFor("tool", 50))
	var k kmsg.OffsetCommitKey
	var v kmsg.OffsetCommitValue
	if err := k.ReadFrom(recs[0].Key); err != nil || k.Group != "tool" || k.Topic != "t" || k.Version != 1 {
		t.Fatalf("key %+v %v", k, err)
	}
	if err := v.ReadFrom(recs[0].Value); err != nil || v.Offset != 10 || v.Version != 3 || v.LeaderEpoch != 3 || v.Metadata != "m" {
		t.Fatalf("value %+v %v", v, err)
	}
	// ListGroups shows the offsets-only group as Empty with no protocol type.
	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version = 5
	lr.StatesFilter = []string{"empty"}
	l := h.do(lr).(*kmsg.ListGroupsResponse)
	if len(l.Groups) != 1 || l.Groups[0].Group != "tool" || l.Groups[0].GroupState != "Empty" {
		t.Fatalf("list: %+v", l.Groups)
	}
	lr.StatesFilter = []string{"Stable"}
	if l := h.do(lr).(*kmsg.ListGroupsResponse); len(l.Groups) != 0 {
		t.Fatalf("list stable: %+v", l.Groups)
	}
}

func TestCommitValidation(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.TopicPartitionExists = func(topic string, p int32) bool { return topic == "t" && p < 2 }
	})
	id1, _, gen := twoMembers(t, h, "g")
	codeOf := func(r *kmsg.OffsetCommitRequest) int16 {
		return h.do(r).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	if c := codeOf(commitReq("g", id1, gen, "t", map[int32]int64{0: 5})); c != 0 {
		t.Fatalf("member commit: %d", c)
	}
	if c := codeOf(commitReq("g", id1, gen-1, "t", map[int32]int64{0: 5})); c != kerr.IllegalGeneration.Code {
		t.Fatalf("stale generation: %d", c)
	}
	if c := codeOf(commitReq("g", "", -1, "t", map[int32]int64{0: 5})); c != kerr.UnknownMemberID.Code {
		t.Fatalf("simple commit to live group: %d", c)
	}
	if c := codeOf(commitReq("g", "who", gen, "t", map[int32]int64{0: 5})); c != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %d", c)
	}
	if c := codeOf(commitReq("g", id1, gen, "t", map[int32]int64{7: 5})); c != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %d", c)
	}
	big := commitReq("g", id1, gen, "t", map[int32]int64{0: 5})
	md := string(make([]byte, 5000))
	big.Topics[0].Partitions[0].Metadata = &md
	if c := codeOf(big); c != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("big metadata: %d", c)
	}
	h.store.fail = errStoreDown
	if c := codeOf(commitReq("g", id1, gen, "t", map[int32]int64{0: 9})); c != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("store down: %d", c)
	}
	h.store.fail = nil
	if got := h.fetch("g", "t", 0); got["t"][0] != 5 {
		t.Fatalf("failed commit applied: %v", got)
	}
}

// TestSimpleCommitWithMemberID: a commit with generation -1 to a group
// without members is accepted whatever member id it carries, as Kafka's
// ClassicGroup.validateOffsetCommit checks generation < 0 && EMPTY first.
// librdkafka's KIP-848 consumer using assign() sends its own generated
// member id with epoch -1 (OffsetCommit v9); Strata answered
// UNKNOWN_MEMBER_ID (librdkafka tests 0030, 0051 with
// TEST_CONSUMER_GROUP_PROTOCOL=consumer). A group with members still
// refuses it.
func TestSimpleCommitWithMemberID(t *testing.T) {
	h := newHarness(t, nil)
	codeOf := func(r *kmsg.OffsetCommitRequest) int16 {
		r.Version = 9
		return h.do(r).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	if c := codeOf(commitReq("solo", "Qvs3lU9oRu-t0dbMBAagYg", -1, "t", map[int32]int64{0: 7})); c != 0 {
		t.Fatalf("simple commit with a member id to a new group: %d", c)
	}
	if c := codeOf(commitReq("solo", "another-id", -1, "t", map[int32]int64{0: 8})); c != 0 {
		t.Fatalf("simple commit with a member id to an empty group: %d", c)
	}
	if got := h.fetch("solo", "t", 0); got["t"][0] != 8 {
		t.Fatalf("fetch: %v", got)
	}
	twoMembers(t, h, "live")
	if c := codeOf(commitReq("live", "not-a-member", -1, "t", map[int32]int64{0: 5})); c != kerr.UnknownMemberID.Code {
		t.Fatalf("simple commit with a member id to a live group: %d", c)
	}
}

func TestRestartRestoresGroup(t *testing.T) {
	h := newHarness(t, nil)
	id1, id2, gen := twoMembers(t, h, "g")
	h.do(commitReq("g", id1, gen, "t", map[int32]int64{0: 42}))
	h.restart()
	if st := h.state("g"); st != "Stable" {
		t.Fatalf("state after restart %s", st)
	}
	// Members carry on in the same generation.
	for _, id := range []string{id1, id2} {
		if hb := h.do(hbReq("g", id, gen)).(*kmsg.HeartbeatResponse); hb.ErrorCode != 0 {
			t.Fatalf("heartbeat after restart: %d", hb.ErrorCode)
		}
	}
	if got := h.fetch("g", "t", 0); got["t"][0] != 42 {
		t.Fatalf("offset after restart: %v", got)
	}
	// Members that never come back expire after their session timeout.
	h.clk.Advance(11 * time.Second)
	if st := h.state("g"); st != "Empty" {
		t.Fatalf("state after sessions expired: %s", st)
	}
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t, nil)
	h.do(commitReq("a", "", -1, "t", map[int32]int64{0: 1}))
	twoMembers(t, h, "live")
	r := kmsg.NewPtrDeleteGroupsRequest()
	r.Version = 2
	r.Groups = []string{"a", "live", "none", ""}
	resp := h.do(r).(*kmsg.DeleteGroupsResponse)
	want := []int16{0, kerr.NonEmptyGroup.Code, kerr.GroupIDNotFound.Code, kerr.InvalidGroupID.Code}
	for i, g := range resp.Groups {
		if g.ErrorCode != want[i] {
			t.Fatalf("delete %q: %d want %d", g.Group, g.ErrorCode, want[i])
		}
	}
	recs := h.store.records(t, PartitionFor("a", 50))
	last := recs[len(recs)-1]
	if last.Value != nil {
		t.Fatal("no tombstone written")
	}
	h.restart()
	if h.c.lookup("a") != nil {
		t.Fatal("deleted group back after restart")
	}
	if got := h.fetch("a", "t", 0); got["t"][0] != -1 {
		t.Fatalf("deleted offsets: %v", got)
	}
}

func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, nil)
	id1, _, gen := twoMembers(t, h, "g")
	h.do(commitReq("g", id1, gen, "t", map[int32]int64{0: 1}))
	h.do(commitReq("g", id1, gen, "other", map[int32]int64{0: 1}))
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Group = "g"
	for _, topic := range []string{"t", "other"} {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
		r.Topics = append(r.Topics, rt)
	}
	resp := h.do(r).(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || resp.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", resp)
	}
	got := h.fetch("g", "")
	if _, ok := got["other"]; ok || got["t"][0] != 1 {
		t.Fatalf("after delete: %v", got)
	}
	r.Group = "nope"
	if resp := h.do(r).(*kmsg.OffsetDeleteResponse); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %d", resp.ErrorCode)
	}
}

func TestOffsetExpiry(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.OffsetsRetention = time.Hour })
	h.do(commitReq("simple", "", -1, "t", map[int32]int64{0: 1}))
	id1, id2, gen := twoMembers(t, h, "g")
	h.do(commitReq("g", id1, gen, "t", map[int32]int64{0: 1}))
	// Consumers of g leave: its offsets expire one hour after it became Empty.
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = 3
	r.Group = "g"
	r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: id1}, {MemberID: id2}}
	h.do(r)
	h.clk.Advance(50 * time.Minute)
	if h.c.lookup("g") == nil || h.c.lookup("simple") == nil {
		t.Fatal("expired too early")
	}
	h.clk.Advance(20 * time.Minute)
	if h.c.lookup("g") != nil || h.c.lookup("simple") != nil {
		t.Fatal("groups not expired")
	}
	h.restart()
	if h.c.lookup("g") != nil || h.c.lookup("simple") != nil {
		t.Fatal("expired groups back after restart")
	}
}

func TestLoadInProgress(t *testing.T) {
	clk := newFakeClock()
	c, err := NewCoordinator(testConfig(clk), newMemStore(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, _ := c.Handle(t.Context(), hbReq("g", "m", 1))
	if resp.(*kmsg.HeartbeatResponse).ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatal("no COORDINATOR_LOAD_IN_PROGRESS before Load")
	}
}

func TestCloseAnswersParkedJoin(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = time.Second })
	_, ch := h.joinNew("g", "t")
	h.waitParked("g", 1)
	h.c.Close()
	if j := recv(t, ch); j.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked join after Close: %d", j.ErrorCode)
	}
}
