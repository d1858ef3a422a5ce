package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/checker"
	"github.com/strata-io/strata/internal/faults"
	"github.com/strata-io/strata/internal/workload"
)

// singleNode starts one `strata serve` from the built binary on a fixed
// loopback port (clients find it again after restarts) with its data in dir.
func singleNode(t *testing.T, ctx context.Context, dir string, extra ...string) (*faults.Proc, string) {
	t.Helper()
	addr := freeAddr(t)
	p := faults.NewProc(faults.StrataNode(strataBin, "strata", dir, addr, extra...))
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("broker log: %s.log", dir)
		}
	})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return p, addr
}

// strataWorkload is the mix every single-node run uses.
func strataWorkload(addr, topic string, t *testing.T) workload.Config {
	return workload.Config{Brokers: []string{addr}, Topic: topic, Partitions: 3,
		Producers: 2, TxnProducers: 1, GroupConsumers: 1, AssignConsumers: 1, EtlWorkers: 1, Rate: 50, Logf: t.Logf,
		TxnTimeout: 5 * time.Second,
		ClientOpts: []kgo.Opt{kgo.RecordDeliveryTimeout(30 * time.Second)}}
}

// runFaults runs the workload against addr while nem injects its faults,
// then heals, drains and checks; it fails the test on any anomaly.
func runFaults(t *testing.T, ctx context.Context, cfg workload.Config, nem *faults.Nemesis, notes map[string]string) *checker.Result {
	t.Helper()
	r, err := workload.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nem.Rec = r.Recorder()
	nem.Logf = t.Logf
	n, err := nem.Run(ctx)
	if err != nil {
		// A fault that could not be healed (a node that died) ends the
		// faults; the history is still drained and checked (the other
		// replicas hold every acknowledged record), not thrown away.
		t.Errorf("%v: the faults stop here; checking the history so far", err)
	}
	time.Sleep(nem.Healthy) // a healthy stretch after the last heal, before stopping
	notes["faults injected"] = fmt.Sprint(n)
	res := finish(t, ctx, r, notes)
	if !res.Valid() {
		t.Fatalf("anomalies:\n%s", reportText(t, res))
	}
	if res.Stats.AckedSends == 0 || res.Stats.ValuesRead == 0 {
		t.Fatalf("the workload did nothing:\n%s", reportText(t, res))
	}
	return res
}

// TestStrataSIGKILL: one node, acks=all, SIGKILLed and restarted under the
// whole workload, with strata.durable.acks=true (the default: acknowledged
// means fsynced) and false (Kafka's semantics: acknowledged means in the page
// cache, which a process crash does not lose; a power cut would, see the
// CrashFS tests). Nothing acknowledged may be lost, no offset may change
// value, no duplicate, no aborted or uncommitted read, every session in
// order.
func TestStrataSIGKILL(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("durable.acks=%v", durable), func(t *testing.T) {
			t.Parallel()
			rounds := 3
			if !durable {
				rounds = 2
			}
			if long() {
				rounds = 50
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*30*time.Second+2*time.Minute)
			defer cancel()
			dir := filepath.Join(t.TempDir(), "data")
			p, addr := singleNode(t, ctx, dir, fmt.Sprintf("--strata.durable.acks=%v", durable))
			nem := &faults.Nemesis{Faults: []faults.Fault{faults.KillRestart(p)}, Rounds: rounds,
				Healthy: 2 * time.Second, Faulty: 200 * time.Millisecond}
			runFaults(t, ctx, strataWorkload(addr, "sigkill", t), nem, map[string]string{
				"broker": fmt.Sprintf("strata single node, strata.durable.acks=%v, acks=all", durable),
				"faults": fmt.Sprintf("%d x SIGKILL then restart", rounds)})
		})
	}
}
