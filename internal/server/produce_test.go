package server_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// idemBatch builds an idempotent batch of n records.
func idemBatch(t *testing.T, pid int64, seq int32, n int) []byte {
	t.Helper()
	var recs []record.Record
	for i := 0; i < n; i++ {
		recs = append(recs, record.Record{Key: []byte(fmt.Sprint(seq + int32(i))), Value: []byte("v")})
	}
	return recordtest.Batch(record.BatchHeader{BaseTimestamp: time.Now().UnixMilli(), ProducerID: pid, BaseSequence: seq}, recs...)
}

func produceRaw(t *testing.T, cl *kgo.Client, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

func initPID(t *testing.T, cl *kgo.Client) int64 {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %d", err, resp.ErrorCode)
	}
	return resp.ProducerID
}

func TestIdempotentProduceSurvivesRestart(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, nil, "idem"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client()
	pid := initPID(t, cl)
	b0 := idemBatch(t, pid, 0, 3)
	if r := produceRaw(t, cl, "idem", b0); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("first: %+v", r)
	}
	b1 := idemBatch(t, pid, 3, 2)
	if r := produceRaw(t, cl, "idem", b1); r.ErrorCode != 0 || r.BaseOffset != 3 {
		t.Fatalf("second: %+v", r)
	}
	if r := produceRaw(t, cl, "idem", idemBatch(t, pid, 0, 3)); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("duplicate of first: %+v", r)
	}
	if r := produceRaw(t, cl, "idem", idemBatch(t, pid, 9, 1)); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: error %d, want 45", r.ErrorCode)
	}
	tb.Restart()
	cl = tb.Client()
	if r := produceRaw(t, cl, "idem", idemBatch(t, pid, 3, 2)); r.ErrorCode != 0 || r.BaseOffset != 3 {
		t.Fatalf("duplicate after restart: %+v", r)
	}
	if r := produceRaw(t, cl, "idem", idemBatch(t, pid, 5, 1)); r.ErrorCode != 0 || r.BaseOffset != 5 {
		t.Fatalf("next after restart: %+v", r)
	}
	if pid2 := initPID(t, cl); pid2 <= pid {
		t.Errorf("producer id reused after restart: %d then %d", pid, pid2)
	}
	p, _ := tb.Server().Broker().Partition("idem", 0)
	if p.Log.LogEndOffset() != 6 {
		t.Errorf("log end offset %d, want 6", p.Log.LogEndOffset())
	}
}

func TestAcksZeroAndOne(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, nil, "acks"); err != nil {
		t.Fatal(err)
	}
	for _, acks := range []kgo.Acks{kgo.NoAck(), kgo.LeaderAck()} {
		cl := tb.Client(kgo.DefaultProduceTopic("acks"), kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite())
		for i := 0; i < 5; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := consumeAll(t, tb, "acks", 10); len(got) != 10 {
		t.Errorf("got %d", len(got))
	}
}

func TestAutoCreateDisabled(t *testing.T) {
	tb := startBroker(t, "", map[string]string{"auto.create.topics.enable": "false"})
	ctx := ctxT(t)
	cl := tb.Client(kgo.DefaultProduceTopic("nope"), kgo.AllowAutoTopicCreation(), kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(2*time.Second))
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) && err == nil {
		t.Errorf("produce to missing topic with auto-create off: %v", err)
	}
	if tb.Server().Broker().Topic("nope") != nil {
		t.Error("topic was auto-created")
	}
}

func TestSendfileUsedForFetch(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, nil, "zc"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("zc"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var rs []*kgo.Record
	for i := 0; i < 100; i++ {
		rs = append(rs, &kgo.Record{Value: make([]byte, 1024)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	calls0, bytes0 := tb.Server().Protocol().SendfileCalls()
	got := consumeAll(t, tb, "zc", 100)
	calls, bytes := tb.Server().Protocol().SendfileCalls()
	if len(got) != 100 || calls <= calls0 || bytes-bytes0 < 100*1024 {
		t.Errorf("sendfile not used: %d calls, %d bytes for %d records", calls-calls0, bytes-bytes0, len(got))
	}
}

func TestConsumerGroupCommitsSurviveRestart(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 2, 1, nil, "grp"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("grp"))
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := consumeAll(t, tb, "grp", 10, kgo.ConsumeTopics("grp"), kgo.ConsumerGroup("g1"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	_ = got
	c2 := tb.Client(kgo.ConsumeTopics("grp"), kgo.ConsumerGroup("g2"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	for n < 10 {
		fs := c2.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		n += fs.NumRecords()
	}
	if err := c2.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	tb.Restart()
	lag, err := tb.Admin().FetchOffsets(ctxT(t), "g2")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	lag.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 10 {
		t.Errorf("committed offsets after restart sum to %d, want 10", total)
	}
}

func TestPerRecordErrorsOnCompactedTopic(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": sp("compact")}, "keys"); err != nil {
		t.Fatal(err)
	}
	h := recordtest.NoProducer
	h.PartitionLeaderEpoch, h.BaseTimestamp = 0, time.Now().UnixMilli()
	batch := recordtest.Batch(h,
		record.Record{Key: []byte("a"), Value: []byte("1")},
		record.Record{Key: nil, Value: []byte("2")},
		record.Record{Key: []byte{}, Value: []byte("3")},
	)
	r := produceRaw(t, tb.Client(), "keys", batch)
	if r.ErrorCode != kerr.InvalidRecord.Code || len(r.ErrorRecords) != 1 || r.ErrorRecords[0].RelativeOffset != 1 || r.ErrorMessage == nil {
		t.Errorf("null key in batch: %+v", r)
	}
	if p, _ := tb.Server().Broker().Partition("keys", 0); p.Log.LogEndOffset() != 0 {
		t.Errorf("partial batch appended: end offset %d", p.Log.LogEndOffset())
	}
}
