package faults

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-io/strata/internal/faults"
	"github.com/strata-io/strata/internal/workload"
)

// replicatedCluster starts three combined `strata serve` nodes from the
// built binary forming one cluster (docs/cluster.md), each on a fixed
// loopback Kafka port, topics replicated three times with
// min.insync.replicas=2 by default, and returns them with their Kafka
// addresses. The session timeout is short so that a killed broker is
// fenced and its partitions move within seconds.
func replicatedCluster(t *testing.T, ctx context.Context, extra ...string) ([]*faults.Proc, []string) {
	t.Helper()
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	return startReplicated(t, ctx, addrs, nil, nil, extra...), addrs
}

// startReplicated starts three combined nodes listening on addrs; when
// advertised is set, node i advertises advertised[i] (a proxy in front of
// it) instead, and metrics[i] is its metrics listener (127.0.0.1:0 when
// nil). Flags in extra replace the defaults they name.
func startReplicated(t *testing.T, ctx context.Context, addrs, advertised, metrics []string, extra ...string) []*faults.Proc {
	t.Helper()
	return startReplicatedOn(t, ctx, addrs, []string{freeAddr(t), freeAddr(t), freeAddr(t)}, advertised, metrics, extra...)
}

// startReplicatedOn is startReplicated with the nodes' controller
// listeners on ctls.
func startReplicatedOn(t *testing.T, ctx context.Context, addrs, ctls, advertised, metrics []string, extra ...string) []*faults.Proc {
	t.Helper()
	const n = 3
	var voters []string
	for i := range ctls {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, ctls[i]))
	}
	base := clusterDir(t)
	procs := make([]*faults.Proc, n)
	for i := range procs {
		dir := filepath.Join(base, fmt.Sprintf("node-%d", i+1))
		flags := map[string]string{
			"--node.id":                      fmt.Sprint(i + 1),
			"--process.roles":                "broker,controller",
			"--listeners":                    fmt.Sprintf("PLAINTEXT://%s,CONTROLLER://%s", addrs[i], ctls[i]),
			"--controller.listener.names":    "CONTROLLER",
			"--controller.quorum.voters":     strings.Join(voters, ","),
			"--broker.session.timeout.ms":    "4000",
			"--broker.heartbeat.interval.ms": "1000",
			"--default.replication.factor":   "3",
			"--min.insync.replicas":          "2",
			"--replica.lag.time.max.ms":      "5000",
			"--strata.metrics.listener":      "127.0.0.1:0",
			"--log.dirs":                     dir,
			"--strata.log.format":            "json",
		}
		if advertised != nil {
			flags["--advertised.listeners"] = "PLAINTEXT://" + advertised[i]
		}
		if metrics != nil {
			flags["--strata.metrics.listener"] = metrics[i]
		}
		for j := 0; j+1 < len(extra); j += 2 {
			flags[extra[j]] = extra[j+1]
		}
		args := []string{"serve"}
		for _, k := range slices.Sorted(maps.Keys(flags)) {
			args = append(args, k, flags[k])
		}
		procs[i] = faults.NewProc(faults.ProcSpec{Name: fmt.Sprintf("broker-%d", i+1), Path: strataBin,
			Args: args, Dir: base, Ready: faults.StrataReady, LogPath: dir + ".log"})
	}
	t.Cleanup(func() {
		for i, p := range procs {
			p.Stop()
			if t.Failed() {
				t.Logf("broker-%d log: %s", i+1, filepath.Join(base, fmt.Sprintf("node-%d.log", i+1)))
			}
		}
	})
	// The nodes wait for each other's controllers (a quorum) before they
	// serve: start them together.
	errs := make(chan error, n)
	for _, p := range procs {
		go func() { errs <- p.Start(ctx) }()
	}
	for range procs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return procs
}

// clusterDir is where a test's cluster keeps its nodes' data and logs: a
// temporary directory, or a new directory under $STRATA_FAULTS_OUT/<test>
// when set, so a failed run's broker logs outlive the test.
func clusterDir(t *testing.T) string {
	t.Helper()
	if os.Getenv("STRATA_FAULTS_OUT") == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(artifacts(t), "cluster-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// leaderOf returns the index of the broker leading topic's partition p,
// asked through the given addresses (-1 if none answers with a leader).
func leaderOf(ctx context.Context, addrs []string, topic string, p int32) int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
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
	pd, ok := md.Topics[topic].Partitions[p]
	if !ok || pd.Err != nil || pd.Leader < 1 || int(pd.Leader) > len(addrs) {
		return -1
	}
	return int(pd.Leader) - 1
}

// leaderFault is a Fault on the broker leading topic's partition 0 at the
// time of the injection, healed extra after the Nemesis' Faulty time.
func leaderFault(procs []*faults.Proc, addrs []string, topic, what string, extra time.Duration, logf func(string, ...any)) faults.Fault {
	var victim *faults.Proc
	pick := func(ctx context.Context) *faults.Proc {
		i := leaderOf(ctx, addrs, topic, 0)
		for tries := 0; i < 0 && tries < 20 && ctx.Err() == nil; tries++ {
			time.Sleep(500 * time.Millisecond) // a leader is being elected
			i = leaderOf(ctx, addrs, topic, 0)
		}
		if i < 0 {
			logf("no leader of %s-0 known: the fault goes to broker-1", topic)
			i = 0
		}
		victim = procs[i]
		logf("%s %s (leader of %s-0)", what, victim.Name(), topic)
		return victim
	}
	wait := func(ctx context.Context) {
		t := time.NewTimer(extra)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	label := fmt.Sprintf("%s the leader of %s-0 for Faulty+%v", what, topic, extra)
	if what == "SIGSTOP" {
		return faults.FuncFault{Label: label,
			InjectFn: func(ctx context.Context) error { return pick(ctx).Pause() },
			HealFn:   func(ctx context.Context) error { wait(ctx); return victim.Resume() }}
	}
	return faults.FuncFault{Label: label,
		InjectFn: func(ctx context.Context) error { return pick(ctx).Kill(ctx) },
		HealFn:   func(ctx context.Context) error { wait(ctx); return victim.Start(ctx) }}
}

// TestReplicatedFaults: three brokers, every partition replicated three
// times with min.insync.replicas=2, idempotent franz-go producers with
// acks=all and an assign-mode consumer, while the broker leading partition
// 0 in turn is: SIGKILLed and restarted at once (it waits for its old
// registration to lapse, meanwhile the controller elects another ISR
// member, docs/cluster.md); SIGKILLed and restarted after its session
// lapsed; SIGSTOPped past its session timeout and resumed (it is fenced:
// meta.Session.Fenced, and its followers have moved to the new leader).
// The restarted broker truncates where its log diverges from the new
// leader's (KIP-101/279) and rejoins the ISR. 3 faults; 21 with
// STRATA_LONG=1. Every acknowledged record must be read back, in order,
// without duplicates, and nothing the old leader accepted after losing
// leadership may be visible (the workload's checker).
func TestReplicatedFaults(t *testing.T) {
	t.Parallel()
	rounds := 3
	if long() {
		rounds = 21
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*40*time.Second+3*time.Minute)
	defer cancel()
	procs, addrs := replicatedCluster(t, ctx)
	const topic = "replicated"
	nem := &faults.Nemesis{Faults: []faults.Fault{
		leaderFault(procs, addrs, topic, "kill -9", 0, t.Logf),
		leaderFault(procs, addrs, topic, "kill -9", 6*time.Second, t.Logf),
		leaderFault(procs, addrs, topic, "SIGSTOP", 6*time.Second, t.Logf),
	}, Rounds: rounds, Healthy: 6 * time.Second, Faulty: time.Second}
	cfg := workload.Config{Brokers: addrs, Topic: topic, Partitions: 3, Producers: 2, AssignConsumers: 1, Rate: 50,
		Logf: t.Logf, ClientOpts: []kgo.Opt{kgo.RecordDeliveryTimeout(60 * time.Second)}}
	res := runFaults(t, ctx, cfg, nem, map[string]string{
		"broker": "strata, three combined nodes, replication factor 3, min.insync.replicas=2, acks=all",
		"faults": fmt.Sprintf("%d faults on the leader of %s-0: SIGKILL with a quick or a late restart, SIGSTOP past the session timeout", rounds, topic)})
	t.Logf("acknowledged %d records", res.Stats.AckedSends)
}

// TestReplicatedFailoverTime measures (STRATA_LONG=1 only; it asserts
// nothing about time) how long a client's produce stalls when the leader
// of its partition dies: an idempotent acks=all producer sends one record
// at a time to a partition replicated three times; the leader is stopped
// with SIGKILL (the controller elects once its session lapses:
// broker.session.timeout.ms, 4 s here) or SIGTERM (its registration is
// revoked at shutdown), and the time from the signal to the first
// acknowledgement of a record sent after it is logged, with the median of
// the rounds, for docs/benchmarks.md. The client refreshes its metadata
// every 250 ms at most (kgo's default, 5 s, would be most of the figure).
func TestReplicatedFailoverTime(t *testing.T) {
	if !long() {
		t.Skip("a measurement: STRATA_LONG=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	ctls := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	procs := startReplicatedOn(t, ctx, addrs, ctls, nil, nil)
	// STRATA_FAILOVER_STORE_LEADER=1: the victim is made the metadata
	// store's Raft leader before each fault, the slowest case (a new store
	// leader is elected first, and it extends every lease).
	storeLeader := os.Getenv("STRATA_FAILOVER_STORE_LEADER") == "1"
	const topic = "failover"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		// kgo refreshes metadata at most every 5 s by default, which would
		// dominate what is measured here: the cluster's failover.
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	for _, sig := range sigs() {
		var took []time.Duration
		for round := 0; round < 5; round++ {
			// Steady state: every broker up and the partition led.
			for leaderOf(ctx, addrs, topic, 0) < 0 {
				time.Sleep(200 * time.Millisecond)
			}
			for i := 0; i < 20; i++ {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			vi := leaderOf(ctx, addrs, topic, 0)
			victim := procs[vi]
			if storeLeader {
				if err := moveStoreLeader(ctx, ctls, vi); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			if sig == "SIGKILL" {
				err = victim.Kill(ctx)
			} else {
				err = victim.Term(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(start))
			if err := victim.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		sorted := slices.Clone(took)
		slices.Sort(sorted)
		t.Logf("%s of the leader -> next acknowledged produce: median %v, all %v", sig, sorted[len(sorted)/2], took)
	}
}

// sigs are the signals TestReplicatedFailoverTime measures
// (STRATA_FAILOVER_SIGNALS=SIGTERM picks one).
func sigs() []string {
	if s := os.Getenv("STRATA_FAILOVER_SIGNALS"); s != "" {
		return strings.Split(s, ",")
	}
	return []string{"SIGKILL", "SIGTERM"}
}

// moveStoreLeader makes the metadata store member on ctls[to] the Raft
// leader (etcd's MoveLeader, sent to the current leader) and waits until
// every member agrees.
func moveStoreLeader(ctx context.Context, ctls []string, to int) error {
	ids := make([]uint64, len(ctls))
	leader := uint64(0)
	for i, addr := range ctls {
		st, err := storeStatus(ctx, addr)
		if err != nil {
			return err
		}
		ids[i], leader = st.Header.MemberId, st.Leader
	}
	if leader == ids[to] {
		return nil
	}
	for i, id := range ids {
		if id != leader {
			continue
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ctls[i]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		_, err = cli.MoveLeader(ctx, ids[to])
		cli.Close()
		if err != nil {
			return fmt.Errorf("move the store leader to %s: %w", ctls[to], err)
		}
	}
	for {
		agreed := true
		for _, addr := range ctls {
			st, err := storeStatus(ctx, addr)
			agreed = agreed && err == nil && st.Leader == ids[to]
		}
		if agreed {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// storeStatus asks one metadata store member (through its node's
// controller listener) for its status.
func storeStatus(ctx context.Context, addr string) (*clientv3.StatusResponse, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cli.Status(sctx, addr)
}
