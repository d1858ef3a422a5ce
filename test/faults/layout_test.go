package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/checker"
	"github.com/strata-io/strata/internal/faults"
	"github.com/strata-io/strata/internal/workload"
)

// powerCut cuts the power of brokers idx (indexes into c.procs): each is
// stopped (SIGSTOP, so it sees no error), its loop-mounted file system is
// shut down without flushing (faults.LoopDisk.PowerCut: every byte not
// fsynced is gone), then it is killed and its file system unmounted. It
// returns the brokers whose power it cut, which powerOn brings back.
//
// A failure leaves no broker stopped: when one cannot be stopped (it
// died: its log says why), no power is cut at all and the brokers already
// stopped are resumed; a broker whose file system cannot be shut down is
// resumed and the others' cuts go on (their disks are gone already).
func (c *netCluster) powerCut(ctx context.Context, idx ...int) ([]int, error) {
	if len(c.disks) != len(c.procs) {
		return nil, fmt.Errorf("power cuts need loop-mounted broker directories (netLayout.loopDisks)")
	}
	for k, i := range idx {
		if err := c.procs[i].Pause(); err != nil {
			errs := []error{fmt.Errorf("power cut: cannot stop %s, no power cut: %w", c.procs[i].Name(), err)}
			for _, j := range idx[:k] {
				if rerr := c.procs[j].Resume(); rerr != nil {
					errs = append(errs, fmt.Errorf("resume %s: %w", c.procs[j].Name(), rerr))
				}
			}
			return nil, errors.Join(errs...)
		}
	}
	var cut []int
	var errs []error
	for _, i := range idx {
		if err := c.disks[i].PowerCut(); err != nil {
			errs = append(errs, fmt.Errorf("power cut of %s: %w", c.procs[i].Name(), err))
			if rerr := c.procs[i].Resume(); rerr != nil {
				errs = append(errs, fmt.Errorf("resume %s: %w", c.procs[i].Name(), rerr))
			}
			continue
		}
		cut = append(cut, i)
	}
	for _, i := range cut {
		if err := c.procs[i].Kill(ctx); err != nil {
			errs = append(errs, fmt.Errorf("power cut: kill %s: %w", c.procs[i].Name(), err))
		}
		if err := c.disks[i].Unmount(); err != nil {
			errs = append(errs, fmt.Errorf("power cut: unmount %s's disk: %w", c.procs[i].Name(), err))
		}
	}
	return cut, errors.Join(errs...)
}

// powerOn mounts the file systems of brokers idx again (the journal is
// replayed, as at a boot) and starts them together.
func (c *netCluster) powerOn(ctx context.Context, idx ...int) error {
	for _, i := range idx {
		if err := c.disks[i].Remount(); err != nil {
			return err
		}
	}
	return startAll(ctx, c.pick(idx))
}

func (c *netCluster) pick(idx []int) []*faults.Proc {
	var out []*faults.Proc
	for _, i := range idx {
		out = append(out, c.procs[i])
	}
	return out
}

// startAll starts processes together (controllers wait for a quorum).
func startAll(ctx context.Context, ps []*faults.Proc) error {
	errs := make(chan error, len(ps))
	for _, p := range ps {
		go func() { errs <- p.Start(ctx) }() // owner: this call, which reads every result
	}
	var first error
	for range ps {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		for _, p := range ps {
			if !p.Running() {
				out := strings.Split(strings.TrimSpace(p.Output()), "\n")
				first = fmt.Errorf("%w; %s's last lines:\n%s", first, p.Name(), strings.Join(out[max(0, len(out)-8):], "\n"))
			}
		}
	}
	return first
}

// powerRows are the matrix's power-loss rows (the combined layout with
// loop-mounted directories).
var powerRows = []clusterFault{
	{"power-cut-leader", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// The leader loses power: what it had not fsynced is gone. With
		// strata.durable.acks=true (the default) nothing acknowledged was
		// only in its page cache.
		var cut []int
		return faults.FuncFault{Label: "power cut of the leader of " + topic + "-0 (unsynced data dropped), power back",
			InjectFn: func(ctx context.Context) (err error) {
				victim := c.leader(ctx, topic, logf)
				logf("power cut of %s", c.procs[victim].Name())
				cut, err = c.powerCut(ctx, victim)
				return err
			}, HealFn: func(ctx context.Context) error { return c.powerOn(ctx, cut...) }}
	}},
	{"power-cut-all", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// Every node (brokers, controllers and their metadata-store
		// members) loses power at the same instant.
		all := []int{}
		for i := range c.procs {
			all = append(all, i)
		}
		var cut []int
		return faults.FuncFault{Label: "power cut of every node at once (unsynced data dropped), power back",
			InjectFn: func(ctx context.Context) (err error) {
				logf("power cut of every node")
				cut, err = c.powerCut(ctx, all...)
				return err
			}, HealFn: func(ctx context.Context) error { return c.powerOn(ctx, cut...) }}
	}},
}

// splitRows are the rows of the split layout (three controller-only nodes,
// three broker-only nodes): faults that need brokers apart from the
// controllers, or that would take a combined node's metadata-store member
// with them.
var splitRows = []clusterFault{
	{"broker-cut-from-controllers", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// The leader still reaches the clients and the other brokers (its
		// followers keep fetching until they learn of a new leader) but not
		// the controllers: its session lapses and the controller elects
		// another ISR member; the old leader cannot change its ISR (etcd is
		// out of reach), so acks=all cannot complete on it alone.
		return faults.FuncFault{Label: "cut the leader of " + topic + "-0 from the controllers (clients and brokers still reach it)",
			InjectFn: func(ctx context.Context) error {
				l := c.leader(ctx, topic, logf)
				logf("cut %s from the controllers", c.procs[l].Name())
				for _, k := range c.ctrlNet {
					if err := c.nt.Partition(c.netIdx[l], k); err != nil {
						return err
					}
				}
				return nil
			}, HealFn: healNet(c)}
	}},
	{"disk-full-leader", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// The leader's log directory fills to the last byte: its appends
		// fail (the producers get errors and retry), nothing half-written
		// becomes visible; writes work again once the space is freed.
		// During the fault (c.diskFull): its own leaders answer
		// KAFKA_STORAGE_ERROR, the other leaders keep acknowledging, and
		// metadata is still written through it.
		var victim int
		var probe string
		return faults.FuncFault{Label: "fill the disk of the leader of " + topic + "-0, then free it",
			InjectFn: func(ctx context.Context) error {
				victim = c.leader(ctx, topic, logf)
				logf("fill the disk of %s", c.procs[victim].Name())
				var err error
				probe, err = c.diskFull(ctx, victim, c.tmpfs[victim].Fill, logf)
				return err
			}, HealFn: func(ctx context.Context) error {
				if err := c.tmpfs[victim].Free(); err != nil {
					return err
				}
				c.dropProbe(ctx, probe, logf)
				return nil
			}}
	}},
	{"rolling-restart", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// Every node in turn, controllers first, stopped with SIGTERM (a
		// controlled shutdown) and started again, as an upgrade does.
		return faults.FuncFault{Label: "rolling restart of every node (SIGTERM, start), controllers first",
			InjectFn: func(ctx context.Context) error {
				for _, p := range append(append([]*faults.Proc(nil), c.ctrls...), c.procs...) {
					logf("restart %s", p.Name())
					if err := p.Term(ctx); err != nil {
						return err
					}
					if err := p.Start(ctx); err != nil {
						return err
					}
				}
				return nil
			}, HealFn: func(context.Context) error { return nil }}
	}},
	{"reassign-during-kill", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		// kill -9 a follower of topic-0 and, while it is down, reassign
		// topic-0 to the two others (KIP-455, the dead replica removed);
		// at the heal it is started again and topic-0 reassigned back to
		// all three, so it copies the partition from the start.
		var victim, leader int
		return faults.FuncFault{Label: "kill -9 a follower of " + topic + "-0 and reassign the partition away from it; restart, reassign back",
			InjectFn: func(ctx context.Context) error {
				leader = c.leader(ctx, topic, logf)
				o := c.others(leader)
				victim = o[0]
				logf("kill -9 %s, reassign %s-0 to [%d %d]", c.procs[victim].Name(), topic, c.ids[leader], c.ids[o[1]])
				if err := c.procs[victim].Kill(ctx); err != nil {
					return err
				}
				return c.reassign(ctx, topic, []int32{c.ids[leader], c.ids[o[1]]}, logf)
			}, HealFn: func(ctx context.Context) error {
				if err := c.procs[victim].Start(ctx); err != nil {
					return err
				}
				return c.reassign(ctx, topic, []int32{c.ids[victim], c.ids[leader], c.ids[c.others(leader)[1]]}, logf)
			}}
	}},
}

// reassign asks for topic-0's replicas to become replicas
// (AlterPartitionReassignments); it does not wait for the move. A refusal
// is logged, not an error: the fault is the attempt.
func (c *netCluster) reassign(ctx context.Context, topic string, replicas []int32, logf func(string, ...any)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, replicas)
	resp, err := kadm.NewClient(cl).AlterPartitionAssignments(rctx, req)
	if err != nil {
		logf("reassign %s-0 to %v: %v", topic, replicas, err)
		return nil
	}
	resp.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		logf("reassign %s-%d to %v: %v", r.Topic, r.Partition, replicas, r.Err)
	})
	return nil
}

// TestClusterControllerSplit runs the workload and the topic
// administration workload against three controller-only and three
// broker-only nodes (each in its own network namespace, each broker's
// directory on a 256 MiB tmpfs) while the split layout's rows are
// injected: a leader cut from the controllers only, a full disk on the
// leader, a rolling restart of every node, a reassignment while a replica
// is dead. Only with STRATA_LONG=1 (or rows chosen by STRATA_FAULT_ROWS):
// six processes are too many for the default suite on a 2-core machine.
func TestClusterControllerSplit(t *testing.T) {
	rows := map[string]bool{}
	if only := envString("STRATA_FAULT_ROWS", ""); only != "" {
		for _, r := range strings.Split(only, ",") {
			rows[r] = true
		}
	}
	var selected []clusterFault
	for _, r := range splitRows {
		if long() || rows[r.name] {
			selected = append(selected, r)
		}
	}
	if len(selected) == 0 {
		t.Skip("the split-layout rows run with STRATA_LONG=1 or STRATA_FAULT_ROWS=" + splitRowNames())
	}
	t.Parallel()
	rounds := 1
	if long() {
		rounds = envInt("STRATA_FAULT_ROUNDS", 3)
	}
	// STRATA_FAULT_MINUTES=M: no fault starts once M minutes have passed
	// since the first (as TestClusterFaultMatrix).
	minutes := envInt("STRATA_FAULT_MINUTES", 0)
	timeout := time.Duration(rounds*len(selected)) * 60 * time.Second
	if minutes > 0 {
		timeout = min(timeout, time.Duration(minutes)*time.Minute+10*time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Minute)
	defer cancel()
	c := startNetClusterWith(t, ctx, netLayout{controllers: 3, brokers: 3, tmpfsDisks: true}, aclArgs...)
	const topic = "split"
	var fs []faults.Fault
	var names []string
	for _, row := range selected {
		fs = append(fs, row.fault(c, topic, t.Logf))
		names = append(names, row.name)
	}
	mr, err := workload.StartMeta(ctx, workload.MetaConfig{Brokers: c.addrs, NodeIDs: c.ids, ACLResources: aclResources,
		Pause: 200 * time.Millisecond, Seed: uint64(time.Now().UnixNano()), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Stop(); mr.Close() })
	nem := &faults.Nemesis{Faults: fs, Rounds: rounds * len(fs), Healthy: 6 * time.Second, Faulty: 6 * time.Second}
	nem.For = time.Duration(minutes) * time.Minute // 0: no bound
	cfg := workload.Config{Brokers: c.addrs, Topic: topic, Partitions: 3, Producers: 2, TxnProducers: 1,
		AssignConsumers: 1, Rate: 50, TxnTimeout: 10 * time.Second, Logf: t.Logf,
		ClientOpts: []kgo.Opt{kgo.RecordDeliveryTimeout(60 * time.Second)}}
	res := runFaults(t, ctx, cfg, nem, map[string]string{
		"broker": "strata, three controller-only and three broker-only nodes in their own network namespaces, replication factor 3, min.insync.replicas=2, acks=all",
		"rows":   strings.Join(names, ", "),
		"faults": fmt.Sprintf("%d round(s) of %d rows, 6 s each, 6 s healthy between", rounds, len(fs))})
	t.Logf("rows %v: acknowledged %d records, transactions %v", names, res.Stats.AckedSends, res.Stats.Ops[checker.KindTxn])
	checkMetadata(t, ctx, mr)
}

func splitRowNames() string {
	var out []string
	for _, r := range splitRows {
		out = append(out, r.name)
	}
	return strings.Join(out, ",")
}
