package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/checker"
	"github.com/strata-io/strata/internal/faults"
	"github.com/strata-io/strata/internal/workload"
)

// TestCheckerFindsKfakeLosses proves the checker fires on a broker that
// loses acknowledged data: kfake keeps everything in memory, so "killing" it
// (closing it and starting a new one on the same port) loses every record it
// acknowledged. Only producers run before the restart (a consumer reading
// along would have seen the records before they vanished); the drain after
// it reads the new incarnation. The checker must report the acknowledged
// records as lost (below the highest offset read again) or unseen, and the
// offsets the new incarnation reused with other values as inconsistent.
func TestCheckerFindsKfakeLosses(t *testing.T) {
	t.Parallel()
	const topic = "jepsen"
	addr := freeAddr(t)
	port, _ := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
	var cluster *kfake.Cluster
	startKfake := func(context.Context) error {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(3, topic))
		if err != nil {
			return fmt.Errorf("kfake: %w", err)
		}
		cluster = c
		return nil
	}
	if err := startKfake(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := workload.Start(ctx, workload.Config{Brokers: []string{addr}, Topic: topic, Partitions: 3,
		Producers: 2, TxnProducers: 1, Rate: 100, Logf: t.Logf,
		// The restarted kfake gives the topic a new id; records buffered for
		// the old one must fail soon, so the producers replace their
		// clients and write to the new incarnation.
		ClientOpts: []kgo.Opt{kgo.RecordDeliveryTimeout(2 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	nem := &faults.Nemesis{Rec: r.Recorder(), Rounds: 1, Healthy: 2 * time.Second, Faulty: 300 * time.Millisecond, Logf: t.Logf,
		Faults: []faults.Fault{faults.FuncFault{Label: "kfake close+restart (in-memory: loses everything)",
			InjectFn: func(context.Context) error { cluster.Close(); return nil },
			HealFn:   startKfake}}}
	if _, err := nem.Run(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // work after the restart, so later offsets overwrite earlier ones
	res := finish(t, ctx, r, map[string]string{"broker": "kfake (in-memory), closed and restarted once"})
	lost := res.Counts[checker.LostWrite] + res.Counts[checker.UnseenWrite]
	if res.Counts[checker.LostWrite] == 0 || lost < res.Stats.AckedSends/4 || res.Counts[checker.InconsistentOffset] == 0 {
		t.Fatalf("the checker missed kfake's losses:\n%s", reportText(t, res))
	}
}
