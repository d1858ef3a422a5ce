package compat

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runTxnSuite drives a client's transactional producer: a committed
// transaction that also commits a group offset (consume-transform-produce),
// an aborted one, and a committed one. READ_COMMITTED readers (the client
// itself and franz-go) see only committed records, READ_UNCOMMITTED readers
// see everything, the offset of the committed transaction is the group's
// and the aborted one's is not; all of it survives a broker restart.
func runTxnSuite(t *testing.T, c *Client) {
	if !c.can(opTransaction) && !c.can(opIsolation) {
		t.Skipf("%s has neither a transactional producer nor an isolation level", c.Name)
	}
	b := startBroker(t, brokerOpts{extra: map[string]string{"group.initial.rebalance.delay.ms": "0"}})
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	adm := b.Admin(t)
	for topic, parts := range map[string]int32{"txn-out": 2, "txn-in": 1} {
		if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	produceSpread(t, b, "txn-in", 1, 10, 0)

	rec := func(v string, p int32) Rec { return Rec{Key: strp("k-" + v), Value: strp(v), Partition: p} }
	group := "txn-etl-" + c.Name
	txnOp := Op{Op: opTransaction, Topic: "txn-out", TransactionalID: "compat-" + c.Name, Txns: []Txn{
		{Records: []Rec{rec("a0", 0), rec("a1", 1)}, Group: group, OffsetTopic: "txn-in", Offset: 5},
		{Records: []Rec{rec("b0", 0), rec("b1", 1)}, Group: group, OffsetTopic: "txn-in", Offset: 8, Abort: true},
		{Records: []Rec{rec("c0", 0)}},
	}}
	producer := c
	if !c.can(opTransaction) {
		producer = saramaClient() // the client under test only reads
	}
	producer.Must(t, b.Addr(), txnOp)

	check := func(t *testing.T) {
		if got, want := readValues(t, b.Addr(), "txn-out", kgo.ReadCommitted(), 3), []string{"a0", "c0", "a1"}; !slices.Equal(got, want) {
			t.Errorf("READ_COMMITTED (franz-go) saw %v, want %v", got, want)
		}
		if got, want := readValues(t, b.Addr(), "txn-out", kgo.ReadUncommitted(), 5), []string{"a0", "b0", "c0", "a1", "b1"}; !slices.Equal(got, want) {
			t.Errorf("READ_UNCOMMITTED (franz-go) saw %v, want %v", got, want)
		}
		if got := committed(t, b, group, "txn-in"); got[0] != 5 {
			t.Errorf("group %s committed %v on txn-in, want partition 0 at 5 (the aborted transaction's 8 must not count)", group, got)
		}
		if !c.can(opIsolation) {
			return
		}
		rc := c.Must(t, b.Addr(), Op{Op: opFetch, Topic: "txn-out", Partition: 0, Offset: -2, Max: 2, Isolation: "read_committed"})
		if got := values(rc.Records); !slices.Equal(got, []string{"a0", "c0"}) {
			t.Errorf("%s READ_COMMITTED fetch of partition 0 saw %v, want [a0 c0]", c.Name, got)
		}
		ru := c.Must(t, b.Addr(), Op{Op: opFetch, Topic: "txn-out", Partition: 0, Offset: -2, Max: 3, Isolation: "read_uncommitted"})
		if got := values(ru.Records); !slices.Equal(got, []string{"a0", "b0", "c0"}) {
			t.Errorf("%s READ_UNCOMMITTED fetch of partition 0 saw %v, want [a0 b0 c0]", c.Name, got)
		}
	}
	t.Run("Visibility", check)
	b.Restart()
	t.Run("AfterRestart", check)
}

// values lists the records' values in order.
func values(recs []Rec) []string {
	var out []string
	for _, r := range recs {
		if r.Value != nil {
			out = append(out, *r.Value)
		}
	}
	return out
}

// readValues reads n records of topic from the start with franz-go at the
// given isolation level and returns their values sorted by partition and
// offset (waiting at most opTimeout; fewer records fail the caller's check).
func readValues(t *testing.T, addr, topic string, iso kgo.IsolationLevel, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("fetch %s/%d: %v", tp, p, err)
			}
		})
		recs = append(recs, fs.Records()...)
	}
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

func TestTransactionsSarama(t *testing.T) { t.Parallel(); runTxnSuite(t, saramaClient()) }

func TestTransactionsKafkaJS(t *testing.T) { t.Parallel(); runTxnSuite(t, kafkaJSClient(t)) }

// kcat (librdkafka) has no transactional producer: it reads what sarama's
// transactions wrote, at both isolation levels.
func TestTransactionsKcat(t *testing.T) { t.Parallel(); runTxnSuite(t, kcatClient(t)) }

// kafka-go (v0.4.51) is left out: its Reader knows nothing of control
// batches, so it hands transaction markers to the application as messages
// and keeps aborted records even at READ_COMMITTED (docs/compatibility.md).

func TestTransactionsConfluentKafkaPython(t *testing.T) {
	t.Parallel()
	runTxnSuite(t, confluentClient(t))
}
