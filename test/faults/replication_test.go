package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
	const n = 3
	addrs := make([]string, n)
	ctls := make([]string, n)
	var voters []string
	for i := range addrs {
		addrs[i], ctls[i] = freeAddr(t), freeAddr(t)
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, ctls[i]))
	}
	base := t.TempDir()
	procs := make([]*faults.Proc, n)
	for i := range procs {
		dir := filepath.Join(base, fmt.Sprintf("node-%d", i+1))
		args := []string{"serve",
			"--node.id", fmt.Sprint(i + 1),
			"--process.roles", "broker,controller",
			"--listeners", fmt.Sprintf("PLAINTEXT://%s,CONTROLLER://%s", addrs[i], ctls[i]),
			"--controller.listener.names", "CONTROLLER",
			"--controller.quorum.voters", strings.Join(voters, ","),
			"--broker.session.timeout.ms", "4000",
			"--broker.heartbeat.interval.ms", "1000",
			"--default.replication.factor", "3",
			"--min.insync.replicas", "2",
			"--replica.lag.time.max.ms", "5000",
			"--strata.metrics.listener", "127.0.0.1:0",
			"--log.dirs", dir,
			"--strata.log.format", "json",
		}
		procs[i] = faults.NewProc(faults.ProcSpec{Name: fmt.Sprintf("broker-%d", i+1), Path: strataBin,
			Args: append(args, extra...), Dir: base, Ready: faults.StrataReady, LogPath: dir + ".log"})
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
	return procs, addrs
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

// killLeader is a Fault that SIGKILLs the broker leading topic's partition
// 0 at the time of the injection and restarts it on heal.
func killLeader(procs []*faults.Proc, addrs []string, topic string, logf func(string, ...any)) faults.Fault {
	var killed *faults.Proc
	return faults.FuncFault{Label: "kill -9 the leader of " + topic + "-0",
		InjectFn: func(ctx context.Context) error {
			i := leaderOf(ctx, addrs, topic, 0)
			if i < 0 {
				i = 0
			}
			killed = procs[i]
			logf("killing %s (leader of %s-0)", killed.Name(), topic)
			return killed.Kill(ctx)
		},
		HealFn: func(ctx context.Context) error { return killed.Start(ctx) },
	}
}

// TestReplicatedSIGKILL: three brokers, every partition replicated three
// times with min.insync.replicas=2, idempotent franz-go producers with
// acks=all; the broker leading partition 0 is SIGKILLed mid-produce, the
// controller elects another ISR member once its session lapses, and the
// killed broker is restarted, truncates where its log diverges and rejoins
// (3 rounds; 20 with STRATA_LONG=1). Every acknowledged record must be
// read back, in order, without duplicates (the workload's checker), from
// the cluster after it heals.
func TestReplicatedSIGKILL(t *testing.T) {
	t.Parallel()
	rounds := 3
	if long() {
		rounds = 20
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*40*time.Second+3*time.Minute)
	defer cancel()
	procs, addrs := replicatedCluster(t, ctx)
	const topic = "replicated"
	nem := &faults.Nemesis{Faults: []faults.Fault{killLeader(procs, addrs, topic, t.Logf)}, Rounds: rounds,
		Healthy: 6 * time.Second, Faulty: 8 * time.Second}
	cfg := workload.Config{Brokers: addrs, Topic: topic, Partitions: 3, Producers: 2, AssignConsumers: 1, Rate: 50,
		Logf: t.Logf, ClientOpts: []kgo.Opt{kgo.RecordDeliveryTimeout(60 * time.Second)}}
	res := runFaults(t, ctx, cfg, nem, map[string]string{
		"broker": "strata, three combined nodes, replication factor 3, min.insync.replicas=2, acks=all",
		"faults": fmt.Sprintf("%d x SIGKILL of the leader of %s-0, restarted after 8 s", rounds, topic)})
	t.Logf("acknowledged %d records", res.Stats.AckedSends)
}
