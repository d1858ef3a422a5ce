package compat

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/faults"
	"github.com/strata-io/strata/internal/freeport"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// strataBinary is the `strata` binary the process tests run:
// STRATA_E2E_BIN, or one built from this checkout once per test process.
func strataBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("STRATA_E2E_BIN"); bin != "" {
		return bin
	}
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "strata-compat-bin-")
		if err != nil {
			binaryErr = err
			return
		}
		_, here, _, _ := runtime.Caller(0)
		binaryPath = filepath.Join(dir, "strata")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		binaryErr = faults.BuildStrata(ctx, filepath.Join(filepath.Dir(here), "..", ".."), binaryPath)
	})
	if binaryErr != nil {
		t.Fatalf("build strata: %v", binaryErr)
	}
	return binaryPath
}

// binaryCluster is a cluster of `strata serve` processes of the built
// binary: nodes 1..combined are combined (broker and controller: the
// metadata store's voters), the last node is broker-only.
type binaryCluster struct {
	procs []*faults.Proc
	kafka []string // Kafka address of node i+1
	// boot is the broker-only node's Kafka address, the only one the
	// clients are given.
	boot string
}

// startBinaryCluster starts combined combined nodes and one broker-only
// node, topics replicated three times by default with
// min.insync.replicas=2, and returns once DescribeCluster through the
// broker-only node lists every broker. Flags in extra are added to every
// node's command line.
func startBinaryCluster(t *testing.T, ctx context.Context, bin string, combined int, extra ...string) *binaryCluster {
	t.Helper()
	base := t.TempDir()
	if out := os.Getenv("STRATA_COMPAT_OUT"); out != "" { // debugging: keep the nodes' logs and data
		var err error
		if base, err = os.MkdirTemp(out, "cluster-"); err != nil {
			t.Fatal(err)
		}
	}
	n := combined + 1
	c := &binaryCluster{}
	var ctls, voters []string
	for i := range n {
		c.kafka = append(c.kafka, freeport.Addr(t))
		if i < combined {
			ctls = append(ctls, freeport.Addr(t))
			voters = append(voters, fmt.Sprintf("%d@%s", i+1, ctls[i]))
		}
	}
	common := []string{
		"--controller.listener.names", "CONTROLLER",
		"--controller.quorum.voters", strings.Join(voters, ","),
		"--default.replication.factor", "3",
		"--min.insync.replicas", "2",
		"--group.initial.rebalance.delay.ms", "0",
		"--strata.metrics.listener", "127.0.0.1:0",
		"--strata.log.format", "json",
	}
	for i := range n {
		dir := filepath.Join(base, fmt.Sprintf("node-%d", i+1))
		args := []string{"serve", "--node.id", fmt.Sprint(i + 1), "--log.dirs", dir}
		if i < combined {
			args = append(args, "--process.roles", "broker,controller",
				"--listeners", fmt.Sprintf("PLAINTEXT://%s,CONTROLLER://%s", c.kafka[i], ctls[i]))
		} else {
			args = append(args, "--process.roles", "broker", "--listeners", "PLAINTEXT://"+c.kafka[i])
		}
		args = append(append(args, common...), extra...)
		c.procs = append(c.procs, faults.NewProc(faults.ProcSpec{Name: fmt.Sprintf("node-%d", i+1), Path: bin,
			Args: args, Dir: base, Ready: faults.StrataReady, LogPath: dir + ".log"}))
	}
	t.Cleanup(func() {
		for i, p := range c.procs {
			p.Stop()
			if t.Failed() {
				t.Logf("node-%d log: %s", i+1, filepath.Join(base, fmt.Sprintf("node-%d.log", i+1)))
			}
		}
	})
	c.startAll(t, ctx)
	c.boot = c.kafka[n-1]
	c.waitBrokers(t, ctx)
	return c
}

// startAll starts every node at once: the controllers wait for each other
// (a quorum) before serving.
func (c *binaryCluster) startAll(t *testing.T, ctx context.Context) {
	t.Helper()
	errs := make(chan error, len(c.procs))
	for _, p := range c.procs {
		go func() { errs <- p.Start(ctx) }() // owner: this call, which reads every result
	}
	for range c.procs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// waitBrokers waits until the broker-only node lists every node.
func (c *binaryCluster) waitBrokers(t *testing.T, ctx context.Context) {
	t.Helper()
	adm := bootAdmin(t, c.kafka[len(c.kafka)-1])
	waitFor(t, fmt.Sprintf("%d brokers registered", len(c.procs)), 90*time.Second, func() error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		bs, err := adm.ListBrokers(qctx)
		if err != nil {
			return err
		}
		if len(bs) != len(c.procs) {
			return fmt.Errorf("brokers %v", bs.NodeIDs())
		}
		return nil
	})
}

// bootAdmin is a franz-go admin client seeded with boot only.
func bootAdmin(t *testing.T, boot string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(boot))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// TestBinaryClusterClients: every driver (sarama, kafka-go, kcat,
// confluent-kafka-python, kafka-python, kafkajs) against four processes
// of the built binary, three combined nodes and one broker-only node
// (issue 11's layout), each client given only the broker-only node's
// address. Per client: admin (create a three-partition topic with
// replication factor 3 through its own CreateTopics where it has one,
// list, describe its configs), produce to every partition (Metadata
// through the broker-only node leads the client to each partition's
// leader; a produce sent elsewhere is refused), read a partition back,
// consume the whole topic in a group and commit (the committed offsets
// checked with kadm), an idempotent produce where the client has one, and
// delete the topic where it can. kafka-go's and kcat's admin gaps are
// filled with kadm (kcat has no admin API). The clients' topics have
// replicas on every one of the four brokers and leaders on several.
func TestBinaryClusterClients(t *testing.T) {
	if targetKfake() {
		t.Skip("kfake is one broker, not the binary")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel) // after the parallel subtests
	c := startBinaryCluster(t, ctx, strataBinary(t), 3)
	adm := bootAdmin(t, c.boot)
	clients := []*Client{saramaClient(), kafkaGoClient(), kcatClient(t), confluentClient(t), kafkaPythonClient(t), kafkaJSClient(t)}
	tally := &placementTally{leaders: map[int32]int{}, replicas: map[int32]int{}}
	t.Run("clients", func(t *testing.T) {
		for _, cl := range clients {
			t.Run(cl.Name, func(t *testing.T) {
				t.Parallel()
				binaryClusterChecks(t, ctx, adm, c.boot, cl, tally)
			})
		}
	})
	if t.Failed() {
		return
	}
	// Replicas go to the brokers holding the fewest, so the clients'
	// topics (54 replicas) use every broker; leaders go to the brokers
	// leading the fewest partitions of all topics, internal ones
	// included, so how the clients' 18 spread depends on what else was
	// created meanwhile: logged.
	leaders, replicas := tally.snapshot()
	t.Logf("the clients' partitions per broker: leaders %v, replicas %v", leaders, replicas)
	if len(replicas) != len(c.procs) || len(leaders) < 2 {
		t.Errorf("the clients' topics are not spread over the %d brokers: leaders %v, replicas %v", len(c.procs), leaders, replicas)
	}
}

// placementTally counts, per broker, the partitions of the clients'
// topics it led and the replicas it held when they were created.
type placementTally struct {
	mu                sync.Mutex
	leaders, replicas map[int32]int
}

func (l *placementTally) add(leader int32, replicas []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leaders[leader]++
	for _, r := range replicas {
		l.replicas[r]++
	}
}

func (l *placementTally) snapshot() (leaders, replicas map[int32]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.leaders), maps.Clone(l.replicas)
}

func binaryClusterChecks(t *testing.T, ctx context.Context, adm *kadm.Client, boot string, cl *Client, tally *placementTally) {
	const partitions, perPart = 3, 5
	topic, group := "rf3-"+cl.Name, "rf3-group-"+cl.Name
	// Admin.
	if cl.can(opCreate) {
		cl.Must(t, boot, Op{Op: opCreate, Topic: topic, Partitions: partitions, ReplicationFactor: 3})
	} else if r, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("kadm create %s: %v %v", topic, err, r.Err)
	}
	waitFor(t, topic+": three replicas in sync on every partition", 90*time.Second, func() error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(qctx, topic)
		if err != nil {
			return err
		}
		ps := md.Topics[topic].Partitions
		if len(ps) != partitions {
			return fmt.Errorf("%d partitions", len(ps))
		}
		for _, p := range ps {
			if p.Err != nil || p.Leader < 0 || len(p.Replicas) != 3 || len(p.ISR) != 3 {
				return fmt.Errorf("partition %d: leader %d replicas %v isr %v err %v", p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
			}
		}
		for _, p := range ps {
			tally.add(p.Leader, p.Replicas)
		}
		return nil
	})
	if cl.can(opList) {
		if r := cl.Must(t, boot, Op{Op: opList}); !slices.Contains(r.Topics, topic) {
			t.Errorf("list_topics: %v lacks %s", r.Topics, topic)
		}
	}
	if cl.can(opDescribe) {
		r := cl.Must(t, boot, Op{Op: opDescribe, Topic: topic})
		if got := r.Configs["min.insync.replicas"]; got != "2" {
			t.Errorf("describe_configs: min.insync.replicas %q, want 2 (the cluster's setting)", got)
		}
	}
	// Produce to every partition through its leader; read one back.
	var want []string
	for p := int32(0); p < partitions; p++ {
		var recs []Rec
		for i := 0; i < perPart; i++ {
			k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("%s-p%d-%d", cl.Name, p, i)
			recs = append(recs, Rec{Key: &k, Value: &v, Partition: p})
			want = append(want, v)
		}
		cl.Must(t, boot, Op{Op: opProduce, Topic: topic, Partition: p, Records: recs})
	}
	got := cl.Must(t, boot, Op{Op: opFetch, Topic: topic, Partition: 1, Offset: -2, Max: perPart}).Records
	if len(got) != perPart {
		t.Fatalf("fetch partition 1: %d records, want %d: %v", len(got), perPart, got)
	}
	for i, r := range got {
		if r.Value == nil || *r.Value != fmt.Sprintf("%s-p1-%d", cl.Name, i) || r.Offset != int64(i) {
			t.Fatalf("fetch partition 1 record %d: %v", i, r)
		}
	}
	// A group reads the whole topic and commits.
	if !cl.can(opGroupConsume) {
		t.Fatalf("%s has no group_consume", cl.Name)
	}
	gr := cl.Must(t, boot, Op{Op: opGroupConsume, Topic: topic, Group: group, Max: partitions * perPart})
	var read []string
	for _, r := range gr.Records {
		if r.Value != nil && !slices.Contains(read, *r.Value) {
			read = append(read, *r.Value)
		}
	}
	slices.Sort(read)
	slices.Sort(want)
	if !slices.Equal(read, want) {
		t.Fatalf("group consume read %v, want %v", read, want)
	}
	waitFor(t, group+" committed at the end of every partition", 60*time.Second, func() error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(qctx, group)
		if err != nil {
			return err
		}
		var bad []string
		for p := int32(0); p < partitions; p++ {
			o, ok := offs.Lookup(topic, p)
			if !ok || o.Err != nil || o.At != perPart {
				bad = append(bad, fmt.Sprintf("p%d=%v", p, o))
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("committed %s", strings.Join(bad, " "))
		}
		return nil
	})
	// An idempotent producer (InitProducerId through the broker-only node).
	if cl.can(opIdempotent) {
		v := cl.Name + "-idempotent"
		cl.Must(t, boot, Op{Op: opProduce, Topic: topic, Partition: 2, Idempotent: true, Records: []Rec{{Value: &v, Partition: 2}}})
		r := cl.Must(t, boot, Op{Op: opFetch, Topic: topic, Partition: 2, Offset: perPart, Max: 1})
		if len(r.Records) != 1 || r.Records[0].Value == nil || *r.Records[0].Value != v {
			t.Fatalf("idempotent record read back as %v", r.Records)
		}
	}
	// Delete the topic (answered once no broker serves it).
	if cl.can(opDeleteTopic) {
		cl.Must(t, boot, Op{Op: opDeleteTopic, Topic: topic})
		waitFor(t, topic+" deleted", 60*time.Second, func() error {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			td, err := adm.ListTopics(qctx)
			if err != nil {
				return err
			}
			if td.Has(topic) {
				return fmt.Errorf("still listed")
			}
			return nil
		})
	}
}

// TestBinaryClusterControllerKill (STRATA_LONG=1): issue 11's other
// clauses with every driver, on three combined nodes and a broker-only
// fourth (Kafka's default broker.session.timeout.ms, 9000). Each client creates a topic
// with a topic config (retention.ms) through its own admin API (kadm for
// kcat) and produces to every partition. Then the active controller
// (Metadata's controller id) is killed with SIGKILL: each client's own
// CreateTopics is retried until it succeeds, and the time from the kill
// is logged against broker.session.timeout.ms + 5 s (measured, not
// asserted: the machine's load decides it). The killed node is started
// again; then every node is stopped (SIGTERM, all at once) and started
// again, and each client finds its topics, the config and every record.
func TestBinaryClusterControllerKill(t *testing.T) {
	if targetKfake() {
		t.Skip("kfake is one broker, not the binary")
	}
	if os.Getenv("STRATA_LONG") != "1" {
		t.Skip("four processes, a controller failover and a full restart per run: STRATA_LONG=1 (TestClusterFourNodes in test/e2e covers the same clauses with franz-go by default)")
	}
	t.Parallel()
	const session = 9 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel) // after the parallel subtests
	c := startBinaryCluster(t, ctx, strataBinary(t), 3, "--broker.session.timeout.ms", fmt.Sprint(session.Milliseconds()))
	adm := bootAdmin(t, c.boot)
	clients := []*Client{saramaClient(), kafkaGoClient(), kcatClient(t), confluentClient(t), kafkaPythonClient(t), kafkaJSClient(t)}
	const partitions, perPart = 3, 4
	retention := map[string]string{"retention.ms": "7200000"}
	create := func(t *testing.T, cl *Client, topic string) Result {
		if cl.can(opCreate) {
			return cl.Do(t, c.boot, Op{Op: opCreate, Topic: topic, Partitions: partitions, ReplicationFactor: 3, Configs: retention})
		}
		r, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"retention.ms": kmsg.StringPtr(retention["retention.ms"])}, topic)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return Result{ErrorCode: -1, Error: err.Error()}
		}
		return Result{}
	}
	value := func(cl *Client, p int32, i int) string { return fmt.Sprintf("%s-p%d-%d", cl.Name, p, i) }
	t.Run("before", func(t *testing.T) {
		for _, cl := range clients {
			t.Run(cl.Name, func(t *testing.T) {
				t.Parallel()
				topic := "kept-" + cl.Name
				if r := create(t, cl, topic); r.ErrorCode != 0 {
					t.Fatalf("create %s: %d %s", topic, r.ErrorCode, r.Error)
				}
				waitReplicated(t, ctx, adm, topic, partitions)
				for p := int32(0); p < partitions; p++ {
					var recs []Rec
					for i := 0; i < perPart; i++ {
						v := value(cl, p, i)
						recs = append(recs, Rec{Value: &v, Partition: p})
					}
					cl.Must(t, c.boot, Op{Op: opProduce, Topic: topic, Partition: p, Records: recs})
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	// kill -9 of the active controller; every client's CreateTopics works
	// again once another controller took over.
	ctl := int32(-1)
	waitFor(t, "the active controller", 60*time.Second, func() error {
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		defer qcancel()
		md, err := adm.BrokerMetadata(qctx)
		if err != nil {
			return err
		}
		if md.Controller < 1 || int(md.Controller) > len(c.procs)-1 {
			return fmt.Errorf("controller id %d is not a combined node", md.Controller)
		}
		ctl = md.Controller
		return nil
	})
	victim := c.procs[ctl-1]
	killed := time.Now()
	if err := victim.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 of node %d, the active controller", ctl)
	t.Run("after-kill", func(t *testing.T) {
		for _, cl := range clients {
			t.Run(cl.Name, func(t *testing.T) {
				t.Parallel()
				topic := "after-" + cl.Name
				var last Result
				waitFor(t, cl.Name+"'s CreateTopics after the controller's kill", 3*time.Minute, func() error {
					last = create(t, cl, topic)
					if last.ErrorCode != 0 && last.ErrorCode != 36 { // TOPIC_ALREADY_EXISTS: an earlier try's answer was lost
						return fmt.Errorf("create %s: %d %s", topic, last.ErrorCode, last.Error)
					}
					return nil
				})
				took := time.Since(killed)
				verdict := "within"
				if took > session+5*time.Second {
					verdict = "NOT within"
				}
				t.Logf("%s: CreateTopics works %.1fs after kill -9 of the active controller (%s broker.session.timeout.ms + 5 s = %v)",
					cl.Name, took.Seconds(), verdict, session+5*time.Second)
			})
		}
	})
	if t.Failed() {
		return
	}
	if err := victim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitBrokers(t, ctx)
	// Stop every node at once (one by one, the last ones' shutdowns would
	// wait for a quorum that is gone), then start them all again.
	errs := make(chan error, len(c.procs))
	for _, p := range c.procs {
		go func() { errs <- p.Term(ctx) }() // owner: this test, which reads every result
	}
	for range c.procs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.procs {
		if err := p.ExitErr(); err != nil {
			t.Errorf("%s after SIGTERM: %v", p.Name(), err)
		}
	}
	c.startAll(t, ctx)
	c.waitBrokers(t, ctx)
	t.Logf("every node stopped and started again")
	t.Run("after-restart", func(t *testing.T) {
		for _, cl := range clients {
			t.Run(cl.Name, func(t *testing.T) {
				t.Parallel()
				topic := "kept-" + cl.Name
				for _, tp := range []string{topic, "after-" + cl.Name} {
					waitReplicated(t, ctx, adm, tp, partitions)
				}
				if cl.can(opList) {
					r := mustEventually(t, cl, c.boot, Op{Op: opList})
					if !slices.Contains(r.Topics, topic) || !slices.Contains(r.Topics, "after-"+cl.Name) {
						t.Errorf("list_topics after the restart: %v", r.Topics)
					}
				}
				if cl.can(opDescribe) {
					if got := mustEventually(t, cl, c.boot, Op{Op: opDescribe, Topic: topic}).Configs["retention.ms"]; got != retention["retention.ms"] {
						t.Errorf("retention.ms of %s after the restart: %q", topic, got)
					}
				} else {
					rc, err := adm.DescribeTopicConfigs(ctx, topic)
					if err != nil {
						t.Fatal(err)
					}
					if v, err := rc.On(topic, nil); err != nil || !hasConfig(v.Configs, "retention.ms", retention["retention.ms"]) {
						t.Errorf("retention.ms of %s after the restart: %v %+v", topic, err, v.Configs)
					}
				}
				for p := int32(0); p < partitions; p++ {
					got := mustEventually(t, cl, c.boot, Op{Op: opFetch, Topic: topic, Partition: p, Offset: -2, Max: perPart}).Records
					if len(got) != perPart {
						t.Fatalf("partition %d after the restart: %d records, want %d: %v", p, len(got), perPart, got)
					}
					for i, r := range got {
						if r.Value == nil || *r.Value != value(cl, p, i) || r.Offset != int64(i) {
							t.Fatalf("partition %d record %d after the restart: %v", p, i, r)
						}
					}
				}
			})
		}
	})
}

// mustEventually runs op until it succeeds: right after every node
// started again the coordinators may still be loading (kafkajs reads
// through a group and gives up on COORDINATOR_LOAD_IN_PROGRESS, which
// Kafka answers too while it loads), and leaders may still be moving.
func mustEventually(t *testing.T, cl *Client, boot string, op Op) Result {
	t.Helper()
	var r Result
	waitFor(t, fmt.Sprintf("%s %s %s", cl.Name, op.Op, op.Topic), 2*time.Minute, func() error {
		if r = cl.Do(t, boot, op); r.ErrorCode != 0 {
			return fmt.Errorf("error code %d: %s", r.ErrorCode, r.Error)
		}
		return nil
	})
	return r
}

// waitReplicated waits until topic has partitions partitions, each led
// with three replicas in sync.
func waitReplicated(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partitions int) {
	t.Helper()
	waitFor(t, topic+": three replicas in sync on every partition", 90*time.Second, func() error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(qctx, topic)
		if err != nil {
			return err
		}
		ps := md.Topics[topic].Partitions
		if len(ps) != partitions {
			return fmt.Errorf("%d partitions", len(ps))
		}
		for _, p := range ps {
			if p.Err != nil || p.Leader < 0 || len(p.Replicas) != 3 || len(p.ISR) != 3 {
				return fmt.Errorf("partition %d: leader %d replicas %v isr %v err %v", p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
			}
		}
		return nil
	})
}

// hasConfig reports whether configs hold key = value.
func hasConfig(configs []kadm.Config, key, value string) bool {
	for _, c := range configs {
		if c.Key == key {
			return c.MaybeValue() == value
		}
	}
	return false
}
