package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkCluster10k measures issue 11's benchmark rows against three
// combined nodes (processes of the built binary, random loopback ports):
// CreateTopics of one topic of STRATA_CLUSTER_PARTITIONS (10,000) RF=1
// partitions placed across the three brokers (the request, then until
// every broker's Metadata shows every partition led); Metadata for all of
// them from one broker (median of 5, franz-go raw request); a broker's
// start time with its third of the partitions (SIGTERM, start again,
// until listening); controller failover (kill -9 of the active
// controller: until another is reported, and until its partitions are
// shown offline, leader -1, which needs its lease to expire first); and
// resident memory per hosted partition. It prints one table.
//
//	go test ./test/e2e/ -run '^$' -bench Cluster10k -benchtime 1x -timeout 30m -v
func BenchmarkCluster10k(b *testing.B) {
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x")
	}
	parts := envInt("STRATA_CLUSTER_PARTITIONS", 10000)
	defer func(d time.Duration) { startTimeout = d }(startTimeout)
	startTimeout = 10 * time.Minute
	base := b.TempDir()
	ports := randomPorts(b, 3)
	var nodes []*node
	for i := 1; i <= 3; i++ {
		dir := filepath.Join(base, fmt.Sprintf("n%d", i))
		nodes = append(nodes, &node{id: int32(i), dir: dir, args: combinedArgs(i, ports, dir, "--strata.log.format", "json")})
	}
	startNodes(b, nodes...)
	ctx := ctxFor(b, 30*time.Minute)
	var rows []string
	row := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		rows = append(rows, line)
		b.Log(line)
	}
	adm := kadm.NewClient(newClient(b, kgo.SeedBrokers(nodes[0].Kafka), kgo.RequestTimeoutOverhead(5*time.Minute)))

	rss0 := map[int32]int64{}
	for _, n := range nodes {
		rss0[n.id], _ = procStats(b, n.proc)
	}
	start := time.Now()
	r, err := adm.CreateTopic(ctx, int32(parts), 1, nil, "big")
	if err != nil || r.Err != nil {
		b.Fatalf("create: %v %v", err, r.Err)
	}
	created := time.Since(start)
	leaders := map[int32]int32{}
	for _, n := range nodes {
		waitFor(b, ctx, "every partition led", func() error {
			md := metadata(b, ctx, n.Kafka, "big")
			if len(md.Topics[0].Partitions) != parts {
				return fmt.Errorf("%d partitions", len(md.Topics[0].Partitions))
			}
			for _, p := range md.Topics[0].Partitions {
				if p.ErrorCode != 0 {
					return fmt.Errorf("partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
				leaders[p.Partition] = p.Leader
			}
			return nil
		})
	}
	spread := time.Since(start)
	per := map[int32]int{}
	for _, l := range leaders {
		per[l]++
	}
	row("CreateTopics, %d partitions over 3 brokers: answered in %v, led on every broker after %v (leaders per broker %v)",
		parts, created.Round(time.Millisecond), spread.Round(time.Millisecond), per)

	var mds []time.Duration
	for range 5 {
		t0 := time.Now()
		md := metadata(b, ctx, nodes[1].Kafka, "big")
		mds = append(mds, time.Since(t0))
		if len(md.Topics[0].Partitions) != parts {
			b.Fatal("short metadata")
		}
	}
	row("Metadata v12 for %d partitions from one broker: median %v of 5 (min %v)", parts,
		median(mds).Round(time.Microsecond), slices.Min(mds).Round(time.Microsecond))

	for _, n := range nodes {
		rss, fds := procStats(b, n.proc)
		row("node %d: RSS %d MiB (%d MiB before the topic), %d open files, %d partitions led: %.1f KiB more RSS per partition",
			n.id, rss>>20, rss0[n.id]>>20, fds, per[n.id], float64(rss-rss0[n.id])/1024/float64(max(per[n.id], 1)))
	}

	// Broker start with its partitions (clean shutdown first).
	n3 := nodes[2]
	if code := n3.Term(); code != 0 {
		b.Fatalf("node 3 exit %d", code)
	}
	t0 := time.Now()
	n3.restart(b)
	row("node 3 start after SIGTERM with %d partitions: listening after %v", per[3], time.Since(t0).Round(time.Millisecond))
	waitFor(b, ctx, "node 3 leads again", func() error {
		md := metadata(b, ctx, nodes[0].Kafka, "big")
		for _, p := range md.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
		return nil
	})

	// Controller failover with the partitions.
	ctl := metadata(b, ctx, nodes[0].Kafka).ControllerID
	victim := nodes[ctl-1]
	other := nodes[ctl%3]
	t0 = time.Now()
	victim.Kill()
	waitFor(b, ctx, "another controller", func() error {
		if c := metadata(b, ctx, other.Kafka).ControllerID; c == ctl || c < 1 {
			return fmt.Errorf("controller %d", c)
		}
		return nil
	})
	newCtl := time.Since(t0)
	waitFor(b, ctx, "the victim's partitions offline", func() error {
		md := metadata(b, ctx, other.Kafka, "big")
		for _, p := range md.Topics[0].Partitions {
			if leaders[p.Partition] == victim.id && p.Leader != -1 {
				return fmt.Errorf("partition %d still led by %d", p.Partition, p.Leader)
			}
		}
		return nil
	})
	offline := time.Since(t0)
	row("kill -9 of the active controller %d (broker.session.timeout.ms=9000): another controller after %v; its %d partitions offline after %v (%v after a 9 s lease)",
		ctl, newCtl.Round(time.Millisecond), per[victim.id], offline.Round(time.Millisecond), (offline - 9*time.Second).Round(time.Millisecond))
	for _, l := range rows {
		fmt.Println(l)
	}
}
