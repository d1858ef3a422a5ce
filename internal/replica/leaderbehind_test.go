package replica_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/replica"
	"github.com/strata-io/strata/internal/servertest"
)

// refusalDialer passes a follower's fetches through and reports every
// partition the leader refused with NOT_LEADER_OR_FOLLOWER or
// UNKNOWN_LEADER_EPOCH.
type refusalDialer struct {
	replica.Dialer
	refused chan struct{}
}

func (d refusalDialer) Dial(ctx context.Context, id int32, conn int) (replica.Conn, error) {
	c, err := d.Dialer.Dial(ctx, id, conn)
	if err != nil {
		return nil, err
	}
	return refusalConn{c, d.refused}, nil
}

type refusalConn struct {
	replica.Conn
	refused chan struct{}
}

func (c refusalConn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, err := c.Conn.Request(ctx, req)
	if fr, ok := resp.(*kmsg.FetchResponse); ok && err == nil {
		for _, t := range fr.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == kerr.NotLeaderForPartition.Code || p.ErrorCode == kerr.UnknownLeaderEpoch.Code {
					select {
					case c.refused <- struct{}{}:
					default:
					}
				}
			}
		}
	}
	return resp, err
}

// TestFollowerAheadOfItsLeader: after an election the follower learns the
// new leader before that leader applied its leadership (each broker
// applies the metadata when its own watch delivers it), fetches, and is
// refused (NOT_LEADER_OR_FOLLOWER or UNKNOWN_LEADER_EPOCH). Its retry must
// not wait a whole replica.fetch.backoff.ms: the new leader's ISR holds
// this follower, so every acks=all produce waited for it (a controlled
// shutdown's failover took 1 s instead of 0.05-0.3 s in one round of
// three). Here replica.fetch.backoff.ms is 64 s and the produce's
// delivery timeout 30 s: it is acknowledged only if the follower retried
// sooner.
func TestFollowerAheadOfItsLeader(t *testing.T) {
	c := servertest.StartN(t, 3, servertest.Options{Logger: servertest.TestLogger(t, slog.LevelWarn)})
	hosts := make([]host, 3)
	for i, b := range c.Brokers {
		hosts[i] = stHost{b}
	}
	refused := map[int32]chan struct{}{}
	for id := int32(1); id <= 3; id++ {
		refused[id] = make(chan struct{}, 1)
	}
	r := newRigTuned(t, hosts, func(id int32, cfg *replica.ManagerConfig) {
		cfg.FetchBackoff = 64 * time.Second
		cfg.LagTimeMax = 10 * time.Minute // the ISR keeps the waiting follower
		cfg.Dialer = refusalDialer{cfg.Dialer, refused[id]}
	})
	acked, err := r.produce(1, 0, 10)
	if err != nil || len(acked) != 10 {
		t.Fatalf("produce: %d acked, %v", len(acked), err)
	}
	r.waitCaughtUp(1)
	before := r.state()

	// Nodes 2 and 3 stop applying metadata; node 1 dies; the controller
	// elects one of them.
	for _, id := range []int32{2, 3} {
		nd := r.node(id)
		nd.stop()
		<-nd.done
	}
	r.kill(r.node(1))
	st := r.waitState("a new leader", func(st meta.PartitionState) bool {
		return st.Leader > 1 && st.LeaderEpoch > before.LeaderEpoch && slices.Contains(st.ISR, 2) && slices.Contains(st.ISR, 3)
	})
	leader, follower := st.Leader, int32(2)
	if leader == 2 {
		follower = 3
	}
	// The follower learns the election first and is refused by the leader
	// that does not know it leads yet.
	for len(refused[follower]) > 0 {
		<-refused[follower]
	}
	r.runSync(r.node(follower))
	select {
	case <-refused[follower]:
	case <-time.After(60 * time.Second):
		t.Fatalf("node %d's fetch from node %d was never refused", follower, leader)
	}
	r.runSync(r.node(leader))
	// Not idempotent: the new leader's producer ids start where the old
	// one's did, and the same id and sequences would be answered as
	// duplicates of the first records.
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.node(leader).b.Addr()), kgo.DefaultProduceTopic(r.tp.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec := &kgo.Record{Value: []byte("v00010")}
	if err := cl.ProduceSync(r.ctx, rec).FirstErr(); err != nil {
		t.Fatalf("acks=all produce to the new leader %d with ISR %v: %v", leader, st.ISR, err)
	}
	acked[rec.Offset] = string(rec.Value)
	r.waitCaughtUp(leader)
	checkAcked(t, acked, r.readAll(leader))
}
