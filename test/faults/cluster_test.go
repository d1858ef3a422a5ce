package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/checker"
	"github.com/strata-io/strata/internal/faults"
	"github.com/strata-io/strata/internal/workload"
)

// netCluster is a cluster of `strata serve` nodes from the built binary,
// each in its own network namespace (faults.Net), so that iptables can cut
// the paths between them. In the combined layout (startNetCluster) node i
// is broker and controller (docs/cluster.md) and listens on <IP(i)>:9092
// (Kafka), :9093 (controller: etcd peers and clients) and :9094 (metrics);
// in the split layout (netLayout.controllers > 0) the first namespaces hold
// controller-only nodes and the others broker-only nodes. Clients run in
// the test's namespace and reach every node over the bridge.
type netCluster struct {
	nt *faults.Net
	// procs, addrs, metrics and netIdx are the brokers' (combined nodes'):
	// their process, Kafka and metrics addresses, and namespace index.
	procs   []*faults.Proc
	addrs   []string
	metrics []string
	netIdx  []int
	ids     []int32
	// ctrls and ctrlNet are the controller-only nodes (split layout).
	ctrls   []*faults.Proc
	ctrlNet []int
	// disks are the brokers' loop-mounted ext4 directories (loopDisks),
	// tmpfs is their tmpfs directories (tmpfsDisks).
	disks []*faults.LoopDisk
	tmpfs []*faults.Disk
	// errorf reports a failed check made during a fault (t.Errorf).
	errorf func(string, ...any)
}

// netLayout says which nodes a netCluster runs.
type netLayout struct {
	controllers int // controller-only nodes (0: combined nodes)
	brokers     int // broker-only nodes, or combined nodes when controllers is 0
	// loopDisks puts each broker's directory on its own loop-mounted ext4
	// (faults.LoopDisk: power cuts); tmpfsDisks on a 256 MiB tmpfs (a disk
	// that fills).
	loopDisks, tmpfsDisks bool
}

// startNetCluster starts three combined nodes: replication factor 3,
// min.insync.replicas=2, a 4 s broker session (a cut-off or paused broker
// is fenced within seconds), replica.lag.time.max.ms=5000.
func startNetCluster(t *testing.T, ctx context.Context, extra ...string) *netCluster {
	return startNetClusterWith(t, ctx, netLayout{brokers: 3}, extra...)
}

// startNetClusterWith starts the cluster of layout l (settings as
// startNetCluster).
func startNetClusterWith(t *testing.T, ctx context.Context, l netLayout, extra ...string) *netCluster {
	t.Helper()
	n := l.controllers + l.brokers
	nt, err := faults.NewNet(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nt.Close(); err != nil {
			t.Errorf("close net: %v", err)
		}
	})
	c := &netCluster{nt: nt, errorf: t.Errorf}
	var voters []string
	nvoters := l.controllers
	if nvoters == 0 {
		nvoters = l.brokers
	}
	for i := 0; i < nvoters; i++ {
		voters = append(voters, fmt.Sprintf("%d@%s:9093", i+1, nt.IP(i)))
	}
	base := t.TempDir()
	if l.loopDisks {
		unshare, err := faults.ShareMounts(base)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unshare() }) // runs after the disks' unmounts
	}
	var all []*faults.Proc
	for i := 0; i < n; i++ {
		dir := filepath.Join(base, fmt.Sprintf("node-%d", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		common := []string{"serve", "--node.id", fmt.Sprint(i + 1),
			"--controller.listener.names", "CONTROLLER",
			"--controller.quorum.voters", strings.Join(voters, ","),
			"--broker.session.timeout.ms", "4000",
			"--broker.heartbeat.interval.ms", "1000",
			"--default.replication.factor", "3",
			"--min.insync.replicas", "2",
			"--replica.lag.time.max.ms", "5000",
			"--strata.metrics.listener", nt.IP(i) + ":9094",
			"--log.dirs", dir,
			"--strata.log.format", "json",
		}
		name := fmt.Sprintf("node-%d", i+1)
		if i < l.controllers {
			args := append(common, "--process.roles", "controller", "--listeners", fmt.Sprintf("CONTROLLER://%s:9093", nt.IP(i)))
			p := faults.NewProc(faults.ProcSpec{Name: name, Path: strataBin, Args: append(args, extra...), Dir: base,
				Netns: nt.Netns(i), Ready: "metadata store member started", LogPath: dir + ".log"})
			c.ctrls, c.ctrlNet = append(c.ctrls, p), append(c.ctrlNet, i)
			all = append(all, p)
			continue
		}
		roles, listeners := "broker,controller", fmt.Sprintf("PLAINTEXT://%s:9092,CONTROLLER://%s:9093", nt.IP(i), nt.IP(i))
		if l.controllers > 0 {
			roles, listeners = "broker", fmt.Sprintf("PLAINTEXT://%s:9092", nt.IP(i))
		}
		switch {
		case l.loopDisks:
			d, err := faults.MountLoop(dir, filepath.Join(base, name+".img"), loopDiskSize)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Unmount() }) // after the processes stop (cleanups run last in, first out)
			c.disks = append(c.disks, d)
		case l.tmpfsDisks:
			d, err := faults.MountDisk(dir, "256m")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Unmount() })
			c.tmpfs = append(c.tmpfs, d)
		}
		args := append(common, "--process.roles", roles, "--listeners", listeners)
		switch { // the free-space reserve, sized for the small disks
		case !hasReserve:
		case l.loopDisks:
			args = append(args, reserveArgs...)
		case l.tmpfsDisks:
			args = append(args, "--strata.log.min.free.bytes", fmt.Sprint(tmpfsReserve))
		}
		p := faults.NewProc(faults.ProcSpec{Name: name, Path: strataBin, Args: append(args, extra...), Dir: base,
			Netns: nt.Netns(i), Ready: faults.StrataReady, LogPath: dir + ".log"})
		c.procs, c.netIdx, c.ids = append(c.procs, p), append(c.netIdx, i), append(c.ids, int32(i+1))
		c.addrs = append(c.addrs, nt.IP(i)+":9092")
		c.metrics = append(c.metrics, nt.IP(i)+":9094")
		all = append(all, p)
	}
	t.Cleanup(func() { // before nt.Close and the unmounts: cleanups run last in, first out
		// A failed run's broker logs are copied into its artifacts when
		// STRATA_FAULTS_OUT is set (t.TempDir is removed after the test).
		var keep string
		if t.Failed() && os.Getenv("STRATA_FAULTS_OUT") != "" {
			keep = artifacts(t)
		}
		for _, p := range all {
			p.Stop()
			if !t.Failed() {
				continue
			}
			if keep == "" {
				t.Logf("%s log: %s (removed with the test's directory; set STRATA_FAULTS_OUT to keep it)", p.Name(), filepath.Join(base, p.Name()+".log"))
				continue
			}
			src, dst := filepath.Join(base, p.Name()+".log"), filepath.Join(keep, p.Name()+".log")
			if err := copyFile(src, dst); err != nil {
				t.Logf("%s log: %s (not kept: %v)", p.Name(), src, err)
				continue
			}
			t.Logf("%s log: %s", p.Name(), dst)
		}
	})
	errs := make(chan error, n)
	for _, p := range all {
		go func() { errs <- p.Start(ctx) }() // owner: this call, which reads every result
	}
	for range all {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// leader is the node leading topic-0 now (waiting up to 10 s for one);
// node 0 when none is known.
func (c *netCluster) leader(ctx context.Context, topic string, logf func(string, ...any)) int {
	for tries := 0; tries < 20 && ctx.Err() == nil; tries++ {
		if i := c.leaderIndex(ctx, topic); i >= 0 {
			return i
		}
		time.Sleep(500 * time.Millisecond)
	}
	logf("no leader of %s-0 known: the fault targets node-1", topic)
	return 0
}

// leaderIndex is the index (in procs) of the broker leading topic-0, -1
// if none is known.
func (c *netCluster) leaderIndex(ctx context.Context, topic string) int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...))
	if err != nil {
		return -1
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(mctx, topic)
	if err != nil {
		return -1
	}
	pd, ok := md.Topics[topic].Partitions[0]
	if !ok || pd.Err != nil {
		return -1
	}
	return slices.Index(c.ids, pd.Leader)
}

// etcdLeader is the node whose metadata-store member is the Raft leader
// (strata_metadata_store_is_leader on its metrics listener), -1 if none.
func (c *netCluster) etcdLeader(ctx context.Context) int {
	for i, m := range c.metrics {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+m+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), "\nstrata_metadata_store_is_leader 1") {
				cancel()
				return i
			}
		}
		cancel()
	}
	return -1
}

func (c *netCluster) others(i int) []int {
	var out []int
	for j := range c.procs {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

// clusterFault names one row of the matrix: a fault whose target (the
// leader of topic-0, the etcd leader...) is chosen when it is injected.
type clusterFault struct {
	name  string
	fault func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault
}

// healNet heals every iptables rule.
func healNet(c *netCluster) func(context.Context) error {
	return func(context.Context) error { return c.nt.Heal() }
}

// matrix is the cluster fault matrix (docs/reliability.md).
var matrix = []clusterFault{
	{"isolate-leader", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// The leader keeps its clients but loses its followers and the
		// metadata-store majority (its own member is the minority): its
		// session lapses, the controller elects another ISR member; the old
		// leader cannot acknowledge acks=all (its ISR cannot shrink without
		// a compare-and-set in etcd).
		return faults.FuncFault{Label: "isolate the leader of " + topic + "-0 from the other nodes (clients still reach it)",
			InjectFn: func(ctx context.Context) error {
				l := c.leader(ctx, topic, logf)
				logf("isolate node-%d (leader)", l+1)
				return c.nt.Split(l)
			}, HealFn: healNet(c)}
	}},
	{"isolate-follower", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// A follower cut from the leader and from the store majority: the ISR
		// shrinks (min.insync.replicas=2 still met), the follower's session
		// lapses; it catches up and rejoins after the heal.
		return faults.FuncFault{Label: "isolate a follower of " + topic + "-0 from the other nodes",
			InjectFn: func(ctx context.Context) error {
				f := c.others(c.leader(ctx, topic, logf))[0]
				logf("isolate node-%d (follower)", f+1)
				return c.nt.Split(f)
			}, HealFn: healNet(c)}
	}},
	{"split-leader-majority", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// {leader, one follower} | {other follower}: the majority side keeps
		// the store and the ISR quorum.
		return faults.FuncFault{Label: "split {leader of " + topic + "-0, one follower} | {other follower}",
			InjectFn: func(ctx context.Context) error {
				l := c.leader(ctx, topic, logf)
				o := c.others(l)
				logf("split {node-%d, node-%d} | {node-%d}", l+1, o[0]+1, o[1]+1)
				return c.nt.Split(l, o[0])
			}, HealFn: healNet(c)}
	}},
	{"oneway-from-leader", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// The other nodes drop every packet from the leader (TCP between them
		// then fails both ways; the leader still hears datagrams).
		return faults.FuncFault{Label: "the other nodes drop every packet from the leader of " + topic + "-0",
			InjectFn: func(ctx context.Context) error {
				l := c.leader(ctx, topic, logf)
				logf("drop node-%d -> others", l+1)
				for _, o := range c.others(l) {
					if err := c.nt.Block(l, o); err != nil {
						return err
					}
				}
				return nil
			}, HealFn: healNet(c)}
	}},
	{"oneway-to-leader", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		return faults.FuncFault{Label: "the leader of " + topic + "-0 drops every packet from the other nodes",
			InjectFn: func(ctx context.Context) error {
				l := c.leader(ctx, topic, logf)
				logf("drop others -> node-%d", l+1)
				for _, o := range c.others(l) {
					if err := c.nt.Block(o, l); err != nil {
						return err
					}
				}
				return nil
			}, HealFn: healNet(c)}
	}},
	{"etcd-quorum-cut", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// Every node cut from every other: no metadata-store majority
		// anywhere (docs/cluster.md "Quorum loss"): leaders keep serving,
		// acks=all waits (followers cannot fetch), nothing moves; the quorum
		// returns at the heal.
		return faults.FuncFault{Label: "every node cut from every other (metadata store without quorum, no replication)",
			InjectFn: func(ctx context.Context) error {
				for i := range c.procs {
					if err := c.nt.Split(i); err != nil {
						return err
					}
				}
				return nil
			}, HealFn: healNet(c)}
	}},
	{"sigstop-leader", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		var victim *faults.Proc
		return faults.FuncFault{Label: "SIGSTOP the leader of " + topic + "-0 past its session, then SIGCONT",
			InjectFn: func(ctx context.Context) error {
				victim = c.procs[c.leader(ctx, topic, logf)]
				logf("SIGSTOP %s", victim.Name())
				return victim.Pause()
			}, HealFn: func(context.Context) error { return victim.Resume() }}
	}},
	{"kill-leader", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		var victim *faults.Proc
		return faults.FuncFault{Label: "kill -9 the leader of " + topic + "-0, restart",
			InjectFn: func(ctx context.Context) error {
				victim = c.procs[c.leader(ctx, topic, logf)]
				logf("kill -9 %s", victim.Name())
				return victim.Kill(ctx)
			}, HealFn: func(ctx context.Context) error { return victim.Start(ctx) }}
	}},
	{"kill-etcd-leader", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		var victim *faults.Proc
		return faults.FuncFault{Label: "kill -9 the metadata store's Raft leader, restart",
			InjectFn: func(ctx context.Context) error {
				i := c.etcdLeader(ctx)
				if i < 0 {
					logf("no metadata-store leader found on the metrics listeners: node-1 is killed")
					i = 0
				}
				victim = c.procs[i]
				logf("kill -9 %s (metadata-store leader)", victim.Name())
				return victim.Kill(ctx)
			}, HealFn: func(ctx context.Context) error { return victim.Start(ctx) }}
	}},
	{"kill-all", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// Every process SIGKILLed at once and restarted together. This is a
		// whole-cluster crash, NOT a power loss: the page cache survives a
		// SIGKILL, so fsync is not exercised here (the simulation and the
		// CrashFS tests cover power cuts).
		return faults.FuncFault{Label: "kill -9 every node at once, restart them together (the page cache survives: not a power cut)",
			InjectFn: func(ctx context.Context) error {
				for _, p := range c.procs {
					if err := p.Kill(ctx); err != nil {
						return err
					}
				}
				return nil
			}, HealFn: func(ctx context.Context) error {
				errs := make(chan error, len(c.procs))
				for _, p := range c.procs {
					go func() { errs <- p.Start(ctx) }() // owner: this heal, which reads every result
				}
				var first error
				for range c.procs {
					if err := <-errs; err != nil && first == nil {
						first = err
					}
				}
				return first
			}}
	}},
}

// defaultRows are the rows the default suite runs (one fault each); the
// whole matrix runs with STRATA_LONG=1.
var defaultRows = []string{"isolate-leader", "etcd-quorum-cut", "power-cut-all"}

// TestClusterFaultMatrix runs the workload (idempotent acks=all producers,
// a transactional producer, an assign-mode READ_COMMITTED reader) against
// three nodes in their own network namespaces while the rows of the matrix
// are injected in turn, each for 6 s (past the 4 s broker session), with
// 6 s of health between; then heals, drains and checks the history. The
// default suite runs three rows once; STRATA_LONG=1 runs every row
// (STRATA_FAULT_ROUNDS times, default 3; STRATA_FAULT_MINUTES=M stops
// injecting after M minutes).
func TestClusterFaultMatrix(t *testing.T) {
	t.Parallel()
	rows := map[string]bool{}
	for _, r := range defaultRows {
		rows[r] = true
	}
	rounds := 1
	if long() {
		rows = nil
		rounds = envInt("STRATA_FAULT_ROUNDS", 3)
	}
	if only := envString("STRATA_FAULT_ROWS", ""); only != "" {
		rows = map[string]bool{}
		for _, r := range strings.Split(only, ",") {
			rows[r] = true
		}
	}
	all := append(append([]clusterFault(nil), matrix...), powerRows...)
	if hasReserve {
		all = append(all, diskFullRows...)
	} else {
		t.Logf("the binary has no strata.log.min.free.bytes: no disk-full-combined row")
	}
	// STRATA_FAULT_MINUTES=M bounds the faults by time as well: no fault
	// starts once M minutes have passed since the first (the long run's
	// hour, whatever a round takes on a loaded machine).
	minutes := envInt("STRATA_FAULT_MINUTES", 0)
	timeout := max(time.Duration(rounds*len(all))*30*time.Second, time.Duration(minutes)*time.Minute+10*time.Minute) + 5*time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := startNetClusterWith(t, ctx, netLayout{brokers: 3, loopDisks: true}, aclArgs...)
	const topic = "matrix"
	var fs []faults.Fault
	var names []string
	for _, row := range all {
		if rows == nil || rows[row.name] {
			fs = append(fs, row.fault(c, topic, t.Logf))
			names = append(names, row.name)
		}
	}
	if len(fs) == 0 {
		t.Fatalf("no matrix row selected by STRATA_FAULT_ROWS")
	}
	nem := &faults.Nemesis{Faults: fs, Rounds: rounds * len(fs), Healthy: 6 * time.Second, Faulty: 6 * time.Second}
	nem.For = time.Duration(minutes) * time.Minute // 0: no bound
	cfg := workload.Config{Brokers: c.addrs, Topic: topic, Partitions: 3, Producers: 2, TxnProducers: 1,
		AssignConsumers: 1, Rate: 50, TxnTimeout: 10 * time.Second, Logf: t.Logf,
		ClientOpts: []kgo.Opt{kgo.RecordDeliveryTimeout(60 * time.Second)}}
	// Topic and ACL administration from a client on every broker at once,
	// checked for linearizability per topic name and ACL resource
	// (checker.CheckMetadata).
	mr, err := workload.StartMeta(ctx, workload.MetaConfig{Brokers: c.addrs, NodeIDs: c.ids, ACLResources: aclResources,
		Pause: 200 * time.Millisecond, Seed: uint64(time.Now().UnixNano()), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Stop(); mr.Close() })
	res := runFaults(t, ctx, cfg, nem, map[string]string{
		"broker": "strata, three combined nodes in their own network namespaces, replication factor 3, min.insync.replicas=2, acks=all",
		"rows":   strings.Join(names, ", "),
		"faults": fmt.Sprintf("%d round(s) of %d rows, 6 s each, 6 s healthy between", rounds, len(fs))})
	t.Logf("rows %v: acknowledged %d records, transactions %v", names, res.Stats.AckedSends, res.Stats.Ops[checker.KindTxn])
	checkMetadata(t, ctx, mr)
}

// aclArgs give a cluster an authorizer, for the metadata workload's ACL
// operations, under which every client and broker (PLAINTEXT: User:ANONYMOUS)
// is a super user: the workload's bindings change no one's access.
var aclArgs = []string{"--authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"--super.users", "User:ANONYMOUS"}

// aclResources are the topic resources whose ACLs the metadata workload
// creates and deletes.
var aclResources = []string{"acl-0", "acl-1"}

// checkMetadata stops the topic administration workload, waits for every
// broker to converge, records the final reads and checks the history for
// linearizability (porcupine, per topic name).
func checkMetadata(t *testing.T, ctx context.Context, mr *workload.MetaRunner) {
	t.Helper()
	mr.Stop()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := mr.FinalRead(rctx); err != nil {
		t.Errorf("metadata: %v", err)
	}
	ops := mr.Ops()
	res := checker.CheckMetadata(ops, time.Minute)
	dir := artifacts(t)
	if err := workload.WriteMetaArtifacts(dir, ops, res); err != nil {
		t.Fatal(err)
	}
	t.Logf("metadata: %s(history in %s)", res, filepath.Join(dir, "meta-report.txt"))
	if !res.Valid() {
		t.Errorf("topic or ACL administration is not linearizable:\n%s", res)
	}
	if res.Outcomes[checker.MetaOK] == 0 {
		t.Errorf("the metadata workload did nothing: %s", res)
	}
}
