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

// TestZeroConfigAdoptsSingleNodeDir: a log directory written by the
// single-node mode (Strata before zero configuration became a one-node
// cluster: no metadata store) is adopted at the first start of the
// one-node cluster with every topic (same ids, partitions, dynamic topic
// configs), record, consumer group with its committed offsets, SCRAM user
// and producer id; a second start finds it all again and changes nothing
// (adoption is idempotent), and the cluster goes on.
func TestZeroConfigAdoptsSingleNodeDir(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	old := servertest.Start(t, servertest.Options{Dir: dir})
	if old.Server().ControllerAddr() != nil {
		t.Fatal("the single-node mode runs a metadata store")
	}
	adm := old.Admin()
	if r, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kmsg.StringPtr("7200000")}, "orders"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, "users"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	// A dynamic topic config, changed after creation.
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: kmsg.StringPtr("500000")}}, "orders"); err != nil || rs[0].Err != nil {
		t.Fatalf("alter topic config: %v %+v", err, rs)
	}
	ids := map[string][16]byte{}
	tds, err := adm.ListTopics(ctx, "orders", "users")
	if err != nil {
		t.Fatal(err)
	}
	for n, td := range tds {
		ids[n] = td.ID
	}
	prod := old.Client(kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 30 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	txp := old.Client(kgo.TransactionalID("tx-1"))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txp.ProduceSync(ctx, &kgo.Record{Topic: "users", Key: []byte("u1"), Value: []byte("alice")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	txp.Close()
	prod.Close()
	// A consumer group that consumed and committed.
	cons := old.Client(kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("billing"), kgo.DisableAutoCommit())
	seen := 0
	for seen < 30 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group consume: %d of 30", seen)
		}
		seen += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "secret"}}); err != nil {
		t.Fatalf("scram: %v", err)
	}
	old.Close()

	check := func(b *servertest.Broker, when string) {
		t.Helper()
		if b.Server().ControllerAddr() == nil {
			t.Fatalf("%s: no metadata store", when)
		}
		adm := b.Admin()
		tds, err := adm.ListTopics(ctx, "orders", "users")
		if err != nil {
			t.Fatal(err)
		}
		for n, id := range ids {
			if td, ok := tds[n]; !ok || td.ID != id || td.Err != nil {
				t.Fatalf("%s: topic %s: %+v, want id %x", when, n, td, id)
			}
		}
		if len(tds["orders"].Partitions) != 3 {
			t.Fatalf("%s: orders has %d partitions", when, len(tds["orders"].Partitions))
		}
		rc, err := adm.DescribeTopicConfigs(ctx, "orders", "users")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"orders/retention.ms": "7200000", "orders/max.message.bytes": "500000", "users/cleanup.policy": "compact"}
		for _, r := range rc {
			for _, c := range r.Configs {
				if w, ok := want[r.Name+"/"+c.Key]; ok {
					if c.MaybeValue() != w {
						t.Errorf("%s: %s %s = %s, want %s", when, r.Name, c.Key, c.MaybeValue(), w)
					}
					delete(want, r.Name+"/"+c.Key)
				}
			}
		}
		if len(want) > 0 {
			t.Errorf("%s: topic configs missing: %v", when, want)
		}
		ends, err := adm.ListEndOffsets(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		total := int64(0)
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		if total != 30 {
			t.Errorf("%s: orders holds %d records, want 30", when, total)
		}
		fo, err := adm.FetchOffsets(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 3; p++ {
			if o, ok := fo.Lookup("orders", p); !ok || o.At != 10 {
				t.Errorf("%s: billing's committed offset of orders-%d: %+v %v, want 10", when, p, o, ok)
			}
		}
		dg, err := adm.DescribeGroups(ctx, "billing")
		if err != nil || dg["billing"].Err != nil || dg["billing"].ProtocolType != "consumer" {
			t.Errorf("%s: group billing: %v %+v", when, err, dg["billing"])
		}
		us, err := adm.DescribeUserSCRAMs(ctx, "alice")
		if err != nil || us["alice"].Err != nil || len(us["alice"].CredInfos) != 1 {
			t.Errorf("%s: SCRAM user alice: %v %+v", when, err, us)
		}
		// The committed transaction's record, read committed.
		rd := b.Client(kgo.ConsumeTopics("users"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer rd.Close()
		for {
			fs := rd.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s: committed transactional record not read", when)
			}
			if fs.NumRecords() > 0 {
				if r := fs.Records()[0]; string(r.Value) != "alice" {
					t.Fatalf("%s: users: %q", when, r.Value)
				}
				break
			}
		}
	}
	b := servertest.Start(t, servertest.Options{Dir: dir, OneNodeCluster: true})
	check(b, "first start as a one-node cluster")
	// A new transactional producer gets a producer id past the adopted
	// ones (the store's blocks start after the single node's).
	txp = b.Client(kgo.TransactionalID("tx-2"))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txp.ProduceSync(ctx, &kgo.Record{Topic: "users", Key: []byte("u2"), Value: []byte("bob")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	txp.Close()
	b.Restart()
	check(b, "second start (adoption already done)")
	if r, err := b.Admin().CreateTopic(ctx, 2, 1, nil, "after"); err != nil || r.Err != nil {
		t.Fatalf("create after adoption: %v %v", err, r.Err)
	}
}
