package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadyMeansLeaders: a Kafka operator's expectation that once /readyz
// answers 200, produce works. A one-node cluster (`strata serve` with no
// KRaft setting) restarted on its directory after SIGKILL and after
// SIGTERM, then every node of a three-node cluster killed (and, with
// STRATA_LONG, stopped with SIGTERM) and restarted at once: as soon as
// /readyz says ready (polled every 10 ms), each node is sent once, without
// a retry, a ListOffsets and a Produce for the partitions its own Metadata
// says it leads, and every answer is free of errors (no
// LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER). The one-node produce is
// acks=all; the three-node one acks=1, since after a restart of every node
// each leader was elected alone and acks=all answers the retriable
// NOT_ENOUGH_REPLICAS until the followers rejoin the ISR (the test waits
// for that and logs how long it took).
func TestReadyMeansLeaders(t *testing.T) {
	ctx := ctxFor(t, 4*time.Minute)
	const parts = 16
	t.Run("one node", func(t *testing.T) {
		dir := t.TempDir()
		p := startBroker(t, dir)
		waitReadyz(t, ctx, p.Metrics)
		createTopic(t, ctx, p.Kafka, "r", parts, 1)
		checkFirstRequests(t, ctx, []string{p.Kafka}, "r", parts, -1)
		for _, stop := range []string{"SIGKILL", "SIGTERM"} {
			if stop == "SIGKILL" {
				p.Kill()
			} else if code := p.Term(); code != 0 {
				t.Fatalf("exit code after SIGTERM: %d", code)
			}
			began := time.Now()
			p = startBroker(t, dir)
			waitReadyz(t, ctx, p.Metrics)
			t.Logf("after %s: ready %v after the start", stop, time.Since(began).Round(time.Millisecond))
			checkFirstRequests(t, ctx, []string{p.Kafka}, "r", parts, -1)
		}
	})
	t.Run("three nodes", func(t *testing.T) {
		dir := t.TempDir()
		ports := randomPorts(t, 3)
		nodes := make([]*node, 3)
		for i := range nodes {
			d := filepath.Join(dir, fmt.Sprint(i+1))
			nodes[i] = &node{id: int32(i + 1), dir: d, args: combinedArgs(i+1, ports, d, "--min.insync.replicas", "2")}
		}
		startNodes(t, nodes...)
		addrs := make([]string, 3)
		for i, n := range nodes {
			waitReadyz(t, ctx, n.Metrics)
			addrs[i] = n.Kafka
		}
		createTopic(t, ctx, addrs[0], "r3", parts, 3)
		waitAllInSync(t, ctx, addrs, "r3")
		stops := []string{"SIGKILL"}
		if os.Getenv("STRATA_LONG") != "" {
			stops = append(stops, "SIGTERM") // +6 s: long runs only
		}
		for _, stop := range stops {
			for _, n := range nodes {
				if stop == "SIGKILL" {
					n.Kill()
				} else {
					n.SignalTerm()
				}
			}
			for _, n := range nodes {
				if stop == "SIGTERM" {
					n.WaitExit()
				}
			}
			began := time.Now()
			startNodes(t, nodes...)
			for _, n := range nodes {
				waitReadyz(t, ctx, n.Metrics)
			}
			t.Logf("after %s of every node: all ready %v after the start", stop, time.Since(began).Round(time.Millisecond))
			// acks=1: right after a restart of every node each leader
			// was elected alone (KIP-966 ELR) and acks=all answers the
			// retriable NOT_ENOUGH_REPLICAS until the followers have
			// caught up and rejoined the ISR.
			checkFirstRequests(t, ctx, addrs, "r3", parts, 1)
			waitAllInSync(t, ctx, addrs, "r3")
			t.Logf("after %s of every node: every ISR full %v after the start", stop, time.Since(began).Round(time.Millisecond))
		}
	})
}

// waitAllInSync waits until the metadata of topic lists every replica of
// every partition in the ISR.
func waitAllInSync(t *testing.T, ctx context.Context, addrs []string, topic string) {
	t.Helper()
	waitFor(t, ctx, "every replica of "+topic+" in the ISR", func() error {
		for _, a := range addrs {
			md := metadata(t, ctx, a, topic)
			for _, p := range md.Topics[0].Partitions {
				if p.ErrorCode != 0 || len(p.ISR) != len(p.Replicas) {
					return fmt.Errorf("%s-%d at %s: error %d, isr %v of %v", topic, p.Partition, a, p.ErrorCode, p.ISR, p.Replicas)
				}
			}
		}
		return nil
	})
}

// waitReadyz polls base+"/readyz" every 10 ms until it answers 200.
func waitReadyz(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	last := ""
	for {
		code, body, err := httpGet(ctx, base+"/readyz")
		if err == nil && code == http.StatusOK {
			return
		}
		if s := fmt.Sprint(code, " ", body, err); s != last {
			t.Logf("%s/readyz: %s", base, s)
			last = s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s/readyz never answered 200: %s", base, last)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// createTopic creates a topic through addr and waits until its metadata
// lists every partition with a leader.
func createTopic(t *testing.T, ctx context.Context, addr, topic string, parts int32, rf int16) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, parts, rf
	req.Topics = append(req.Topics, rt)
	resp := rawRequest(t, ctx, addr, req).(*kmsg.CreateTopicsResponse)
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// checkFirstRequests asks each node of addrs for the topic's metadata,
// then sends the node, once, a ListOffsets and a Produce (acks) for the
// partitions it leads by its own metadata, and fails on any error: a node
// that says ready leads what it says it leads. Every partition must have a
// leader in every node's metadata.
func checkFirstRequests(t *testing.T, ctx context.Context, addrs []string, topic string, parts int32, acks int16) {
	t.Helper()
	led := 0
	for _, addr := range addrs {
		md := metadata(t, ctx, addr, topic)
		self := int32(-1)
		for _, b := range md.Brokers {
			if fmt.Sprintf("%s:%d", b.Host, b.Port) == addr {
				self = b.NodeID
			}
		}
		if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != int(parts) {
			t.Fatalf("metadata of %s from %s: %+v", topic, addr, md.Topics)
		}
		var ps []int32
		for _, p := range md.Topics[0].Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Errorf("metadata of %s-%d from %s right after ready: %v", topic, p.Partition, addr, err)
			}
			if p.Leader == self {
				ps = append(ps, p.Partition)
			}
		}
		led += len(ps)
		if len(ps) > 0 {
			sendFirst(t, ctx, addr, self, topic, ps, acks)
		}
	}
	if led != int(parts) {
		t.Errorf("the nodes say they lead %d partitions of %s, want %d", led, topic, parts)
	}
}

// sendFirst sends leader (at addr) one ListOffsets and one Produce (acks)
// for partitions ps of topic and fails on any error.
func sendFirst(t *testing.T, ctx context.Context, addr string, leader int32, topic string, ps []int32, acks int16) {
	t.Helper()
	{
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.ReplicaID = -1
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		pr := kmsg.NewPtrProduceRequest()
		pr.Acks, pr.TimeoutMillis = acks, 30000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = topic
		for _, p := range ps {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = p, -1, -1
			lt.Partitions = append(lt.Partitions, lp)
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Partition, pp.Records = p, buildBatch([][]byte{[]byte("ready")})
			pt.Partitions = append(pt.Partitions, pp)
		}
		lo.Topics = append(lo.Topics, lt)
		pr.Topics = append(pr.Topics, pt)
		for _, rt := range rawRequest(t, ctx, addr, lo).(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					t.Errorf("ListOffsets %s-%d to leader %d right after ready: %v", topic, rp.Partition, leader, err)
				}
			}
		}
		for _, rt := range produceOnce(t, ctx, addr, pr).Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					t.Errorf("Produce (acks=%d) %s-%d to leader %d right after ready: %v (%s)", acks, topic, rp.Partition, leader, err, derefString(rp.ErrorMessage))
				}
			}
		}
	}
}

// produceOnce sends one Produce to the broker at addr only, with the
// request's acks (kgo sends a raw Produce with its client's acks setting).
func produceOnce(t *testing.T, ctx context.Context, addr string, req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	t.Helper()
	acks := kgo.AllISRAcks()
	if req.Acks == 1 {
		acks = kgo.LeaderAck()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("Produce to %s: %v", addr, err)
	}
	return resp.(*kmsg.ProduceResponse)
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
