package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/servertest"
)

// metricValue scrapes one unlabelled metric from a broker's /metrics.
func metricValue(t *testing.T, b *servertest.Broker, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + b.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("metric %s not exported", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestUncleanElectionLoss: a topic with unclean.leader.election.enable,
// replication factor 2 on nodes 1 and 2, min.insync.replicas=1. Node 2
// stops and node 1 alone acknowledges 15 more records; node 1 stops, node 2
// returns and is elected although out of sync (unclean); when node 1
// returns it truncates the 15 committed records to follow the new leader.
// Node 2 counts its unclean leadership, node 1 exports the 15 lost offsets
// (strata_replica_unclean_lost_offsets_total) and logs them.
func TestUncleanElectionLoss(t *testing.T) {
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3, Metrics: true, Settings: map[string]string{
		"replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "200", "auto.leader.rebalance.enable": "false"},
		Logger: servertest.TestLogger(t, slog.LevelWarn), ClientOpts: []kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createAssignedConfigs(t, c, "dirty", [][]int32{{1, 2}}, map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("dirty"), kgo.RecordRetries(100))
	produce := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(20)
	c.Brokers[1].Close() // node 2
	eventually(t, "ISR of node 1 alone", func() error {
		if _, isr := partitionState(t, c.Brokers[0].Addr(), "dirty", 0); len(isr) != 1 {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
	produce(15) // committed on node 1 only
	c.Brokers[0].Close()
	c.Brokers[1].Open()
	leaderIs(t, c.Brokers[2].Addr(), "dirty", 0, 2)
	produce(5)
	if v := metricValue(t, c.Brokers[1], "strata_replica_unclean_leaderships_total"); v != 1 {
		t.Fatalf("node 2's unclean leaderships: %v", v)
	}
	c.Brokers[0].Open()
	eventually(t, "node 1 counts what it truncated", func() error {
		if v := metricValue(t, c.Brokers[0], "strata_replica_unclean_lost_offsets_total"); v != 15 {
			return fmt.Errorf("lost offsets %v", v)
		}
		return nil
	})
}
