package faults

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/faults"
	"github.com/strata-io/strata/internal/workload"
)

// proxies puts a toxiproxy proxy (github.com/Shopify/toxiproxy/v2, used
// as a library) in front of each upstream address and returns them with
// their listen addresses; they stop at the end of the test.
func proxies(t *testing.T, upstreams []string) ([]*toxiproxy.Proxy, []string) {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	var ps []*toxiproxy.Proxy
	var addrs []string
	for i, up := range upstreams {
		listen := freeAddr(t)
		p := toxiproxy.NewProxy(srv, fmt.Sprintf("node-%d", i+1), listen, up)
		if err := p.Start(); err != nil {
			t.Fatalf("proxy %s -> %s: %v", listen, up, err)
		}
		t.Cleanup(p.Stop)
		ps = append(ps, p)
		addrs = append(addrs, listen)
	}
	return ps, addrs
}

// metricSum adds up a counter over the nodes' metrics listeners (-1 when
// one cannot be read).
func metricSum(ctx context.Context, metrics []string, name string) float64 {
	var sum float64
	for _, m := range metrics {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+m+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return -1
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				sum += v
			}
		}
		resp.Body.Close()
		cancel()
	}
	return sum
}

// TestClusterSlowLeaderLink: three nodes each behind a toxiproxy proxy
// that every client and every follower goes through (the node advertises
// the proxy: one listener per node is also the inter-broker listener in
// this release, docs/replication.md). While the workload runs, 4 s of
// latency each way is added to the proxy of the leader of slow-0 for 12 s:
// its followers' fetches take 8 s, longer than replica.lag.time.max.ms
// (3 s), so the leader shrinks its ISR to itself (min.insync.replicas=1
// keeps acks=all writes going, acknowledged by the leader alone); the
// latency is removed, the followers catch up and rejoin. The ISR must have
// shrunk (kafka_server_replicamanager_isrshrinks_total) and nothing
// acknowledged may be lost (the checker). Latency, not loss: toxiproxy
// delays every byte, it drops none. Rounds: 1; 3 with STRATA_LONG=1.
func TestClusterSlowLeaderLink(t *testing.T) {
	t.Parallel()
	rounds := 1
	if long() {
		rounds = 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*40*time.Second+3*time.Minute)
	defer cancel()
	real := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	metrics := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	px, advertised := proxies(t, real)
	startReplicated(t, ctx, real, advertised, metrics, "--min.insync.replicas", "1", "--replica.lag.time.max.ms", "3000")
	const topic = "slow"
	const toxic = `{"name":"slow","type":"latency","stream":"%s","attributes":{"latency":4000,"jitter":200}}`
	var victim *toxiproxy.Proxy
	nem := &faults.Nemesis{Rounds: rounds, Healthy: 8 * time.Second, Faulty: 12 * time.Second,
		Faults: []faults.Fault{faults.FuncFault{Label: "4 s latency each way on every connection to the leader of slow-0 (toxiproxy)",
			InjectFn: func(ctx context.Context) error {
				i := leaderOf(ctx, advertised, topic, 0)
				if i < 0 {
					i = 0
				}
				victim = px[i]
				t.Logf("latency on node-%d (leader of %s-0)", i+1, topic)
				for _, stream := range []string{"upstream", "downstream"} {
					if _, err := victim.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(toxic, stream))); err != nil {
						return fmt.Errorf("add toxic: %w", err)
					}
				}
				return nil
			},
			HealFn: func(ctx context.Context) error {
				victim.Toxics.ResetToxics(ctx)
				return nil
			}}}}
	cfg := workload.Config{Brokers: advertised, Topic: topic, Partitions: 3, Producers: 2, AssignConsumers: 1, Rate: 50,
		Logf: t.Logf, ClientOpts: []kgo.Opt{kgo.RecordDeliveryTimeout(60 * time.Second)}}
	before := metricSum(ctx, metrics, "kafka_server_replicamanager_isrshrinks_total")
	res := runFaults(t, ctx, cfg, nem, map[string]string{
		"broker": "strata, three combined nodes behind toxiproxy, replication factor 3, min.insync.replicas=1, replica.lag.time.max.ms=3000, acks=all",
		"faults": fmt.Sprintf("%d x 4 s latency each way on the leader's proxy for 12 s", rounds)})
	shrinks := metricSum(ctx, metrics, "kafka_server_replicamanager_isrshrinks_total") - before
	expands := metricSum(ctx, metrics, "kafka_server_replicamanager_isrexpands_total")
	t.Logf("acknowledged %d records; ISR shrinks %v, expands %v", res.Stats.AckedSends, shrinks, expands)
	if shrinks <= 0 {
		t.Fatalf("the slow link never shrank the ISR (shrinks %v): the fault did not bite", shrinks)
	}
}
