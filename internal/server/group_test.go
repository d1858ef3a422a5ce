package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// waitMembers polls until check accepts the described group or the test
// context ends.
func waitMembers(t *testing.T, what string, check func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx := ctxT(t)
	last := ""
	for {
		ok, desc := check(ctx)
		if ok {
			return
		}
		last = desc
		select {
		case <-ctx.Done():
			t.Fatalf("%s: last seen %s", what, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestGroupClientInfo checks that DescribeGroups (classic group) and
// ConsumerGroupDescribe (KIP-848 group) show the members' real client id
// and host, the host the way Kafka prints it ("/127.0.0.1").
func TestGroupClientInfo(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	adm := tb.Admin()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	classic := tb.Client(kgo.ClientID("classic-client"), kgo.ConsumerGroup("g-classic"), kgo.ConsumeTopics("t"))
	next := tb.Client(kgo.ClientID("kip848-client"), kgo.ConsumerGroup("g-848"), kgo.ConsumeTopics("t"), kgo.ServerSideBalancer())
	for _, cl := range []*kgo.Client{classic, next} {
		go func() { // joins the group; returns when the client closes
			for !cl.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
	}

	waitMembers(t, "classic member described", func(ctx context.Context) (bool, string) {
		dg, err := adm.DescribeGroups(ctx, "g-classic")
		if err != nil {
			return false, err.Error()
		}
		g := dg["g-classic"]
		if g.Err != nil || g.State != "Stable" || len(g.Members) != 1 {
			return false, g.State
		}
		m := g.Members[0]
		if m.ClientID != "classic-client" || m.ClientHost != "/127.0.0.1" {
			t.Fatalf("DescribeGroups member: client id %q host %q, want classic-client /127.0.0.1", m.ClientID, m.ClientHost)
		}
		return true, ""
	})
	waitMembers(t, "KIP-848 member described", func(ctx context.Context) (bool, string) {
		dg, err := adm.DescribeConsumerGroups(ctx, "g-848")
		if err != nil {
			return false, err.Error()
		}
		g := dg["g-848"]
		if g.Err != nil || len(g.Members) != 1 {
			return false, g.State
		}
		m := g.Members[0]
		if m.ClientID != "kip848-client" || m.ClientHost != "/127.0.0.1" {
			t.Fatalf("ConsumerGroupDescribe member: client id %q host %q, want kip848-client /127.0.0.1", m.ClientID, m.ClientHost)
		}
		return true, ""
	})
}
