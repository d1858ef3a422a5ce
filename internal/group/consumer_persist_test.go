package group

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/record"
)

// describeConsumer renders a KIP-848 group as ConsumerGroupDescribe shows
// it (members sorted), or its error.
func (h *harness) describeConsumer(id string) string {
	h.t.Helper()
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{id}
	g := h.do(d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if g.ErrorCode != 0 {
		return kerr.ErrorForCode(g.ErrorCode).Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s epoch=%d assignment_epoch=%d assignor=%s;", g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName)
	for _, m := range g.Members {
		fmt.Fprintf(&b, " %s epoch=%d topics=%v assigned=%v target=%v;", m.MemberID, m.MemberEpoch, m.SubscribedTopics,
			assignmentString(m.Assignment), assignmentString(m.TargetAssignment))
	}
	return b.String()
}

func assignmentString(a kmsg.Assignment) string {
	var parts []string
	for _, t := range a.TopicPartitions {
		for _, p := range t.Partitions {
			parts = append(parts, fmt.Sprintf("%s/%d", t.Topic, p))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// liveConsumerRecords folds partition p's records to the latest value per
// KIP-848 key (tombstones removed).
func liveConsumerRecords(t *testing.T, s *memStore, p int32) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, r := range s.records(t, p) {
		if len(r.Key) < 2 || r.Key[1] < 3 || r.Key[1] > 8 || r.Key[0] != 0 {
			continue
		}
		if r.Value == nil {
			delete(out, string(r.Key))
		} else {
			out[string(r.Key)] = r.Value
		}
	}
	return out
}

// TestConsumerGroupSurvivesReload: a KIP-848 group's members, epochs,
// target and current assignments (also in the middle of a revocation) are
// stored as Kafka's consumer group records and come back on a new
// coordinator, which keeps serving the members' heartbeats at their
// epochs; what a compacted log holds loads the same group; a member that
// leaves and a group that goes away leave only tombstones.
func TestConsumerGroupSurvivesReload(t *testing.T) {
	h := newConsumerHarness(t)
	p := PartitionFor("g", h.cfg.NumPartitions)
	h.chb("g", "m1", 0, []string{"t"}, "uniform", []int32{})
	h.chb("g", "m2", 0, []string{"t"}, "uniform", []int32{})
	if r := h.chb("g", "m1", 1, nil, "", []int32{0, 1, 2, 3}); assigned(r) != "[0 1]" {
		t.Fatalf("m1 told to revoke: %s", assigned(r))
	}
	midRevocation := h.describeConsumer("g")
	h.restart()
	if got := h.describeConsumer("g"); got != midRevocation {
		t.Fatalf("after reload:\n got %s\nwant %s", got, midRevocation)
	}
	// The revocation completes on the new coordinator as it would have on
	// the old one.
	if r := h.chb("g", "m1", 1, nil, "", []int32{0, 1}); r.ErrorCode != 0 || r.MemberEpoch != 2 || assigned(r) != "[0 1]" {
		t.Fatalf("m1 after revoking: %d epoch %d %s", r.ErrorCode, r.MemberEpoch, assigned(r))
	}
	if r := h.chb("g", "m2", 2, nil, "", nil); r.ErrorCode != 0 || r.MemberEpoch != 2 || assigned(r) != "[2 3]" {
		t.Fatalf("m2 after release: %d epoch %d %s", r.ErrorCode, r.MemberEpoch, assigned(r))
	}
	stable := h.describeConsumer("g")
	if !strings.HasPrefix(stable, "Stable epoch=2 ") {
		t.Fatalf("not stable: %s", stable)
	}
	h.restart()
	if got := h.describeConsumer("g"); got != stable {
		t.Fatalf("after reload:\n got %s\nwant %s", got, stable)
	}
	for _, m := range []string{"m1", "m2"} {
		if r := h.chb("g", m, 2, nil, "", nil); r.ErrorCode != 0 || r.MemberEpoch != 2 {
			t.Fatalf("%s heartbeat after reload: %v epoch %d", m, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
		}
	}
	if got := h.describeConsumer("g"); got != stable {
		t.Fatalf("heartbeats changed the group:\n got %s\nwant %s", got, stable)
	}

	// A compacted log (the latest record of each key, tombstones dropped)
	// loads the same group.
	var compacted []record.Record
	for k, v := range liveConsumerRecords(t, h.store, p) {
		compacted = append(compacted, record.Record{Key: []byte(k), Value: v})
	}
	sort.Slice(compacted, func(i, j int) bool { return string(compacted[i].Key) < string(compacted[j].Key) })
	b, err := buildBatch(h.clk.Now(), compacted)
	if err != nil {
		t.Fatal(err)
	}
	full := h.store
	h.store = newMemStore()
	if _, err := h.store.Append(p, b); err != nil {
		t.Fatal(err)
	}
	h.restart()
	if got := h.describeConsumer("g"); got != stable {
		t.Fatalf("from the compacted log:\n got %s\nwant %s", got, stable)
	}
	h.store = full
	h.restart()

	// A write that fails is answered with an error and leaves the group as
	// stored.
	h.store.failWait = errStoreDown
	if r := h.chb("g", "m3", 0, []string{"t"}, "", []int32{}); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join while the store fails: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	h.store.failWait = nil
	if got := h.describeConsumer("g"); got != stable {
		t.Fatalf("after a failed write:\n got %s\nwant %s", got, stable)
	}

	// m2 leaves: its three records are tombstoned.
	if r := h.chb("g", "m2", -1, nil, "", nil); r.ErrorCode != 0 {
		t.Fatalf("m2 leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	for k := range liveConsumerRecords(t, h.store, p) {
		var key consumerKey
		if err := key.ReadFrom([]byte(k)); err != nil || key.Member == "m2" {
			t.Fatalf("record %+v left after m2 left (%v)", key, err)
		}
	}
	h.restart()
	if r := h.chb("g", "m1", 2, nil, "", []int32{0, 1}); r.ErrorCode != 0 || r.MemberEpoch != 3 || assigned(r) != "[0 1 2 3]" {
		t.Fatalf("m1 after m2 left and a reload: %v epoch %d %s", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, assigned(r))
	}
	// Members restored by a load time out as any other (their session
	// timer restarts at the load).
	h.restart()
	h.clk.Advance(46 * time.Second)
	if got := h.describeConsumer("g"); !strings.HasPrefix(got, "Empty epoch=4 ") {
		t.Fatalf("after the session timeout: %s", got)
	}
	// The group, without members or offsets, is deleted: nothing of it is
	// left but tombstones.
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"g"}
	if code := h.do(dg).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	if live := liveConsumerRecords(t, h.store, p); len(live) != 0 {
		t.Fatalf("%d consumer group records left after the group was deleted", len(live))
	}
	h.restart()
	if got := h.describeConsumer("g"); got != kerr.GroupIDNotFound.Error() {
		t.Fatalf("deleted group after reload: %s", got)
	}
}

// TestConsumerGroupRecordOrder: a member leaving writes its current
// assignment, target assignment and subscription tombstones in that order
// before the new group epoch, as Kafka's GroupMetadataManager.removeMember.
func TestConsumerGroupRecordOrder(t *testing.T) {
	h := newConsumerHarness(t)
	p := PartitionFor("g", h.cfg.NumPartitions)
	h.chb("g", "m1", 0, []string{"t"}, "", []int32{})
	h.chb("g", "m2", 0, []string{"t"}, "", []int32{})
	before := len(h.store.records(t, p))
	h.chb("g", "m2", -1, nil, "", nil)
	var got []string
	for _, r := range h.store.records(t, p)[before:] {
		var k consumerKey
		if err := k.ReadFrom(r.Key); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d/%s/%v", k.Type, k.Member, r.Value == nil))
	}
	want := "[8/m2/true 7/m2/true 5/m2/true 3//false 7/m1/false 6//false 8/m1/false]"
	if fmt.Sprint(got) != want {
		t.Fatalf("records of a leave:\n got %v\nwant %s", got, want)
	}
}

// TestStaticLeaveRecordIsKafkas: a static member's temporary leave
// (epoch -2) is stored as Kafka's consumerGroupStaticMemberGroupLeave
// writes it: the current assignment record at member epoch -2 with the
// member's previous epoch unchanged and no partitions pending revocation
// (those go to their new owner at once). A reload restores it as such.
func TestStaticLeaveRecordIsKafkas(t *testing.T) {
	h := newConsumerHarness(t)
	p := PartitionFor("g", h.cfg.NumPartitions)
	static := func(epoch int32, owned []int32, subscribe []string) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version = 1
		inst := "i1"
		r.Group, r.MemberID, r.MemberEpoch, r.InstanceID = "g", "s1", epoch, &inst
		r.RebalanceTimeoutMillis = 30_000
		r.SubscribedTopicNames = subscribe
		if owned != nil {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			if len(owned) > 0 {
				r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicT.ID, Partitions: owned})
			}
		}
		return h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	if r := static(0, []int32{}, []string{"t"}); r.MemberEpoch != 1 || assigned(r) != "[0 1 2 3]" {
		t.Fatalf("s1 join: %v epoch %d %s", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, assigned(r))
	}
	h.chb("g", "m2", 0, []string{"t"}, "uniform", []int32{})
	// s1 (epoch 1, previous epoch 0) is told to revoke t:2 and t:3 and
	// leaves before it reports them released.
	if r := static(1, []int32{0, 1, 2, 3}, nil); r.MemberEpoch != 1 || assigned(r) != "[0 1]" {
		t.Fatalf("s1 told to revoke: epoch %d %s", r.MemberEpoch, assigned(r))
	}
	if r := static(-2, nil, nil); r.ErrorCode != 0 || r.MemberEpoch != -2 {
		t.Fatalf("s1 static leave: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	var cur consumerCurrentAssignmentValue
	found := false
	for k, v := range liveConsumerRecords(t, h.store, p) {
		var key consumerKey
		if err := key.ReadFrom([]byte(k)); err != nil {
			t.Fatal(err)
		}
		if key.Type == recConsumerGroupCurrentAssignment && key.Member == "s1" {
			if err := cur.ReadFrom(v); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found || cur.MemberEpoch != -2 || cur.PreviousMemberEpoch != 0 || len(cur.PartitionsPendingRevocation) != 0 ||
		len(cur.AssignedPartitions) != 1 || fmt.Sprint(cur.AssignedPartitions[0].Partitions) != "[0 1]" {
		t.Fatalf("s1's current assignment record after its static leave: %+v (found %v)", cur, found)
	}
	// The revoked partitions are free: m2 gets them without waiting.
	if r := h.chb("g", "m2", 2, nil, "", []int32{}); r.MemberEpoch != 2 || assigned(r) != "[2 3]" {
		t.Fatalf("m2 after s1 left: epoch %d %s", r.MemberEpoch, assigned(r))
	}
	before := h.describeConsumer("g")
	h.restart()
	if got := h.describeConsumer("g"); got != before || !strings.Contains(got, "s1 epoch=-2 ") {
		t.Fatalf("after reload:\n got %s\nwant %s", got, before)
	}
	// A heartbeat at the old epoch is fenced; the instance rejoining (a new
	// process, new member id) takes over s1's partitions at the group's
	// assignment epoch.
	if r := static(1, nil, nil); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("s1 at its old epoch after leaving: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "g", "s1b", 0
	inst := "i1"
	r.InstanceID, r.RebalanceTimeoutMillis, r.SubscribedTopicNames = &inst, 30_000, []string{"t"}
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp := h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 || resp.MemberEpoch != 2 || assigned(resp) != "[0 1]" {
		t.Fatalf("s1b rejoin: %v epoch %d %s", kerr.ErrorForCode(resp.ErrorCode), resp.MemberEpoch, assigned(resp))
	}
}
