package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/servertest"
)

// TestZeroConfigOneNodeCluster: a node given no KRaft setting, started as
// `strata serve` starts it, is a one-node cluster on the cluster code path
// (a single-member metadata store on a loopback controller listener chosen
// at start): topics live in the store (a request of many topics is
// created together), dynamic broker configs are accepted, and a restart —
// on another controller port — brings back every topic and record.
func TestZeroConfigOneNodeCluster(t *testing.T) {
	dir := t.TempDir()
	b := servertest.Start(t, servertest.Options{Dir: dir, OneNodeCluster: true, Metrics: true})
	// Generous: a loaded two-core machine; nothing here is timed.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if b.Server().ControllerAddr() == nil {
		t.Fatal("no controller listener: the node runs without the metadata store")
	}
	adm := b.Admin()
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("t%d", i))
	}
	rs, err := adm.CreateTopics(ctx, 2, 1, nil, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs.Sorted() {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "t0"); err == nil && r.Err == nil {
		t.Fatal("t0 created twice")
	}
	cl := b.Client(kgo.DefaultProduceTopic("t7"))
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Dynamic broker configs need the metadata store: the single-node
	// mode refuses them.
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("3600000")}}, 1); err != nil {
		t.Fatalf("dynamic broker config: %v", err)
	}
	cl.Close()

	b.Restart()
	if again := b.Server().ControllerAddr(); again == nil {
		t.Fatal("no controller listener after the restart")
	}
	adm = b.Admin()
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if td, ok := tds[n]; !ok || len(td.Partitions) != 2 {
			t.Fatalf("topic %s after the restart: %+v", n, td)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, "t7")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != 10 {
		t.Fatalf("records after the restart: %d, want 10", total)
	}
	rc, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range rc[0].Configs {
		if c.Key == "log.retention.ms" && c.Value != nil && *c.Value == "3600000" {
			found = true
		}
	}
	if !found {
		t.Fatal("dynamic broker config lost at the restart")
	}
}
