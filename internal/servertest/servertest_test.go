package servertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/servertest"
)

// TestStartRestart produces to a broker, restarts it on the same port and
// reads the records back through a client that kept its seed address.
func TestStartRestart(t *testing.T) {
	b := servertest.Start(t, servertest.Options{Metrics: true})
	if b.MetricsAddr() == "" || b.NodeID != 1 || b.Server() == nil {
		t.Fatalf("metrics %q node %d server %v", b.MetricsAddr(), b.NodeID, b.Server())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.Admin().CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(kgo.DefaultProduceTopic("t"))
	if err := cl.ProduceSync(ctx, kgo.StringRecord("a")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	addr := b.Addr()
	b.RestartSamePort()
	if b.Addr() != addr {
		t.Fatalf("RestartSamePort: %s, was %s", b.Addr(), addr)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("b")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	rd := b.Client(kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 2 {
		fs := rd.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if got[0] != "a" || got[1] != "b" {
		t.Fatalf("read back %q", got)
	}
}

// TestStartN starts three brokers with their own directories and node ids;
// the Configure hook sees every node.
func TestStartN(t *testing.T) {
	seen := make([]bool, 3)
	c := servertest.StartN(t, 3, servertest.Options{Configure: func(i int, cfg *config.Broker) error {
		seen[i] = true
		return cfg.Set("log.retention.ms", "60000")
	}})
	dirs := map[string]bool{}
	for i, b := range c.Brokers {
		if !seen[i] || b.NodeID != int32(i+1) || dirs[b.Dir] {
			t.Fatalf("node %d: configured %v, id %d, dir %s shared", i, seen[i], b.NodeID, b.Dir)
		}
		dirs[b.Dir] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Today the nodes are independent one-node clusters: each answers
	// Metadata for itself only.
	for i, b := range c.Brokers {
		m, err := b.Admin().BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Brokers) != 1 || m.Brokers[0].NodeID != int32(i+1) {
			t.Fatalf("node %d metadata brokers %+v", i+1, m.Brokers)
		}
	}
	if len(c.Addrs()) != 3 {
		t.Fatalf("addrs %v", c.Addrs())
	}
}
