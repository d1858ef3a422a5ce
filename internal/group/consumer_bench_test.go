package group

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkConsumerHeartbeat: one keepalive ConsumerGroupHeartbeat (no
// change to store) of a member of a KIP-848 group with members members
// over one topic of 2,000 partitions, all reconciled.
func BenchmarkConsumerHeartbeat(b *testing.B) {
	for _, members := range []int{10, 200} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			benchConsumerHeartbeat(b, members)
		})
	}
}

func benchConsumerHeartbeat(b *testing.B, members int) {
	clk := newFakeClock()
	cfg := testConfig(clk)
	big := TopicInfo{Name: "big", ID: [16]byte{9}, Partitions: 2000}
	cfg.Topics = func() []TopicInfo { return []TopicInfo{big} }
	c, err := NewCoordinator(cfg, newMemStore(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	hb := func(member string, epoch int32, owned []int32, join bool) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version = 1
		r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "g", member, epoch, 30_000
		if join {
			r.SubscribedTopicNames = []string{"big"}
		}
		if owned != nil {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: big.ID, Partitions: owned}}
		}
		resp, err := c.Handle(context.Background(), r)
		if err != nil || resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode != 0 {
			b.Fatal(err, resp)
		}
		return resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	// Members join one by one, then each reports what it owns until the
	// group is reconciled.
	epochs := map[string]int32{}
	owned := map[string][]int32{}
	for i := range members {
		id := fmt.Sprintf("m%03d", i)
		r := hb(id, 0, []int32{}, true)
		epochs[id] = r.MemberEpoch
	}
	for range 3 {
		for id, e := range epochs {
			r := hb(id, e, append([]int32{}, owned[id]...), false)
			epochs[id] = r.MemberEpoch
			if r.Assignment != nil {
				owned[id] = nil
				for _, t := range r.Assignment.Topics {
					owned[id] = append(owned[id], t.Partitions...)
				}
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		hb("m000", epochs["m000"], nil, false)
	}
}
