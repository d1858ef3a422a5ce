package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-io/strata/internal/freeport"
)

// node is one `strata serve` process of a multi-process cluster, with the
// command line that starts it again.
type node struct {
	id   int32
	dir  string
	args []string
	*proc
}

// clusterPorts are one combined node's ports: Kafka, controller, metrics.
type clusterPorts struct{ kafka, controller, metrics int }

// exactPorts are the ports of docs/cluster.md's "Three nodes on one
// machine" (issue 11's command lines): node n uses 19n92/19n93/19n94.
func exactPorts(n int) clusterPorts {
	return clusterPorts{19092 + 100*n, 19093 + 100*n, 19094 + 100*n}
}

// freePorts returns n ports reserved for this test (internal/freeport:
// below the ephemeral range, locked across test processes, so no other
// socket takes one between now and the node's bind or restart).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	return freeport.Take(t, n)
}

// randomPorts picks ports for n combined nodes.
func randomPorts(t testing.TB, n int) []clusterPorts {
	ps := freePorts(t, 3*n)
	out := make([]clusterPorts, n)
	for i := range out {
		out[i] = clusterPorts{ps[3*i], ps[3*i+1], ps[3*i+2]}
	}
	return out
}

// combinedArgs is the command line of combined node id (1-based) of a
// cluster whose voters are the controller ports of ports: exactly the
// command line of docs/cluster.md, with the log directory and ports
// given, plus extra.
func combinedArgs(id int, ports []clusterPorts, dir string, extra ...string) []string {
	var voters []string
	for i, p := range ports {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, p.controller))
	}
	p := ports[id-1]
	args := []string{"serve", "--node.id", strconv.Itoa(id), "--process.roles", "broker,controller",
		"--listeners", fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", p.kafka, p.controller),
		"--controller.listener.names", "CONTROLLER",
		"--controller.quorum.voters", strings.Join(voters, ","),
		"--log.dirs", dir, "--strata.metrics.listener", fmt.Sprintf("127.0.0.1:%d", p.metrics)}
	return append(args, extra...)
}

// brokerArgs is the command line of a broker-only node dialing the voters
// of ports.
func brokerArgs(id int, kafka int, ports []clusterPorts, dir string, extra ...string) []string {
	var voters []string
	for i, p := range ports {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, p.controller))
	}
	args := []string{"serve", "--node.id", strconv.Itoa(id), "--process.roles", "broker",
		"--listeners", fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", kafka),
		"--controller.listener.names", "CONTROLLER",
		"--controller.quorum.voters", strings.Join(voters, ","),
		"--log.dirs", dir, "--strata.metrics.listener", "127.0.0.1:0"}
	return append(args, extra...)
}

// startNodes starts the given nodes at once (a controller waits for a
// quorum of its peers before it serves) and waits until each listens.
func startNodes(t testing.TB, nodes ...*node) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { // owner: this call; ends when the node listens or fails
			defer wg.Done()
			errs[i] = fmt.Errorf("node %d did not start", n.id) // kept if tryStartProc gives up the goroutine
			n.proc, errs[i] = tryStartProc(t, n.dir, n.args...)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// restart starts a stopped node again with the same command line.
func (n *node) restart(t testing.TB) { startNodes(t, n) }

// metadata asks addr for topic's metadata (Metadata v12).
func metadata(t testing.TB, ctx context.Context, addr string, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	return rawRequest(t, ctx, addr, req).(*kmsg.MetadataResponse)
}

// rawRequest sends one request to the broker at addr only.
func rawRequest(t testing.TB, ctx context.Context, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	// Fetch stays at v12 (topics by name), as the callers write it.
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(1, 12)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(vs))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%s to %s: %v", kmsg.NameForKey(req.Key()), addr, err)
	}
	return resp
}

// waitFor retries cond every 100 ms until it returns nil or ctx ends
// (the brokers apply metadata asynchronously; this asserts an outcome,
// not a duration).
func waitFor(t testing.TB, ctx context.Context, what string, cond func() error) {
	t.Helper()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestClusterExactCommandLines starts the three-node cluster of
// docs/cluster.md with its exact command lines (only --log.dirs points
// into the test's directory) and checks what a client of a cluster sees:
// every broker lists the three brokers and the controller; topics created
// through any broker have their partitions led across the brokers;
// records go through the right leaders; a broker that does not lead a
// partition answers NOT_LEADER_OR_FOLLOWER with the current leader
// (KIP-951); FindCoordinator answers the same broker everywhere; a
// SIGKILLed broker's partitions (RF=1) answer LEADER_NOT_AVAILABLE with
// leader -1 until it returns, then are back with every record; with two
// of three controllers killed (quorum lost) existing leaders go on
// producing and consuming while CreateTopics fails with a retriable
// error, and all resumes when the quorum returns.
func TestClusterExactCommandLines(t *testing.T) {
	base := t.TempDir()
	ports := []clusterPorts{exactPorts(1), exactPorts(2), exactPorts(3)}
	var nodes []*node
	for i := 1; i <= 3; i++ {
		dir := filepath.Join(base, fmt.Sprintf("strata-n%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &node{id: int32(i), dir: dir, args: combinedArgs(i, ports, dir, "--strata.log.format", "json")})
	}
	start := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	startNodes(t, nodes...)
	phase("three nodes listening")
	ctx := ctxFor(t, 3*time.Minute)
	seeds := []string{nodes[0].Kafka, nodes[1].Kafka, nodes[2].Kafka}
	for i, n := range nodes {
		if want := fmt.Sprintf("127.0.0.1:%d", ports[i].kafka); n.Kafka != want {
			t.Fatalf("node %d listens on %s, want %s", n.id, n.Kafka, want)
		}
	}

	// A topic created through broker 2 is led by all three.
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(nodes[1].Kafka)))
	if r, err := adm.CreateTopic(ctx, 6, 1, nil, "spread"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	leaders := map[int32]int32{} // partition -> leader
	for _, n := range nodes {
		waitFor(t, ctx, fmt.Sprintf("broker %d's metadata", n.id), func() error {
			md := metadata(t, ctx, n.Kafka, "spread")
			if len(md.Brokers) != 3 {
				return fmt.Errorf("%d brokers listed", len(md.Brokers))
			}
			if md.ControllerID < 1 || md.ControllerID > 3 {
				return fmt.Errorf("controller id %d", md.ControllerID)
			}
			for _, b := range md.Brokers {
				if want := fmt.Sprintf("127.0.0.1:%d", ports[b.NodeID-1].kafka); fmt.Sprintf("%s:%d", b.Host, b.Port) != want {
					return fmt.Errorf("broker %d at %s:%d, want %s", b.NodeID, b.Host, b.Port, want)
				}
			}
			if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 6 {
				return fmt.Errorf("topics %+v", md.Topics)
			}
			per := map[int32]int{}
			for _, p := range md.Topics[0].Partitions {
				if p.ErrorCode != 0 || !slices.Equal(p.Replicas, []int32{p.Leader}) || !slices.Equal(p.ISR, p.Replicas) {
					return fmt.Errorf("partition %+v", p)
				}
				if l, ok := leaders[p.Partition]; ok && l != p.Leader {
					return fmt.Errorf("partition %d led by %d here, by %d elsewhere", p.Partition, p.Leader, l)
				}
				leaders[p.Partition] = p.Leader
				per[p.Leader]++
			}
			if len(per) != 3 {
				return fmt.Errorf("leaders not spread over the three brokers: %v", per)
			}
			return nil
		})
	}
	// Kafka's controller metrics and /readyz on every node's HTTP listener.
	waitFor(t, ctx, "controller metrics", func() error {
		active := 0.0
		for i, n := range nodes {
			base := fmt.Sprintf("http://127.0.0.1:%d", ports[i].metrics)
			if code, _, err := httpGet(ctx, base+"/readyz"); err != nil || code != 200 {
				return fmt.Errorf("node %d /readyz: %d %v", n.id, code, err)
			}
			m := scrape(t, ctx, base+"/metrics")
			active += m["kafka_controller_kafkacontroller_activecontrollercount"]
			if m["kafka_controller_kafkacontroller_globaltopiccount"] < 1 || m["kafka_controller_kafkacontroller_globalpartitioncount"] < 6 ||
				m["kafka_controller_kafkacontroller_offlinepartitionscount"] != 0 {
				return fmt.Errorf("node %d metrics %v", n.id, m)
			}
		}
		if active != 1 {
			return fmt.Errorf("%v active controllers", active)
		}
		return nil
	})
	dc := rawRequest(t, ctx, nodes[2].Kafka, kmsg.NewPtrDescribeClusterRequest()).(*kmsg.DescribeClusterResponse)
	if dc.ErrorCode != 0 || len(dc.Brokers) != 3 || dc.ControllerID < 1 || dc.ControllerID > 3 {
		t.Fatalf("DescribeCluster: %+v", dc)
	}

	phase("topic spread over the three brokers")
	// Records through the leaders: one per partition, read back.
	prod := newClient(t, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("spread"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(tag string) {
		t.Helper()
		for p := int32(0); p < 6; p++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("%s-%d", tag, p))}).FirstErr(); err != nil {
				t.Fatalf("produce %s to partition %d: %v", tag, p, err)
			}
		}
	}
	produce("first")
	consumeAll := func(want int) map[string]bool {
		t.Helper()
		cons := newClient(t, kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("spread"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := map[string]bool{}
		for len(got) < want {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d: %v", len(got), want, ctx.Err())
			}
			fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d: %v", tp, p, err) })
			fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
		}
		cons.Close()
		return got
	}
	if got := consumeAll(6); !got["first-0"] || !got["first-5"] {
		t.Fatalf("consumed %v", got)
	}

	phase("produced and consumed")
	// The wrong broker: NOT_LEADER_OR_FOLLOWER with the current leader.
	var p0Leader int32 = leaders[0]
	wrong := nodes[int(p0Leader)%3] // node ids are 1..3
	md := metadata(t, ctx, nodes[0].Kafka, "spread")
	p0Epoch := md.Topics[0].Partitions[0].LeaderEpoch
	checkNotLeader(t, ctx, wrong.Kafka, "spread", 0, p0Leader, p0Epoch, ports[p0Leader-1].kafka)

	// FindCoordinator: every broker names the same coordinator.
	var coord int32 = -2
	for _, n := range nodes {
		waitFor(t, ctx, "FindCoordinator", func() error {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version = 4
			req.CoordinatorKeys = []string{"a-group"}
			r := rawRequest(t, ctx, n.Kafka, req).(*kmsg.FindCoordinatorResponse)
			c := r.Coordinators[0]
			if c.ErrorCode != 0 {
				return kerr.ErrorForCode(c.ErrorCode)
			}
			if coord != -2 && c.NodeID != coord {
				t.Fatalf("broker %d names coordinator %d, another named %d", n.id, c.NodeID, coord)
			}
			coord = c.NodeID
			return nil
		})
	}

	// kill -9 of broker 3: its partitions go offline, then come back.
	victim := nodes[2]
	var onVictim []int32
	for p, l := range leaders {
		if l == victim.id {
			onVictim = append(onVictim, p)
		}
	}
	victim.Kill()
	phase("node 3 killed")
	waitFor(t, ctx, "broker 3's partitions offline", func() error {
		md := metadata(t, ctx, nodes[0].Kafka, "spread")
		if len(md.Brokers) != 2 {
			return fmt.Errorf("%d brokers listed", len(md.Brokers))
		}
		for _, p := range md.Topics[0].Partitions {
			if slices.Contains(onVictim, p.Partition) {
				if p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1 || !slices.Equal(p.OfflineReplicas, []int32{3}) {
					return fmt.Errorf("partition %+v", p)
				}
			} else if p.ErrorCode != 0 || p.Leader == 3 {
				return fmt.Errorf("partition %+v", p)
			}
		}
		return nil
	})
	offline := 0 // every topic's, the internal ones included
	for _, tp := range metadata(t, ctx, nodes[0].Kafka).Topics {
		for _, p := range tp.Partitions {
			if p.Leader == -1 {
				offline++
			}
		}
	}
	if got := scrape(t, ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0].metrics))["kafka_controller_kafkacontroller_offlinepartitionscount"]; got != float64(offline) || offline < len(onVictim) {
		t.Fatalf("OfflinePartitionsCount %v with node 3 down, Metadata shows %d leaderless", got, offline)
	}
	phase("node 3's partitions offline")
	victim.restart(t)
	phase("node 3 restarted")
	waitFor(t, ctx, "broker 3's partitions back", func() error {
		md := metadata(t, ctx, nodes[1].Kafka, "spread")
		for _, p := range md.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.Leader != leaders[p.Partition] {
				return fmt.Errorf("partition %+v", p)
			}
		}
		return nil
	})
	produce("second")
	if got := consumeAll(12); !got["first-0"] || !got["second-5"] {
		t.Fatalf("consumed %v", got)
	}

	// Quorum loss: nodes 2 and 3 killed. Node 1's leaders go on; topic
	// administration fails with a retriable error; nothing is lost.
	var onNode1 []int32
	for p, l := range leaders {
		if l == 1 {
			onNode1 = append(onNode1, p)
		}
	}
	phase("node 3's partitions back")
	nodes[1].Kill()
	nodes[2].Kill()
	phase("nodes 2 and 3 killed: no quorum")
	// Not idempotent: a new producer id needs a block from the store
	// unless the broker still has one, as Kafka's AllocateProducerIds
	// needs its controller quorum.
	one := newClient(t, kgo.SeedBrokers(nodes[0].Kafka), kgo.DefaultProduceTopic("spread"), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(time.Hour), kgo.MetadataMaxAge(time.Hour))
	for _, p := range onNode1 {
		if err := one.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("noquorum-%d", p))}).FirstErr(); err != nil {
			t.Fatalf("produce to node 1's partition %d without a quorum: %v", p, err)
		}
	}
	for _, p := range onNode1 {
		got := fetchAll(t, ctx, nodes[0].Kafka, "spread", p)
		if !slices.Contains(got, fmt.Sprintf("noquorum-%d", p)) || !slices.Contains(got, fmt.Sprintf("first-%d", p)) {
			t.Fatalf("partition %d without a quorum reads %v", p, got)
		}
	}
	creq := kmsg.NewPtrCreateTopicsRequest()
	creq.TimeoutMillis = 3000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "during-loss", 1, 1
	creq.Topics = append(creq.Topics, ct)
	cr := rawRequest(t, ctx, nodes[0].Kafka, creq).(*kmsg.CreateTopicsResponse)
	if err := kerr.ErrorForCode(cr.Topics[0].ErrorCode); !kerr.IsRetriable(err) {
		t.Fatalf("CreateTopics without a quorum: %v (%v), want a retriable error", err, cr.Topics[0].ErrorMessage)
	} else {
		t.Logf("CreateTopics without a quorum: %v: %s", err, *cr.Topics[0].ErrorMessage)
	}
	phase("served without a quorum")
	startNodes(t, nodes[1], nodes[2])
	phase("nodes 2 and 3 restarted")
	waitFor(t, ctx, "CreateTopics after the quorum returned", func() error {
		r, err := kadm.NewClient(newClient(t, kgo.SeedBrokers(nodes[2].Kafka))).CreateTopic(ctx, 3, 1, nil, "after-loss")
		if err != nil {
			return err
		}
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return r.Err
		}
		return nil
	})
	waitFor(t, ctx, "every partition led again", func() error {
		md := metadata(t, ctx, nodes[0].Kafka, "spread", "after-loss")
		for _, tp := range md.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 {
					return fmt.Errorf("%s %+v", *tp.Topic, p)
				}
			}
		}
		return nil
	})
	if got := consumeAll(12 + len(onNode1)); len(got) != 12+len(onNode1) {
		t.Fatalf("consumed %v", got)
	}
	phase("everything back")
	for _, n := range nodes {
		if code := n.Term(); code != 0 {
			t.Errorf("node %d exit code after SIGTERM = %d", n.id, code)
		}
	}
}

// checkNotLeader sends a Produce (v11) and a Fetch (v12) for topic-part to
// addr, which does not lead it: both answer NOT_LEADER_OR_FOLLOWER with
// the current leader and epoch (KIP-951), Produce with the leader's
// endpoint.
func checkNotLeader(t *testing.T, ctx context.Context, addr, topic string, part, leader, epoch int32, leaderPort int) {
	t.Helper()
	preq := kmsg.NewPtrProduceRequest()
	preq.Version, preq.Acks, preq.TimeoutMillis = 11, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = part
	rp.Records = []byte{0}
	rt.Partitions = append(rt.Partitions, rp)
	preq.Topics = append(preq.Topics, rt)
	presp := rawRequest(t, ctx, addr, preq).(*kmsg.ProduceResponse)
	pp := presp.Topics[0].Partitions[0]
	if pp.ErrorCode != kerr.NotLeaderForPartition.Code || pp.CurrentLeader.LeaderID != leader || pp.CurrentLeader.LeaderEpoch != epoch ||
		len(presp.Brokers) != 1 || presp.Brokers[0].NodeID != leader || presp.Brokers[0].Port != int32(leaderPort) {
		t.Fatalf("produce to a broker not leading %s-%d: %+v, brokers %+v; want NOT_LEADER_OR_FOLLOWER naming %d at epoch %d",
			topic, part, pp, presp.Brokers, leader, epoch)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.Version, freq.MaxWaitMillis, freq.MaxBytes = 12, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = part, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp := rawRequest(t, ctx, addr, freq).(*kmsg.FetchResponse)
	if f := fresp.Topics[0].Partitions[0]; f.ErrorCode != kerr.NotLeaderForPartition.Code ||
		f.CurrentLeader.LeaderID != leader || f.CurrentLeader.LeaderEpoch != epoch {
		t.Fatalf("fetch from a broker not leading %s-%d: %+v", topic, part, f)
	}
}

// fetchAll reads every record value of one partition from addr.
func fetchAll(t *testing.T, ctx context.Context, addr, topic string, part int32) []string {
	t.Helper()
	cl := newClient(t, kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {part: kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.Version = 7
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = part, -1
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	lo := rawRequest(t, ctx, addr, lreq).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if lo.ErrorCode != 0 {
		t.Fatalf("end offset of %s-%d on %s: %v", topic, part, addr, kerr.ErrorForCode(lo.ErrorCode))
	}
	hw := lo.Offset
	var out []string
	for n := int64(0); n < hw; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s-%d: read %d of %d records", topic, part, n, hw)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, string(r.Value))
			n = r.Offset + 1
		})
	}
	return out
}

// newClient returns a kgo client closed in t.Cleanup.
func newClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestClusterFourNodes: three combined nodes and a broker-only fourth, on
// random loopback ports. A topic created through the broker-only node
// spreads over the four; a config set through another broker is seen by
// all. kill -9 of the active controller: another takes over (Metadata's
// controller id moves to a live controller) and CreateTopics works (the
// times are logged, not asserted). Stopping and restarting every node
// keeps every topic, config and record. Refused with a message: a second
// broker with a registered node.id, a log directory of another cluster,
// and a controller whose voter entry disagrees with its metadata store.
func TestClusterFourNodes(t *testing.T) {
	base := t.TempDir()
	ports := randomPorts(t, 3)
	kafka4 := freePorts(t, 1)[0]
	var nodes []*node
	for i := 1; i <= 4; i++ {
		dir := filepath.Join(base, fmt.Sprintf("n%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var args []string
		if i <= 3 {
			args = combinedArgs(i, ports, dir, "--strata.log.format", "json")
		} else {
			args = brokerArgs(i, kafka4, ports, dir, "--strata.log.format", "json")
		}
		nodes = append(nodes, &node{id: int32(i), dir: dir, args: args})
	}
	start := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	startNodes(t, nodes...)
	phase("four nodes listening")
	ctx := ctxFor(t, 4*time.Minute)
	seeds := func() []string {
		var out []string
		for _, n := range nodes {
			if n.Alive() {
				out = append(out, n.Kafka)
			}
		}
		return out
	}

	adm4 := kadm.NewClient(newClient(t, kgo.SeedBrokers(nodes[3].Kafka)))
	if r, err := adm4.CreateTopic(ctx, 8, 1, nil, "four"); err != nil || r.Err != nil {
		t.Fatalf("create through the broker-only node: %v %v", err, r.Err)
	}
	waitFor(t, ctx, "partitions led by all four", func() error {
		md := metadata(t, ctx, nodes[0].Kafka, "four")
		per := map[int32]int{}
		for _, p := range md.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				return kerr.ErrorForCode(p.ErrorCode)
			}
			per[p.Leader]++
		}
		if len(md.Brokers) != 4 || len(per) != 4 {
			return fmt.Errorf("%d brokers, leaders %v", len(md.Brokers), per)
		}
		return nil
	})
	adm2 := kadm.NewClient(newClient(t, kgo.SeedBrokers(nodes[1].Kafka)))
	if r, err := adm2.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("7200000")}}, "four"); err != nil || r[0].Err != nil {
		t.Fatalf("alter configs: %v %+v", err, r)
	}
	checkRetention := func(n *node) {
		t.Helper()
		waitFor(t, ctx, fmt.Sprintf("retention.ms on broker %d", n.id), func() error {
			rc, err := kadm.NewClient(newClient(t, kgo.SeedBrokers(n.Kafka))).DescribeTopicConfigs(ctx, "four")
			if err != nil {
				return err
			}
			for _, c := range rc[0].Configs {
				if c.Key == "retention.ms" {
					if c.MaybeValue() != "7200000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
						return fmt.Errorf("retention.ms = %s (%v)", c.MaybeValue(), c.Source)
					}
					return nil
				}
			}
			return fmt.Errorf("no retention.ms in %+v", rc[0].Configs)
		})
	}
	for _, n := range nodes {
		checkRetention(n)
	}
	prod := newClient(t, kgo.SeedBrokers(seeds()...), kgo.DefaultProduceTopic("four"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 8; p++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("v-%d", p))}).FirstErr(); err != nil {
			t.Fatalf("produce to %d: %v", p, err)
		}
	}
	prod.Close()
	phase("topic created, configured and written")

	// kill -9 of the active controller.
	ctl := metadata(t, ctx, nodes[3].Kafka).ControllerID
	if ctl < 1 || ctl > 3 {
		t.Fatalf("controller id %d is not a controller", ctl)
	}
	killed := time.Now()
	nodes[ctl-1].Kill()
	phase(fmt.Sprintf("active controller %d killed", ctl))
	waitFor(t, ctx, "another controller", func() error {
		md := metadata(t, ctx, nodes[3].Kafka)
		if md.ControllerID == ctl || md.ControllerID < 1 || md.ControllerID > 3 {
			return fmt.Errorf("controller id %d", md.ControllerID)
		}
		return nil
	})
	t.Logf("controller failover: another controller reported %.1fs after kill -9 (broker.session.timeout.ms=9000)", time.Since(killed).Seconds())
	waitFor(t, ctx, "CreateTopics after the failover", func() error {
		r, err := adm4.CreateTopic(ctx, 1, 1, nil, "after-failover")
		if err == nil && r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			err = r.Err
		}
		return err
	})
	t.Logf("CreateTopics works %.1fs after the active controller's kill -9", time.Since(killed).Seconds())
	nodes[ctl-1].restart(t)
	phase("killed controller restarted")

	// A second broker with node.id 4 (another log directory) is refused
	// once its session timeout has passed.
	dup := filepath.Join(base, "dup")
	os.MkdirAll(dup, 0o755)
	if p, err := tryStartProc(t, dup, brokerArgs(4, freePorts(t, 1)[0], ports, dup, "--broker.session.timeout.ms", "2000",
		"--broker.heartbeat.interval.ms", "500")...); err == nil {
		t.Fatalf("a second node.id 4 started: %s", p.Line)
	} else if !strings.Contains(err.Error(), "node.id 4 is already registered") {
		t.Fatalf("a second node.id 4: want a refusal naming the registered node.id, got %v", err)
	}
	// A log directory written by another cluster (a single node's).
	other := filepath.Join(base, "other")
	os.MkdirAll(other, 0o755)
	single := startBroker(t, other, "--node.id", "5")
	if code := single.Term(); code != 0 {
		t.Fatalf("single node exit %d", code)
	}
	if p, err := tryStartProc(t, other, brokerArgs(5, freePorts(t, 1)[0], ports, other)...); err == nil {
		t.Fatalf("a node with another cluster's log directory started: %s", p.Line)
	} else if !strings.Contains(err.Error(), "belong to cluster") {
		t.Fatalf("another cluster's directory: want a refusal naming the cluster ids, got %v", err)
	}
	// Controller 3 restarted with its voter entry at another address.
	if code := nodes[2].Term(); code != 0 {
		t.Fatalf("node 3 exit %d", code)
	}
	moved := slices.Clone(ports)
	moved[2].controller = freePorts(t, 1)[0]
	if p, err := tryStartProc(t, nodes[2].dir, combinedArgs(3, moved, nodes[2].dir)...); err == nil {
		t.Fatalf("controller 3 at a new address started: %s", p.Line)
	} else if !strings.Contains(err.Error(), "the voter list disagrees with the cluster") {
		t.Fatalf("controller 3 at a new address: want a refusal naming the voter list, got %v", err)
	}
	nodes[2].restart(t)
	phase("refusals checked")

	// Stop every node at once (one by one, the last nodes' shutdowns
	// wait for a quorum that is gone), start them all again: everything
	// is back.
	for _, n := range nodes {
		n.SignalTerm()
	}
	for _, n := range nodes {
		if code := n.WaitExit(); code != 0 {
			t.Errorf("node %d exit %d after SIGTERM", n.id, code)
		}
	}
	startNodes(t, nodes...)
	phase("every node restarted")
	for _, n := range nodes {
		checkRetention(n)
	}
	waitFor(t, ctx, "topics back", func() error {
		md := metadata(t, ctx, nodes[0].Kafka, "four", "after-failover")
		for _, tp := range md.Topics {
			if tp.ErrorCode != 0 {
				return fmt.Errorf("%s: %v", *tp.Topic, kerr.ErrorForCode(tp.ErrorCode))
			}
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 {
					return fmt.Errorf("%s-%d: %v", *tp.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
		return nil
	})
	cons := newClient(t, kgo.SeedBrokers(seeds()...), kgo.ConsumeTopics("four"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	for len(got) < 8 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("after restarting every node, read %v", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	phase("every record back")
}

// TestClusterAdoptsSingleNodeDir: a log directory written by a
// zero-configuration node (a one-node cluster on a loopback controller
// port: topics, records, a group's committed offsets, a SCRAM user) is
// taken over when the node starts again with the explicit KRaft settings
// of a one-controller cluster: same topic ids, every record and offset,
// the user; and the cluster goes on (new topic, produce). The adoption of
// a directory written by the single-node mode (no metadata store) is
// internal/server's TestZeroConfigAdoptsSingleNodeDir.
func TestClusterAdoptsSingleNodeDir(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxFor(t, 2*time.Minute)
	single := startBroker(t, dir)
	adm := newAdmin(t, single.Kafka)
	if r, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kmsg.StringPtr("7200000")}, "old"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	oldID := metadata(t, ctx, single.Kafka, "old").Topics[0].TopicID
	prod := newClient(t, kgo.SeedBrokers(single.Kafka), kgo.DefaultProduceTopic("old"))
	for i := 0; i < 30; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "old", Partition: 1, At: 7, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "g", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "secret"}}); err != nil {
		t.Fatalf("scram: %v", err)
	}
	if code := single.Term(); code != 0 {
		t.Fatalf("single node exit %d", code)
	}

	ports := randomPorts(t, 1)
	n := &node{id: 1, dir: dir, args: combinedArgs(1, ports, dir, "--strata.log.format", "json")}
	startNodes(t, n)
	adm = newAdmin(t, n.Kafka)
	md := metadata(t, ctx, n.Kafka, "old")
	if tp := md.Topics[0]; tp.ErrorCode != 0 || tp.TopicID != oldID || len(tp.Partitions) != 3 {
		t.Fatalf("adopted topic: %+v (id was %x)", tp, oldID)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc[0].Configs {
		if c.Key == "retention.ms" && c.MaybeValue() != "7200000" {
			t.Fatalf("retention.ms after adoption: %s", c.MaybeValue())
		}
	}
	total := 0
	for p := int32(0); p < 3; p++ {
		total += len(fetchAll(t, ctx, n.Kafka, "old", p))
	}
	if total != 30 {
		t.Fatalf("%d records after adoption, want 30", total)
	}
	fo, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fo.Lookup("old", 1); !ok || o.At != 7 {
		t.Fatalf("committed offset after adoption: %+v %v", o, ok)
	}
	us, err := adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil || us["alice"].Err != nil || len(us["alice"].CredInfos) != 1 {
		t.Fatalf("SCRAM user after adoption: %v %+v", err, us)
	}
	if r, err := adm.CreateTopic(ctx, 2, 1, nil, "new"); err != nil || r.Err != nil {
		t.Fatalf("create after adoption: %v %v", err, r.Err)
	}
	prod = newClient(t, kgo.SeedBrokers(n.Kafka), kgo.DefaultProduceTopic("new"))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if code := n.Term(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// scrape reads the kafka_controller_* samples of a Prometheus text page.
func scrape(t testing.TB, ctx context.Context, url string) map[string]float64 {
	t.Helper()
	code, body, err := httpGet(ctx, url)
	if err != nil || code != 200 {
		t.Fatalf("GET %s: %d %v", url, code, err)
	}
	out := map[string]float64{}
	for _, l := range strings.Split(body, "\n") {
		if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[0], "kafka_controller_") {
			v, _ := strconv.ParseFloat(f[1], 64)
			out[f[0]] = v
		}
	}
	return out
}
