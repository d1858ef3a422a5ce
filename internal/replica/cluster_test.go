package replica_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/controller"
	"github.com/strata-io/strata/internal/etcdnode/etcdtest"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/protocol"
	"github.com/strata-io/strata/internal/replica"
	"github.com/strata-io/strata/internal/servertest"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// These tests run real brokers (servertest) replicating one partition
// through the real data path: followers fetch from the leader with Kafka's
// Fetch, the leader serves them with sendfile, ISR changes are
// compare-and-sets in an embedded etcd through meta, and the controller
// (internal/controller's Driver) elects. Until the cluster wiring gives
// every broker its metadata, the test plays that part: it registers the
// brokers, writes the partition's key, and applies the metadata to each
// broker's replica Manager (rig.sync).

// fetchV12 keeps the rig's followers at Fetch v12 (topics by name, the
// top-level replica id): each rig broker created the topic on its own, so
// their topic ids differ, which v13+ would refuse (UNKNOWN_TOPIC_ID). A
// cluster's brokers share the store's ids and fetch at v15
// (internal/server TestReplicaFetchV15, TestReplicatedCluster).
var fetchV12 = func() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(1, 12)
	return v
}()

type rig struct {
	t     testing.TB
	store *meta.Store
	cache *meta.Cache
	nodes []*rigNode
	tp    replica.TP
	tid   string
	ctx   context.Context
	// tune, when set, adjusts every node's replica Manager settings.
	tune func(id int32, cfg *replica.ManagerConfig)
}

type rigNode struct {
	id     int32
	b      host
	sess   *meta.Session
	epoch  int64
	mgr    *replica.Manager
	dialer *replica.KgoDialer
	stop   context.CancelFunc
	done   chan struct{}
	down   bool
}

const testMinISR = 2

// host is one broker process of the rig: servertest's, or one over a
// CrashFS (crashHost).
type host interface {
	Addr() string
	Broker() *broker.Broker
	Close()
	Restart()
}

type stHost struct{ b *servertest.Broker }

func (h stHost) Addr() string           { return h.b.Addr() }
func (h stHost) Broker() *broker.Broker { return h.b.Server().Broker() }
func (h stHost) Close()                 { h.b.Close() }
func (h stHost) Restart()               { h.b.RestartSamePort() }

// newRig starts n servertest brokers replicating topic "rep".
func newRig(t testing.TB, n int) *rig {
	t.Helper()
	c := servertest.StartN(t, n, servertest.Options{Logger: servertest.TestLogger(t, slog.LevelWarn)})
	hosts := make([]host, n)
	for i, b := range c.Brokers {
		hosts[i] = stHost{b}
	}
	return newRigOn(t, hosts)
}

// newRigOn runs the rig on given brokers, node ids 1..n.
func newRigOn(t testing.TB, hosts []host) *rig {
	t.Helper()
	return newRigTuned(t, hosts, nil)
}

// newRigTuned is newRigOn with tune applied to every node's Manager
// settings.
func newRigTuned(t testing.TB, hosts []host, tune func(id int32, cfg *replica.ManagerConfig)) *rig {
	t.Helper()
	n := len(hosts)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store := meta.NewStore(etcdtest.Start(t), meta.DefaultKeys, 128)
	cache, err := meta.StartCache(ctx, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	r := &rig{t: t, store: store, cache: cache, ctx: ctx, tp: replica.TP{Topic: "rep", Partition: 0}, tid: "rep-id", tune: tune}
	replicas := make([]int32, n)
	for i, h := range hosts {
		replicas[i] = int32(i + 1)
		if _, err := h.Broker().CreateTopic(broker.CreateTopicRequest{Name: r.tp.Topic, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
		r.nodes = append(r.nodes, &rigNode{id: int32(i + 1), b: h})
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
	}, Opts: []kgo.Opt{kgo.MaxVersions(fetchV12)}}
	cfg := replica.ManagerConfig{
		Local: nd.id, BrokerEpoch: func() int64 { return epoch }, Fenced: sess.Fenced, Durable: true,
		LagTimeMax: time.Second, FetchWaitMax: 100 * time.Millisecond, FetchBackoff: 50 * time.Millisecond,
		Dialer: nd.dialer, Committer: &replica.MetaCommitter{Store: r.store, Cache: r.cache},
		Logger: servertest.TestLogger(t, slog.LevelWarn).With("node", nd.id),
	}
	if r.tune != nil {
		r.tune(nd.id, &cfg)
	}
	nd.mgr = replica.NewManager(cfg)
	nd.mgr.Start()
	r.runSync(nd)
}

// runSync applies the metadata to nd's Manager at every change until
// nd.stop.
func (r *rig) runSync(nd *rigNode) {
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
		p, err := nd.b.Broker().Partition(tp.Topic, tp.Partition)
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
	nd.b.Restart()
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
	p, _ := r.node(leader).b.Broker().Partition(r.tp.Topic, 0)
	hw := p.Log.HighWatermark()
	got := map[int64]string{}
	ctx, cancel := context.WithTimeout(r.ctx, 60*time.Second)
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
	lp, _ := r.node(leader).b.Broker().Partition(r.tp.Topic, 0)
	deadline := time.Now().Add(60 * time.Second)
	for _, nd := range r.nodes {
		if nd.down {
			continue
		}
		p, _ := nd.b.Broker().Partition(r.tp.Topic, 0)
		for p.Log.DurableEnd() < lp.Log.HighWatermark() || p.Log.HighWatermark() < lp.Log.HighWatermark() {
			if time.Now().After(deadline) {
				r.t.Fatalf("node %d: durable end %d, high watermark %d; leader high watermark %d", nd.id, p.Log.DurableEnd(), p.Log.HighWatermark(), lp.Log.HighWatermark())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// checkConverged checks that every live replica holds the leader's log:
// the same end and the same leader epochs below it (a leader's epoch with
// no record yet is only in its own history).
func (r *rig) checkConverged(leader int32) {
	r.t.Helper()
	lp, _ := r.node(leader).b.Broker().Partition(r.tp.Topic, 0)
	epochs := func(l interface {
		LogEndOffset() int64
	}, es []storage.EpochEntry) string {
		var out []storage.EpochEntry
		for _, e := range es {
			if e.StartOffset < l.LogEndOffset() {
				out = append(out, e)
			}
		}
		return fmt.Sprint(out)
	}
	for _, nd := range r.nodes {
		if nd.down {
			continue
		}
		p, _ := nd.b.Broker().Partition(r.tp.Topic, 0)
		if p.Log.LogEndOffset() != lp.Log.LogEndOffset() || epochs(p.Log, p.Log.LeaderEpochs()) != epochs(lp.Log, lp.Log.LeaderEpochs()) {
			r.t.Fatalf("node %d: end %d epochs %v; leader %d: end %d epochs %v", nd.id, p.Log.LogEndOffset(), p.Log.LeaderEpochs(),
				leader, lp.Log.LogEndOffset(), lp.Log.LeaderEpochs())
		}
	}
}

// waitMetric waits until a node's replica metric has value want.
func (r *rig) waitMetric(nd *rigNode, name string, want float64) {
	r.t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(replica.NewCollector(nd.mgr))
	deadline := time.Now().Add(60 * time.Second)
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

func checkAcked(t testing.TB, acked, got map[int64]string) {
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
	r.checkConverged(leader)
}

// crashHost is a broker and its Kafka listener over a vfs.CrashFS, so that
// a test can cut the power: PowerCut keeps only what was fsynced, Restart
// opens the broker again on that image (recovery runs) at the same address.
type crashHost struct {
	t    *testing.T
	id   int32
	fs   *vfs.CrashFS
	next *vfs.CrashFS
	b    *broker.Broker
	ps   *protocol.Server
	addr string
}

func startCrashHost(t *testing.T, id int32) *crashHost {
	h := &crashHost{t: t, id: id, fs: vfs.NewCrashFS(), addr: "127.0.0.1:0"}
	h.open()
	return h
}

func (h *crashHost) open() {
	t := h.t
	cfg, err := config.LoadBroker("", nil, map[string]string{"log.dirs": "/data", "node.id": fmt.Sprint(h.id),
		"log.index.size.max.bytes": "4096", "log.segment.bytes": "262144"})
	if err != nil {
		t.Fatal(err)
	}
	logger := servertest.TestLogger(t, slog.LevelWarn).With("node", h.id)
	b, err := broker.OpenFS(cfg, logger, h.fs)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := protocol.New(protocol.Config{Broker: b, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	ps.Serve(ln)
	h.b, h.ps = b, ps
}

func (h *crashHost) Addr() string           { return h.addr }
func (h *crashHost) Broker() *broker.Broker { return h.b }

func (h *crashHost) Close() {
	if h.ps == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = h.ps.Shutdown(ctx)
	_ = h.b.Close()
	h.ps, h.b = nil, nil
}

// PowerCut takes the image a power cut leaves (only fsynced bytes); the
// next Restart runs on it.
func (h *crashHost) PowerCut() { h.next = h.fs.Crash() }

func (h *crashHost) Restart() {
	if h.next != nil {
		h.fs, h.next = h.next, nil
	}
	h.open()
}

// startCrashHosts starts n crash hosts, node ids 1..n, also as hosts for
// newRigOn.
func startCrashHosts(t *testing.T, n int) ([]*crashHost, []host) {
	crash := make([]*crashHost, n)
	hosts := make([]host, n)
	for i := range crash {
		crash[i] = startCrashHost(t, int32(i+1))
		hosts[i] = crash[i]
	}
	return crash, hosts
}

// cutPowerOfAll cuts the power of every host at the same instant: each
// image keeps what its node fsynced, and from then on every mutating
// operation of the running brokers fails, so no replica can fsync, report
// and join the ISR after the cut with bytes its image does not hold. It
// returns each node's log end and fsynced end of topic-0 at the cut.
func cutPowerOfAll(crash []*crashHost, topic string) []string {
	errCut := errors.New("power cut")
	var ends []string
	for i, h := range crash {
		p, _ := h.Broker().Partition(topic, 0)
		ends = append(ends, fmt.Sprintf("node %d end %d fsynced %d", i+1, p.Log.LogEndOffset(), p.Log.DurableEnd()))
		h.fs.SetHook(func(string, string) error { return errCut })
		h.PowerCut()
	}
	return ends
}

// restartAllAndCheck kills and restarts every node, waits for a leader
// with a full ISR that has caught up, and checks that it holds every
// record of acked and that the replicas converged.
func (r *rig) restartAllAndCheck(acked map[int64]string) meta.PartitionState {
	for _, nd := range r.nodes {
		r.kill(nd)
	}
	for _, nd := range r.nodes {
		r.restart(nd)
	}
	st := r.waitState("a leader and a full ISR", func(st meta.PartitionState) bool { return st.Leader > 0 && len(st.ISR) == 3 })
	r.waitCaughtUp(st.Leader)
	checkAcked(r.t, acked, r.readAll(st.Leader))
	r.checkConverged(st.Leader)
	return st
}

// ackedProducer produces records "v<i>" (i from its start) to the rig's
// partition through node 1 in the background, acks=all as fast as the
// client takes them, and keeps each acknowledged record by offset.
type ackedProducer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acked  map[int64]string
}

func (r *rig) startProducing(from int) *ackedProducer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.node(1).b.Addr()), kgo.DefaultProduceTopic(r.tp.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(64),
		kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	p := &ackedProducer{cl: cl, cancel: cancel, done: make(chan struct{}), acked: map[int64]string{}}
	go func() { // owner: p; stopped by p.stop
		defer close(p.done)
		for i := from; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("v%06d", i)
			cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(rec *kgo.Record, err error) {
				if err == nil {
					p.mu.Lock()
					p.acked[rec.Offset] = v
					p.mu.Unlock()
				}
			})
		}
	}()
	return p
}

// waitAcked polls until n records are acknowledged or, unless it is zero,
// the deadline passes.
func (p *ackedProducer) waitAcked(n int, deadline time.Time) {
	for {
		p.mu.Lock()
		got := len(p.acked)
		p.mu.Unlock()
		if got >= n || (!deadline.IsZero() && time.Now().After(deadline)) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ackedSoFar adds the records acknowledged so far to into.
func (p *ackedProducer) ackedSoFar(into map[int64]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range p.acked {
		into[k] = v
	}
}

// stop stops producing and closes the client.
func (p *ackedProducer) stop() {
	p.cancel()
	<-p.done
	p.cl.Close()
}

// TestPowerCutOfEveryReplica: three replicas on CrashFS, acks=all produce
// running; every replica loses its unsynced bytes at the same instant.
// With strata.durable.acks a record is acknowledged only once every ISR
// member fsynced it, so after the three recover and elect a leader (from
// the eligible replicas, KIP-966) every acknowledged record is there, and
// the replicas converge on one log.
func TestPowerCutOfEveryReplica(t *testing.T) {
	crash, hosts := startCrashHosts(t, 3)
	r := newRigOn(t, hosts)
	prod := r.startProducing(0)
	prod.waitAcked(500, time.Time{})
	// What was acknowledged before the cut must survive it.
	before := map[int64]string{}
	prod.ackedSoFar(before)
	ends := cutPowerOfAll(crash, r.tp.Topic)
	prod.stop()
	st := r.restartAllAndCheck(before)
	lp, _ := r.node(st.Leader).b.Broker().Partition(r.tp.Topic, 0)
	t.Logf("%d records acknowledged before the power cut (%s), all read back after it; leader %d at epoch %d, log end %d",
		len(before), strings.Join(ends, ", "), st.Leader, st.LeaderEpoch, lp.Log.LogEndOffset())
}

// TestPipelinedFollowerFsync: under strata.durable.acks a follower fetches
// again from its log end while the fsync of what it appended last is still
// running, reporting its fsynced end apart (replica.DurableEndTag), so the
// leader sees a fetch offset past the fsynced end; the high watermark
// still counts only fsynced ends. One follower's segment fsyncs are held
// back while acks=all produce runs; then every replica loses its unsynced
// bytes at once: every acknowledged record survives.
func TestPipelinedFollowerFsync(t *testing.T) {
	crash, hosts := startCrashHosts(t, 3)
	r := newRigOn(t, hosts)
	var lead *replica.Replica
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Millisecond) {
		if lead = r.node(1).mgr.Replica(r.tp); lead != nil && len(lead.Followers()) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node 1 never led the partition")
		}
	}
	before, err := r.produce(1, 0, 100)
	if err != nil || len(before) != 100 {
		t.Fatalf("produce: %d acked, %v", len(before), err)
	}
	// Follower 2's segment fsyncs wait until released.
	release := make(chan struct{})
	var held sync.WaitGroup
	var mu sync.Mutex
	blocked := 0
	errCut := errors.New("power cut")
	crash[1].fs.SetHook(func(op, name string) error {
		if op == "sync" && strings.HasSuffix(name, ".log") && strings.Contains(name, "rep-0") {
			mu.Lock()
			blocked++
			mu.Unlock()
			held.Add(1)
			defer held.Done()
			<-release
			return errCut // released only by the power cut
		}
		return nil
	})
	released := false
	releaseAll := func() {
		if !released {
			released = true
			close(release)
		}
	}
	t.Cleanup(releaseAll)

	prod := r.startProducing(100)
	// The leader records a fetch from follower 2 past its fsynced end while
	// that follower's fsync is held: the fetch went out before the fsync
	// completed.
	fp, _ := r.node(2).b.Broker().Partition(r.tp.Topic, 0)
	deadline := time.Now().Add(60 * time.Second)
	var seen replica.Follower
	for {
		for _, f := range lead.Followers() {
			if f.ID == 2 && f.EndOffset > f.DurableEnd && f.DurableEnd >= 0 {
				seen = f
			}
		}
		if seen.ID == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fetch from follower 2 past its fsynced end while its fsync was held: %+v", lead.Followers())
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	nblocked := blocked
	mu.Unlock()
	if nblocked == 0 || fp.Log.DurableEnd() > seen.DurableEnd {
		t.Fatalf("follower 2 fsynced meanwhile (%d fsyncs held, durable end %d, reported %d)", nblocked, fp.Log.DurableEnd(), seen.DurableEnd)
	}
	// Let acks=all go on (with follower 2 in the ISR or removed from it) a
	// little, then cut the power of all three while its fsync is held.
	prod.waitAcked(100, deadline)
	prod.ackedSoFar(before)
	// The cut, while follower 2's fsync is held.
	ends := cutPowerOfAll(crash, r.tp.Topic)
	releaseAll()
	held.Wait()
	prod.stop()
	r.restartAllAndCheck(before)
	t.Logf("fetch at %d with fsynced end %d while %d fsyncs were held; at the cut %s; %d records acknowledged before it, all read back",
		seen.EndOffset, seen.DurableEnd, nblocked, strings.Join(ends, ", "), len(before))
}
