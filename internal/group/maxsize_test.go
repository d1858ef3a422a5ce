package group_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupMaxSize: with group.max.size=1 the broker takes one member; a
// second JoinGroup is answered GROUP_MAX_SIZE_REACHED without a member id
// (Kafka's acceptJoiningMember). group.consumer.max.size=1 does the same
// for a second KIP-848 member.
func TestGroupMaxSize(t *testing.T) {
	b := startBroker(t, map[string]string{"group.max.size": "1", "group.consumer.max.size": "1"})
	b.createTopic("t", 2, 0)
	ctx := ctxFor(t, 60*time.Second)
	a := &rawMember{t: t, cl: b.Client(), group: "full"}
	if r := a.join(ctx); r == nil || r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %+v", r)
	}
	if r := a.join(ctx); r == nil || r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	c := &rawMember{t: t, cl: b.Client(), group: "full"}
	if r := c.join(ctx); r == nil || r.ErrorCode != kerr.GroupMaxSizeReached.Code || r.MemberID != "" {
		t.Fatalf("second member's join: %+v, want GROUP_MAX_SIZE_REACHED and no member id", r)
	}

	cl := b.Client()
	hb := func(member string) int16 {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "full848", member, 0, 30_000
		r.SubscribedTopicNames, r.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	if code := hb("c1-0123456789abcdefghij"); code != 0 {
		t.Fatalf("first KIP-848 member: %v", kerr.ErrorForCode(code))
	}
	if code := hb("c2-0123456789abcdefghij"); code != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("second KIP-848 member: %v, want GROUP_MAX_SIZE_REACHED", kerr.ErrorForCode(code))
	}
}
