package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var topicT = TopicInfo{Name: "t", ID: [16]byte{1}, Partitions: 4}

func newConsumerHarness(t *testing.T) *harness {
	return newHarness(t, func(c *Config) {
		c.Topics = func() []TopicInfo { return []TopicInfo{topicT, {Name: "u", ID: [16]byte{2}, Partitions: 2}} }
	})
}

// chb sends a ConsumerGroupHeartbeat v1. owned nil sends a keepalive (null
// Topics); subscribe nil leaves the subscription unchanged.
func (h *harness) chb(group, member string, epoch int32, subscribe []string, assignor string, owned []int32) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = group, member, epoch
	r.RebalanceTimeoutMillis = 30_000
	r.SubscribedTopicNames = subscribe
	if assignor != "" {
		r.ServerAssignor = &assignor
	}
	if owned != nil {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if len(owned) > 0 {
			r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicT.ID, Partitions: owned})
		}
	}
	return h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
}

func assigned(resp *kmsg.ConsumerGroupHeartbeatResponse) string {
	if resp.Assignment == nil {
		return "nil"
	}
	var ps []int32
	for _, t := range resp.Assignment.Topics {
		ps = append(ps, t.Partitions...)
	}
	return fmt.Sprint(ps)
}

func TestConsumerProtocolTwoMembers(t *testing.T) {
	h := newConsumerHarness(t)
	r := h.chb("g", "m1", 0, []string{"t"}, "uniform", []int32{})
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || assigned(r) != "[0 1 2 3]" {
		t.Fatalf("m1 join: %+v %s", r, assigned(r))
	}
	r = h.chb("g", "m2", 0, []string{"t"}, "uniform", []int32{})
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || assigned(r) != "[]" {
		t.Fatalf("m2 join: epoch %d %s (partitions still owned by m1)", r.MemberEpoch, assigned(r))
	}
	// m1 must revoke two partitions before its epoch advances.
	r = h.chb("g", "m1", 1, nil, "", []int32{0, 1, 2, 3})
	if r.MemberEpoch != 1 || assigned(r) != "[0 1]" {
		t.Fatalf("m1 revoke: epoch %d %s", r.MemberEpoch, assigned(r))
	}
	if st := h.state("g"); st != "Stable" { // classic view of a non-empty group
		t.Fatalf("internal state %s", st)
	}
	r = h.chb("g", "m1", 1, nil, "", []int32{0, 1})
	if r.MemberEpoch != 2 || assigned(r) != "[0 1]" {
		t.Fatalf("m1 after revoking: epoch %d %s", r.MemberEpoch, assigned(r))
	}
	r = h.chb("g", "m2", 2, nil, "", nil)
	if r.MemberEpoch != 2 || assigned(r) != "[2 3]" {
		t.Fatalf("m2 after release: epoch %d %s", r.MemberEpoch, assigned(r))
	}
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"g", "none"}
	dr := h.do(d).(*kmsg.ConsumerGroupDescribeResponse)
	if g := dr.Groups[0]; g.State != "Stable" || g.Epoch != 2 || len(g.Members) != 2 || g.AssignorName != "uniform" {
		t.Fatalf("describe: %+v", g)
	}
	if dr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe unknown: %d", dr.Groups[1].ErrorCode)
	}
	// Wrong epoch is fenced; an unknown member is unknown.
	if r := h.chb("g", "m2", 7, nil, "", nil); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("bad epoch: %d", r.ErrorCode)
	}
	if r := h.chb("g", "zz", 2, nil, "", nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %d", r.ErrorCode)
	}
	// Commits carry the member epoch.
	c := commitReq("g", "m1", 2, "t", map[int32]int64{0: 5})
	c.Version = 9
	if code := h.do(c).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %d", code)
	}
	c.Generation = 1
	if code := h.do(c).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("stale commit: %d", code)
	}
	// Kafka's ConsumerGroup.validateOffsetCommit: a KIP-848 member must
	// commit with v9+.
	c.Generation, c.Version = 2, 8
	if code := h.do(c).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.UnsupportedVersion.Code {
		t.Fatalf("commit v8 of a KIP-848 member: %v", kerr.ErrorForCode(code))
	}
	// OffsetFetch v9 with a member id and epoch is checked
	// (validateOffsetFetch); without them (an admin client) it is not.
	fetch := func(member *string, epoch int32) int16 {
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version = 9
		fg := kmsg.NewOffsetFetchRequestGroup()
		fg.Group, fg.MemberID, fg.MemberEpoch = "g", member, epoch
		f.Groups = append(f.Groups, fg)
		return h.do(f).(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode
	}
	m1, zz := "m1", "zz"
	for _, tc := range []struct {
		member *string
		epoch  int32
		want   int16
	}{{&m1, 2, 0}, {nil, -1, 0}, {&m1, 1, kerr.StaleMemberEpoch.Code}, {&zz, 2, kerr.UnknownMemberID.Code}} {
		if code := fetch(tc.member, tc.epoch); code != tc.want {
			t.Fatalf("OffsetFetch v9 member %v epoch %d: %v, want %v", tc.member, tc.epoch, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.want))
		}
	}
	// A commit with a generation to a group that does not exist:
	// GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before.
	nc := commitReq("nogroup", "m1", 2, "t", map[int32]int64{0: 5})
	if code := h.do(nc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.IllegalGeneration.Code {
		t.Fatalf("v8 commit to no group: %v", kerr.ErrorForCode(code))
	}
	nc.Version = 9
	if code := h.do(nc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.GroupIDNotFound.Code {
		t.Fatalf("v9 commit to no group: %v", kerr.ErrorForCode(code))
	}
	// A classic member cannot join.
	if j := recv(t, h.joinAsync(joinReq("g", "", nil, "t"))); j.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join: %d", j.ErrorCode)
	}
	// ListGroups reports the type.
	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version = 5
	lr.TypesFilter = []string{"consumer"}
	if l := h.do(lr).(*kmsg.ListGroupsResponse); len(l.Groups) != 1 || l.Groups[0].GroupState != "Stable" {
		t.Fatalf("list: %+v", l.Groups)
	}
	// m2 leaves: m1 gets everything.
	if r := h.chb("g", "m2", -1, nil, "", nil); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	r = h.chb("g", "m1", 2, nil, "", []int32{0, 1})
	if r.MemberEpoch != 3 || assigned(r) != "[0 1 2 3]" {
		t.Fatalf("after leave: epoch %d %s", r.MemberEpoch, assigned(r))
	}
}

func TestConsumerProtocolSessionTimeout(t *testing.T) {
	h := newConsumerHarness(t)
	h.chb("g", "m1", 0, []string{"t"}, "range", []int32{})
	h.chb("g", "m2", 0, []string{"t"}, "range", []int32{})
	r := h.chb("g", "m1", 1, nil, "", []int32{0, 1, 2, 3})
	if assigned(r) != "[0 1]" {
		t.Fatalf("range split: %s", assigned(r))
	}
	r = h.chb("g", "m1", 1, nil, "", []int32{0, 1})
	for i := 0; i < 3; i++ { // m1 keeps heartbeating, m2 is silent
		h.clk.Advance(20 * time.Second)
		r = h.chb("g", "m1", r.MemberEpoch, nil, "", nil)
	}
	r = h.chb("g", "m1", r.MemberEpoch, nil, "", []int32{0, 1})
	if assigned(r) != "[0 1 2 3]" {
		t.Fatalf("after m2 expired: epoch %d %s", r.MemberEpoch, assigned(r))
	}
}

func TestConsumerProtocolRevocationTimeout(t *testing.T) {
	h := newConsumerHarness(t)
	h.chb("g", "m1", 0, []string{"t"}, "", []int32{})
	h.chb("g", "m2", 0, []string{"t"}, "", []int32{})
	h.chb("g", "m1", 1, nil, "", []int32{0, 1, 2, 3}) // told to revoke, never does
	h.clk.Advance(31 * time.Second)                   // rebalance timeout: m1 is fenced
	r := h.chb("g", "m2", 2, nil, "", []int32{})
	if r.ErrorCode != 0 || assigned(r) != "[0 1 2 3]" {
		t.Fatalf("m2 after m1 fenced: %d %s", r.ErrorCode, assigned(r))
	}
}

func TestConsumerProtocolStaticRestart(t *testing.T) {
	h := newConsumerHarness(t)
	inst := "i1"
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.InstanceID, r.RebalanceTimeoutMillis = "g", "a", &inst, 30000
	r.SubscribedTopicNames, r.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	epoch := resp.MemberEpoch
	// Leaves temporarily (epoch -2), comes back with a new member id.
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Version = 1
	leave.Group, leave.MemberID, leave.MemberEpoch = "g", "a", -2
	// Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: epoch -2
	// needs the instance id.
	if lr := h.do(leave).(*kmsg.ConsumerGroupHeartbeatResponse); lr.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("static leave without instance id: %+v", lr)
	}
	leave.InstanceID = &inst
	if lr := h.do(leave).(*kmsg.ConsumerGroupHeartbeatResponse); lr.ErrorCode != 0 || lr.MemberEpoch != -2 {
		t.Fatalf("static leave: %+v", lr)
	}
	r.MemberID = "b"
	resp = h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 || resp.MemberEpoch != epoch || assigned(resp) != "[0 1 2 3]" {
		t.Fatalf("static rejoin: %+v %s", resp, assigned(resp))
	}
	// Another process with the same instance id is refused.
	r.MemberID = "c"
	if resp := h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("duplicate instance: %d", resp.ErrorCode)
	}
}

func TestConsumerProtocolValidation(t *testing.T) {
	h := newConsumerHarness(t)
	if r := h.chb("", "m", 0, []string{"t"}, "", []int32{}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty group: %d", r.ErrorCode)
	}
	if r := h.chb("g", "m", 0, []string{"t"}, "sticky", []int32{}); r.ErrorCode != kerr.UnsupportedAssignor.Code {
		t.Fatalf("assignor: %d", r.ErrorCode)
	}
	if r := h.chb("g", "m", 0, nil, "", []int32{}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("no subscription: %d", r.ErrorCode)
	}
	// Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: a join
	// without a rebalance timeout or with owned partitions, an empty
	// instance or rack id.
	empty := ""
	for name, mod := range map[string]func(*kmsg.ConsumerGroupHeartbeatRequest){
		"no rebalance timeout": func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 },
		"owned partitions": func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicT.ID, Partitions: []int32{0}}}
		},
		"empty instance id": func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = &empty },
		"empty rack id":     func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = &empty },
	} {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version = 1
		r.Group, r.MemberID, r.RebalanceTimeoutMillis = "g", "m", 30_000
		r.SubscribedTopicNames, r.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		mod(r)
		if resp := h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("%s: %v", name, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	twoMembers(t, h, "classic")
	if r := h.chb("classic", "m", 0, []string{"t"}, "", []int32{}); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("classic group: %d", r.ErrorCode)
	}
	if _, ok := h.c.APIVersions()[kmsg.ConsumerGroupHeartbeat.Int16()]; !ok {
		t.Fatal("ConsumerGroupHeartbeat not advertised with Topics set")
	}
}

func TestAssignors(t *testing.T) {
	ix := newTopicIndex([]TopicInfo{{Name: "a", Partitions: 5}, {Name: "b", Partitions: 1}})
	ms := map[string]*cmember{
		"x": {id: "x", topics: []string{"a", "b"}},
		"y": {id: "y", topics: []string{"a"}},
	}
	u := assign(assignorUniform, ms, ix, nil)
	if len(u["x"])+len(u["y"]) != 6 || len(u["y"]) < 2 || len(u["x"]) < 2 {
		t.Fatalf("uniform: %v", u)
	}
	for k := range u["y"] {
		if k.topic == "b" {
			t.Fatal("uniform gave y an unsubscribed topic")
		}
	}
	// Sticky: recomputing with the previous target changes nothing.
	if again := assign(assignorUniform, ms, ix, u); again["x"].key() != u["x"].key() {
		t.Fatalf("uniform not sticky: %v vs %v", again, u)
	}
	r := assign(assignorRange, ms, ix, nil)
	if r["x"].key() != "a/0,a/1,a/2,b/0," || r["y"].key() != "a/3,a/4," {
		t.Fatalf("range: x=%s y=%s", r["x"].key(), r["y"].key())
	}
}

// TestConsumerRegexMatchesInternalTopics: Kafka resolves a member's
// subscribed regex against every topic name, internal ones included
// (franz-go's Test848RegexBrokerResolves relies on it).
func TestConsumerRegexMatchesInternalTopics(t *testing.T) {
	ix := newTopicIndex([]TopicInfo{topicT, {Name: "__consumer_offsets", ID: [16]byte{9}, Partitions: 50}, {Name: "tt", ID: [16]byte{3}, Partitions: 1}})
	m := &cmember{regex: `t|__consumer_offsets`}
	if got := fmt.Sprint(m.subscription(ix)); got != "[__consumer_offsets t]" {
		t.Fatalf("regex subscription = %s, want [__consumer_offsets t] (full match, internal topics included)", got)
	}
}
