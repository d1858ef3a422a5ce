package replica_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/controller"
	"github.com/strata-io/strata/internal/etcdnode"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/replica"
	"github.com/strata-io/strata/internal/servertest"
)

// These tests run real brokers (servertest) replicating one partition
// through the real data path: followers fetch from the leader with Kafka's
// Fetch, the leader serves them with sendfile, ISR changes are
// compare-and-sets in an embedded etcd through meta, and the controller
// (internal/controller's Driver) elects. Until the cluster wiring gives
// every broker its metadata, the test plays that part: it registers the
// brokers, writes the partition's key, and applies the metadata to each
// broker's replica Manager (rig.sync).

type rig struct {
	t     *testing.T
	store *meta.Store
	cache *meta.Cache
	c     *servertest.Cluster
	nodes []*rigNode
	tp    replica.TP
	tid   string
	ctx   context.Context
}

type rigNode struct {
	id     int32
	b      *servertest.Broker
	sess   *meta.Session
	epoch  int64
	mgr    *replica.Manager
	dialer *replica.KgoDialer
	stop   context.CancelFunc
	done   chan struct{}
	down   bool
}

const testMinISR = 2

func newRig(t *testing.T, n int) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	v := etcdnode.Voter{ID: 1, Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	en, err := etcdnode.Start(ctx, etcdnode.Config{NodeID: 1, Dir: t.TempDir(), Listener: ln, Voters: []etcdnode.Voter{v},
		ClusterToken: "replica-test", Timing: etcdnode.Timing{TickMs: 10, ElectionMs: 100}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { en.Close() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{en.ClientEndpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	store := meta.NewStore(cli, meta.DefaultKeys, 128)
	cache, err := meta.StartCache(ctx, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	r := &rig{t: t, store: store, cache: cache, ctx: ctx, tp: replica.TP{Topic: "rep", Partition: 0}, tid: "rep-id"}
	r.c = servertest.StartN(t, n, servertest.Options{Logger: servertest.TestLogger(t, slog.LevelWarn)})
	replicas := make([]int32, n)
	for i, b := range r.c.Brokers {
		replicas[i] = b.NodeID
		if _, err := b.Server().Broker().CreateTopic(broker.CreateTopicRequest{Name: r.tp.Topic, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
		r.nodes = append(r.nodes, &rigNode{id: b.NodeID, b: b})
	}
	// The topic and its partition: every broker a replica, the first the
	// leader, all in the ISR.
	tchg, _ := meta.PutJSON(store.Keys().Topic(r.tp.Topic), meta.Topic{Name: r.tp.Topic, ID: r.tid, Partitions: 1}, 0)
	st := meta.PartitionState{Replicas: replicas, ISR: replicas, Leader: replicas[0]}
	if _, err := store.Txn(ctx, []meta.Change{tchg, store.PartitionChange(meta.TopicPartition{TopicID: r.tid}, st, 0)}); err != nil {
		t.Fatal(err)
	}
	for _, nd := range r.nodes {
		r.startNode(nd)
	}
	t.Cleanup(func() {
		for _, nd := range r.nodes {
			if !nd.down {
				r.kill(nd)
			}
		}
	})
	drv := &controller.Driver{NodeID: 1, Store: store, Cache: cache, SessionTTL: time.Second, Logger: slog.New(slog.DiscardHandler),
		Policy: func(*meta.Topic) controller.Policy { return controller.Policy{MinISR: testMinISR} }}
	dctx, dcancel := context.WithCancel(ctx)
	ddone := make(chan struct{})
	go func() { defer close(ddone); drv.Run(dctx) }()
	t.Cleanup(func() { dcancel(); <-ddone })
	return r
}

// startNode registers a broker (a new epoch) and runs its replica Manager
// fed from the metadata cache.
func (r *rig) startNode(nd *rigNode) {
	t := r.t
	sess, err := meta.NewSession(r.ctx, r.store.Client(), 2*time.Second, 200*time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(nd.b.Addr())
	var p int32
	fmt.Sscan(port, &p)
	epoch, err := r.store.Register(r.ctx, meta.Broker{ID: nd.id, DirectoryID: fmt.Sprintf("dir-%d", nd.id),
		Listeners: []meta.Endpoint{{Name: "PLAINTEXT", Host: host, Port: p, Protocol: "PLAINTEXT"}}}, sess.Lease())
	if err != nil {
		t.Fatal(err)
	}
	nd.sess, nd.epoch, nd.down = sess, epoch, false
	nd.dialer = &replica.KgoDialer{Resolve: func(id int32) (string, bool) {
		b := r.cache.View().Brokers[id]
		if b == nil || len(b.Listeners) == 0 {
			return "", false
		}
		return net.JoinHostPort(b.Listeners[0].Host, fmt.Sprint(b.Listeners[0].Port)), true
	}}
	nd.mgr = replica.NewManager(replica.ManagerConfig{
		Local: nd.id, BrokerEpoch: func() int64 { return epoch }, Durable: true,
		LagTimeMax: time.Second, FetchWaitMax: 100 * time.Millisecond, FetchBackoff: 50 * time.Millisecond,
		Dialer: nd.dialer, Committer: &replica.MetaCommitter{Store: r.store, Cache: r.cache},
		Logger: servertest.TestLogger(t, slog.LevelWarn).With("node", nd.id),
	})
	nd.mgr.Start()
	ctx, cancel := context.WithCancel(r.ctx)
	nd.stop, nd.done = cancel, make(chan struct{})
	go func() {
		defer close(nd.done)
		for {
			ch := r.cache.Changed()
			r.sync(nd)
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// sync applies the metadata to one broker (what the cluster wiring does).
func (r *rig) sync(nd *rigNode) {
	nd.mgr.Sync(r.cache.View(), func(tp replica.TP) (replica.Hosted, bool) {
		p, err := nd.b.Server().Broker().Partition(tp.Topic, tp.Partition)
		if err != nil {
			return replica.Hosted{}, false
		}
		return replica.Hosted{Log: p.Log, MinISR: testMinISR, Attach: p.SetReplica}, true
	})
}

// kill stops a broker: its registration goes (as when its lease expires),
// its replication stops, its listener closes.
func (r *rig) kill(nd *rigNode) {
	nd.stop()
	<-nd.done
	nd.mgr.Close()
	nd.dialer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = nd.sess.Close(ctx)
	nd.b.Close()
	nd.down = true
}

// restart starts a killed broker again on the same directory.
func (r *rig) restart(nd *rigNode) {
	nd.b.RestartSamePort()
	r.startNode(nd)
}

func (r *rig) state() meta.PartitionState {
	_, part, _ := r.cache.View().Partition(r.tp.Topic, r.tp.Partition)
	return part.State
}

// waitState waits for the partition's state to satisfy cond.
func (r *rig) waitState(what string, cond func(meta.PartitionState) bool) meta.PartitionState {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, 60*time.Second)
	defer cancel()
	for {
		ch := r.cache.Changed()
		if st := r.state(); cond(st) {
			return st
		}
		select {
		case <-ch:
		case <-ctx.Done():
			r.t.Fatalf("partition never reached %s; now %s", what, r.state())
		}
	}
}

func (r *rig) node(id int32) *rigNode {
	for _, nd := range r.nodes {
		if nd.id == id {
			return nd
		}
	}
	r.t.Fatalf("no node %d", id)
	return nil
}

// produce sends n acks=all records to the leader and returns the
// acknowledged values (by offset). Retriable errors are retried (a new
// leader may not know it leads yet) unless once is set.
func (r *rig) produce(leader int32, from, n int, once ...bool) (map[int64]string, error) {
	retries := 20
	if len(once) > 0 && once[0] {
		retries = 0
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.node(leader).b.Addr()), kgo.DefaultProduceTopic(r.tp.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(retries), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.RecordDeliveryTimeout(30*time.Second), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	acked := map[int64]string{}
	var mu sync.Mutex
	var firstErr error
	for i := from; i < from+n; i++ {
		v := fmt.Sprintf("v%05d", i)
		cl.Produce(r.ctx, &kgo.Record{Value: []byte(v)}, func(rec *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			acked[rec.Offset] = string(rec.Value)
		})
	}
	cl.Flush(r.ctx)
	return acked, firstErr
}

// readAll reads the partition from the leader up to its high watermark.
func (r *rig) readAll(leader int32) map[int64]string {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.node(leader).b.Addr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.tp.Topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	p, _ := r.node(leader).b.Server().Broker().Partition(r.tp.Topic, 0)
	hw := p.Log.HighWatermark()
	got := map[int64]string{}
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	for int64(len(got)) < hw {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			r.t.Fatalf("read %d of %d records", len(got), hw)
		}
		fs.EachRecord(func(rec *kgo.Record) { got[rec.Offset] = string(rec.Value) })
	}
	return got
}

// waitCaughtUp waits until every live replica's log ends where the
// leader's high watermark is.
func (r *rig) waitCaughtUp(leader int32) {
	r.t.Helper()
	lp, _ := r.node(leader).b.Server().Broker().Partition(r.tp.Topic, 0)
	deadline := time.Now().Add(60 * time.Second)
	for _, nd := range r.nodes {
		if nd.down {
			continue
		}
		p, _ := nd.b.Server().Broker().Partition(r.tp.Topic, 0)
		for p.Log.DurableEnd() < lp.Log.HighWatermark() || p.Log.HighWatermark() < lp.Log.HighWatermark() {
			if time.Now().After(deadline) {
				r.t.Fatalf("node %d: durable end %d, high watermark %d; leader high watermark %d", nd.id, p.Log.DurableEnd(), p.Log.HighWatermark(), lp.Log.HighWatermark())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waitMetric waits until a node's replica metric has value want.
func (r *rig) waitMetric(nd *rigNode, name string, want float64) {
	r.t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(replica.NewCollector(nd.mgr))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got float64 = -1
		mfs, err := reg.Gather()
		if err != nil {
			r.t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name && len(mf.Metric) == 1 {
				m := mf.Metric[0]
				if m.Gauge != nil {
					got = m.Gauge.GetValue()
				} else if m.Counter != nil {
					got = m.Counter.GetValue()
				}
			}
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("node %d: %s = %v, want %v", nd.id, name, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func checkAcked(t *testing.T, acked, got map[int64]string) {
	t.Helper()
	for off, v := range acked {
		if got[off] != v {
			t.Fatalf("acknowledged %q at offset %d, read %q", v, off, got[off])
		}
	}
}

// TestReplicatedProduce: acks=all produce to a three-replica partition is
// acknowledged once every ISR member fsynced it; followers hold the same
// records; a stopped follower leaves the ISR (controller), the partition
// goes on with two, refuses acks=all with two of three down
// (NOT_ENOUGH_REPLICAS), and takes the follower back once it caught up.
func TestReplicatedProduce(t *testing.T) {
	r := newRig(t, 3)
	acked, err := r.produce(1, 0, 200)
	if err != nil || len(acked) != 200 {
		t.Fatalf("produce: %d acked, %v", len(acked), err)
	}
	r.waitCaughtUp(1)
	checkAcked(t, acked, r.readAll(1))
	if st := r.state(); len(st.ISR) != 3 {
		t.Fatalf("ISR shrank without a failure: %s", st)
	}

	r.waitMetric(r.node(1), "kafka_server_replicamanager_leadercount", 1)
	r.waitMetric(r.node(1), "kafka_server_replicamanager_underreplicatedpartitions", 0)
	r.kill(r.node(3))
	r.waitState("ISR [1 2]", func(st meta.PartitionState) bool { return len(st.ISR) == 2 && st.Leader == 1 })
	r.waitMetric(r.node(1), "kafka_server_replicamanager_underreplicatedpartitions", 1)
	r.waitMetric(r.node(1), "kafka_server_replicamanager_atminisrpartitioncount", 1)
	more, err := r.produce(1, 200, 100)
	if err != nil || len(more) != 100 {
		t.Fatalf("produce with ISR [1 2]: %d acked, %v", len(more), err)
	}
	for k, v := range more {
		acked[k] = v
	}

	r.kill(r.node(2))
	r.waitState("ISR [1]", func(st meta.PartitionState) bool { return len(st.ISR) == 1 })
	r.waitMetric(r.node(1), "kafka_server_replicamanager_underminisrpartitioncount", 1)
	if _, err := r.produce(1, 300, 1, true); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with one of three replicas: %v, want NOT_ENOUGH_REPLICAS", err)
	}

	r.restart(r.node(2))
	r.restart(r.node(3))
	r.waitState("ISR [1 2 3]", func(st meta.PartitionState) bool { return len(st.ISR) == 3 })
	// The returning followers were added by the leader (ISR expansions).
	r.waitMetric(r.node(1), "kafka_server_replicamanager_isrexpands_total", 2)
	again, err := r.produce(1, 301, 50)
	if err != nil || len(again) != 50 {
		t.Fatalf("produce after the followers returned: %d acked, %v", len(again), err)
	}
	for k, v := range again {
		acked[k] = v
	}
	r.waitCaughtUp(1)
	checkAcked(t, acked, r.readAll(1))
}

// TestLeaderFailover: the leader dies; the controller elects an ISR
// member at a new leader epoch; every acknowledged record is on the new
// leader; the old leader returns as a follower and converges.
func TestLeaderFailover(t *testing.T) {
	r := newRig(t, 3)
	acked, err := r.produce(1, 0, 300)
	if err != nil || len(acked) != 300 {
		t.Fatalf("produce: %d acked, %v", len(acked), err)
	}
	r.kill(r.node(1))
	st := r.waitState("a new leader", func(st meta.PartitionState) bool { return st.Leader > 1 })
	if st.LeaderEpoch < 1 {
		t.Fatalf("new leader at epoch %d", st.LeaderEpoch)
	}
	leader := st.Leader
	more, err := r.produce(leader, 300, 100)
	if err != nil || len(more) != 100 {
		t.Fatalf("produce to the new leader %d: %d acked, %v", leader, len(more), err)
	}
	for k, v := range more {
		acked[k] = v
	}
	r.restart(r.node(1))
	r.waitState("old leader back in the ISR", func(st meta.PartitionState) bool { return len(st.ISR) == 3 })
	r.waitCaughtUp(leader)
	checkAcked(t, acked, r.readAll(leader))
	// The old leader's log is the new leader's.
	lp, _ := r.node(leader).b.Server().Broker().Partition(r.tp.Topic, 0)
	op, _ := r.node(1).b.Server().Broker().Partition(r.tp.Topic, 0)
	if op.Log.LogEndOffset() != lp.Log.LogEndOffset() || fmt.Sprint(op.Log.LeaderEpochs()) != fmt.Sprint(lp.Log.LeaderEpochs()) {
		t.Fatalf("old leader: end %d epochs %v; new leader: end %d epochs %v", op.Log.LogEndOffset(), op.Log.LeaderEpochs(), lp.Log.LogEndOffset(), lp.Log.LeaderEpochs())
	}
}
