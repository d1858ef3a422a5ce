package group_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// advertises reports whether the broker serves API key.
func advertises(t *testing.T, adm *kadm.Client, key kmsg.Key) bool {
	t.Helper()
	vs, err := adm.ApiVersions(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, bv := range vs {
		if _, ok := bv.KeyMaxVersion(int16(key)); ok {
			return true
		}
	}
	return false
}

// TestKgoConsumerProtocol runs franz-go KIP-848 members (server-side
// assignment) against the broker. It needs the server to pass topic
// metadata to the coordinator (group.Config.Topics); until then the broker
// does not advertise ConsumerGroupHeartbeat and the test is skipped.
func TestKgoConsumerProtocol(t *testing.T) {
	b := startBroker(t, nil)
	adm := b.Admin()
	if !advertises(t, adm, kmsg.ConsumerGroupHeartbeat) {
		t.Skip("ConsumerGroupHeartbeat is not advertised: the server does not set group.Config.Topics yet")
	}
	const parts, n = 6, 300
	b.createTopic("t", parts, n)
	s := newSeen()
	opts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}
	b.kgoMember(t, "g", "t", s, opts...)
	b.kgoMember(t, "g", "t", s, opts...)
	m3 := b.kgoMember(t, "g", "t", s, opts...)
	waitSplit(t, adm, "g", "t", 3, parts)
	waitFor(t, 60*time.Second, "all records consumed", func() bool { return s.len() == n })
	dg, err := adm.DescribeConsumerGroups(ctxFor(t, 10*time.Second), "g")
	if err != nil {
		t.Fatal(err)
	}
	if g := dg["g"]; g.Err != nil || len(g.Members) != 3 || g.State != "Stable" {
		t.Fatalf("ConsumerGroupDescribe: %+v", g)
	}
	m3.close() // leaves with epoch -1: the other two take its partitions
	waitSplit(t, adm, "g", "t", 2, parts)
	b.produce("t", n, n+60)
	waitFor(t, 60*time.Second, "records after the leave consumed", func() bool { return s.len() == n+60 })
}

// TestKgoConsumerProtocolRestart commits with member epochs, restarts the
// broker and resumes exactly after the committed offsets.
func TestKgoConsumerProtocolRestart(t *testing.T) {
	b := startBroker(t, nil)
	if !advertises(t, b.Admin(), kmsg.ConsumerGroupHeartbeat) {
		t.Skip("ConsumerGroupHeartbeat is not advertised: the server does not set group.Config.Topics yet")
	}
	const parts, n = 3, 300
	b.createTopic("t", parts, n)
	opts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit()}
	s1 := newSeen()
	m := b.kgoMemberLimit(t, "g", "t", s1, n/2, opts...)
	waitFor(t, 30*time.Second, "half the records", func() bool { return s1.len() >= n/2 })
	m.stopPolling()
	if err := m.cl.CommitUncommittedOffsets(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("commit: %v", err)
	}
	m.cl.Close()
	b.Restart()
	s2 := newSeen()
	b.kgoMember(t, "g", "t", s2, opts...)
	waitFor(t, 60*time.Second, "the rest of the records", func() bool { return s1.len()+s2.len() >= n })
	time.Sleep(300 * time.Millisecond)
	checkExactlyOnce(t, "t", n, s1, s2)
}
