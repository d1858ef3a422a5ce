package server_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/servertest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactions end to end with franz-go against a real broker: visibility
// for both isolation levels, the last stable offset, consume-transform-
// produce with group offsets, fencing, timeouts and restarts.

func txnProducer(tb *servertest.Broker, id string, opts ...kgo.Opt) *kgo.Client {
	return tb.Client(append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic("out"),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

func createTopics(t *testing.T, tb *servertest.Broker, parts int32, names ...string) {
	t.Helper()
	if _, err := tb.Admin().CreateTopics(ctxT(t), parts, 1, nil, names...); err != nil {
		t.Fatal(err)
	}
}

// readAll reads topic from the start at an isolation level until n records
// arrived or a quiet period passed; returns values by partition and offset.
func readAll(t *testing.T, tb *servertest.Broker, topic string, iso kgo.IsolationLevel, n int) []string {
	t.Helper()
	cl := tb.Client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	var recs []*kgo.Record
	deadline := time.Now().Add(10 * time.Second)
	for len(recs) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("fetch %s/%d: %v", tp, p, err)
			}
		})
		recs = append(recs, fs.Records()...)
	}
	// A short extra poll catches records that must not be there.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	recs = append(recs, cl.PollFetches(ctx).Records()...)
	cancel()
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

func produceTxn(t *testing.T, cl *kgo.Client, commit bool, vals ...string) {
	t.Helper()
	ctx := ctxT(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: int32(i % 2)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit=%v): %v", commit, err)
	}
}

func TestTxnCommitAbortVisibility(t *testing.T) {
	tb := startBroker(t, "", nil)
	createTopics(t, tb, 2, "out")
	cl := txnProducer(tb, "vis")
	produceTxn(t, cl, true, "a0", "a1")
	produceTxn(t, cl, false, "b0", "b1")
	produceTxn(t, cl, true, "c0", "c1")
	if got, want := readAll(t, tb, "out", kgo.ReadCommitted(), 4), []string{"a0", "c0", "a1", "c1"}; !slices.Equal(got, want) {
		t.Errorf("read_committed: %v, want %v", got, want)
	}
	if got, want := readAll(t, tb, "out", kgo.ReadUncommitted(), 6), []string{"a0", "b0", "c0", "a1", "b1", "c1"}; !slices.Equal(got, want) {
		t.Errorf("read_uncommitted: %v, want %v", got, want)
	}
	// Markers take offsets: a0 m b0 m c0 m on each partition.
	p, err := tb.Server().Broker().Partition("out", 0)
	if err != nil {
		t.Fatal(err)
	}
	if hw, lso := p.Log.HighWatermark(), p.Log.LastStableOffset(); hw != 6 || lso != 6 {
		t.Errorf("hw %d lso %d, want 6 6", hw, lso)
	}
	tb.Restart()
	if got, want := readAll(t, tb, "out", kgo.ReadCommitted(), 4), []string{"a0", "c0", "a1", "c1"}; !slices.Equal(got, want) {
		t.Errorf("read_committed after restart: %v, want %v", got, want)
	}
}

// listEnd returns ListOffsets latest for out/0 at an isolation level.
func listEnd(t *testing.T, tb *servertest.Broker, iso int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = iso
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "out"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), tb.Client())
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatal(err)
	}
	return p.Offset
}

func TestTxnOpenTransactionHoldsLSO(t *testing.T) {
	tb := startBroker(t, "", nil)
	createTopics(t, tb, 2, "out")
	plain := tb.Client(kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := plain.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl := txnProducer(tb, "open")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("pending")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if uncommitted, committed := listEnd(t, tb, 0), listEnd(t, tb, 1); uncommitted != 3 || committed != 1 {
		t.Errorf("ListOffsets latest: read_uncommitted %d (want 3), read_committed %d (want the LSO, 1)", uncommitted, committed)
	}
	if got := readAll(t, tb, "out", kgo.ReadCommitted(), 1); !slices.Equal(got, []string{"before"}) {
		t.Errorf("read_committed during the open transaction: %v, want [before]", got)
	}
	if err := cl.EndTransaction(ctxT(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got, want := readAll(t, tb, "out", kgo.ReadCommitted(), 3), []string{"before", "pending", "after"}; !slices.Equal(got, want) {
		t.Errorf("read_committed after commit: %v, want %v", got, want)
	}
}

func TestTxnGroupTransactSession(t *testing.T) {
	tb := startBroker(t, "", nil)
	createTopics(t, tb, 2, "in", "out")
	src := tb.Client(kgo.DefaultProduceTopic("in"))
	const n = 200
	for i := range n {
		src.Produce(context.Background(), &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := src.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(tb.Addr()), kgo.TransactionalID("etl"),
		kgo.ConsumerGroup("etl-group"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("out"), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx := ctxT(t)
	moved := 0
	for moved < n && ctx.Err() == nil {
		fs := sess.PollFetches(ctx)
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: append([]byte("etl-"), r.Value...)}, nil)
			moved++
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatal(err)
		}
		if !committed {
			t.Fatal("transaction not committed")
		}
	}
	got := readAll(t, tb, "out", kgo.ReadCommitted(), n)
	if len(got) != n {
		t.Fatalf("out has %d committed records, want %d", len(got), n)
	}
	offs, err := tb.Admin().FetchOffsets(ctxT(t), "etl-group")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, ps := range offs {
		for _, o := range ps {
			total += o.At
		}
	}
	if total != n {
		t.Errorf("group committed %d in total, want %d", total, n)
	}
}

func TestTxnFencing(t *testing.T) {
	tb := startBroker(t, "", nil)
	createTopics(t, tb, 2, "out")
	old := txnProducer(tb, "fence")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A new producer with the same id fences the old one and aborts its
	// open transaction.
	cur := txnProducer(tb, "fence")
	produceTxn(t, cur, true, "fresh")
	err := old.EndTransaction(ctxT(t), kgo.TryCommit)
	if err == nil {
		t.Fatal("the fenced producer committed")
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("fenced producer's commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	if got := readAll(t, tb, "out", kgo.ReadCommitted(), 1); !slices.Equal(got, []string{"fresh"}) {
		t.Errorf("read_committed: %v, want [fresh]", got)
	}
}

func TestTxnTimeoutAbortsAndSurvivesRestart(t *testing.T) {
	ov := map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"}
	tb := startBroker(t, "", ov)
	createTopics(t, tb, 2, "out")
	cl := txnProducer(tb, "slow", kgo.TransactionTimeout(2*time.Second))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("stuck")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p, err := tb.Server().Broker().Partition("out", 0)
	if err != nil {
		t.Fatal(err)
	}
	if lso := p.Log.LastStableOffset(); lso != 0 {
		t.Fatalf("lso %d with an open transaction at 0", lso)
	}
	// Restart with the transaction open: it is still open afterwards, then
	// the coordinator aborts it after its timeout.
	tb.Restart()
	p, err = tb.Server().Broker().Partition("out", 0)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for p.Log.LastStableOffset() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if lso, hw := p.Log.LastStableOffset(), p.Log.HighWatermark(); lso != 2 || hw != 2 {
		t.Fatalf("after the timeout: lso %d hw %d, want 2 2 (record + abort marker)", lso, hw)
	}
	if got := readAll(t, tb, "out", kgo.ReadCommitted(), 0); len(got) != 0 {
		t.Errorf("read_committed after the abort: %v, want nothing", got)
	}
}

// A transactional batch for a partition that was never added to the
// transaction is refused with INVALID_TXN_STATE (Kafka's KIP-890 check).
func TestTxnProduceToUnaddedPartition(t *testing.T) {
	tb := startBroker(t, "", nil)
	createTopics(t, tb, 2, "out")
	cl := tb.Client()
	ctx := ctxT(t)
	txnID := "raw"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &txnID
	init.TransactionTimeoutMillis = 60000
	ir, err := init.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, kerr.ErrorForCode(ir.ErrorCode))
	}
	batch := rawTxnBatch(ir.ProducerID, ir.ProducerEpoch)
	prod := kmsg.NewPtrProduceRequest()
	prod.TransactionID = &txnID
	prod.Acks = -1
	prod.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "out"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	prod.Topics = append(prod.Topics, rt)
	pr, err := prod.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := pr.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTxnState.Code {
		t.Errorf("produce to an unadded partition: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	p, _ := tb.Server().Broker().Partition("out", 0)
	if leo := p.Log.LogEndOffset(); leo != 0 {
		t.Errorf("log end offset %d after a refused produce", leo)
	}
}

// rawTxnBatch encodes a one-record transactional batch.
func rawTxnBatch(pid int64, epoch int16) []byte {
	return recordtest.Batch(record.BatchHeader{Attributes: record.AttrTransactional, BaseTimestamp: time.Now().UnixMilli(),
		ProducerID: pid, ProducerEpoch: epoch}, record.Record{Value: []byte("v")})
}
