package server_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func fetchReq(topic string, offset int64, maxBytes, partMax, minBytes, maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxBytes = maxBytes
	req.MinBytes = minBytes
	req.MaxWaitMillis = maxWait
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = partMax
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestFetchLimitsAndLongPoll(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, nil, "f"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("f"), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	big := make([]byte, 64<<10)
	rand.Read(big)
	for i := 0; i < 3; i++ { // three batches of ~64 KiB
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: big}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	raw := tb.Client(fetchMax(12))
	// KIP-74: max bytes smaller than the first batch still returns it whole.
	resp, err := fetchReq("f", 0, 1000, 1000, 1, 0).RequestWith(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) < 64<<10 || len(p.RecordBatches) > 70<<10 || p.HighWatermark != 3 {
		t.Errorf("KIP-74 first batch: err %d, %d bytes, hw %d", p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
	}
	// Partition max bytes caps at whole batches after the first.
	resp, _ = fetchReq("f", 0, 1<<20, 140<<10, 1, 0).RequestWith(ctx, raw)
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n < 128<<10 || n > 140<<10 {
		t.Errorf("partition max 140 KiB returned %d bytes", n)
	}
	// Fetch at the high watermark long-polls until max wait.
	start := time.Now()
	resp, _ = fetchReq("f", 3, 1<<20, 1<<20, 1, 300).RequestWith(ctx, raw)
	if el := time.Since(start); el < 250*time.Millisecond || len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Errorf("empty long poll returned after %v with %d bytes", el, len(resp.Topics[0].Partitions[0].RecordBatches))
	}
	// A produce during the wait wakes it.
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		r, _ := fetchReq("f", 3, 1<<20, 1<<20, 1, 20000).RequestWith(context.Background(), raw)
		done <- r
	}()
	time.Sleep(100 * time.Millisecond)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r == nil || len(r.Topics[0].Partitions[0].RecordBatches) == 0 {
			t.Error("woken fetch returned no data")
		}
	case <-time.After(10 * time.Second):
		t.Error("long poll not woken by produce")
	}
	// Unknown session id.
	req := fetchReq("f", 0, 1<<20, 1<<20, 1, 0)
	req.SessionID, req.SessionEpoch = 1234, 5
	resp, _ = req.RequestWith(ctx, raw)
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("unknown session: %d", resp.ErrorCode)
	}
	// Unknown partition.
	resp, _ = fetchReq("nope", 0, 1<<20, 1<<20, 1, 0).RequestWith(ctx, raw)
	if resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
}

func TestAdminAPIs(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	adm := tb.Admin()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "adm"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("adm"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// DescribeCluster.
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil || dc.ErrorCode != 0 || len(dc.Brokers) != 1 || dc.ClusterID == "" || dc.Brokers[0].NodeID != 1 {
		t.Errorf("describe cluster: %v %+v", err, dc)
	}
	// DescribeLogDirs: real sizes.
	ld, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	ld.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "adm" {
				size += p.Size
			}
		})
	})
	if size <= 0 {
		t.Errorf("log dir size of adm: %d", size)
	}
	// OffsetForLeaderEpoch.
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.ReplicaID = -1
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "adm"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.CurrentLeaderEpoch = -1
	op.LeaderEpoch = 0
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	oer, err := oe.RequestWith(ctx, cl)
	if err != nil || oer.Topics[0].Partitions[0].ErrorCode != 0 || oer.Topics[0].Partitions[0].EndOffset != 1 || oer.Topics[0].Partitions[0].LeaderEpoch != 0 {
		t.Errorf("offset for leader epoch: %v %+v", err, oer)
	}
	// Empty partition 1: epoch 0 ends at the log end offset 0.
	oe.Topics[0].Partitions[0].Partition = 1
	if oer, err = oe.RequestWith(ctx, cl); err != nil || oer.Topics[0].Partitions[0].EndOffset != 0 || oer.Topics[0].Partitions[0].LeaderEpoch != 0 {
		t.Errorf("offset for leader epoch, empty partition: %v %+v", err, oer)
	}
	// DeleteTopics by id (v6).
	td, _ := adm.ListTopics(ctx, "adm")
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version = 6
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.TopicID = td["adm"].ID
	dt.Topics = append(dt.Topics, dtt)
	dtr, err := dt.RequestWith(ctx, cl)
	if err != nil || dtr.Topics[0].ErrorCode != 0 || dtr.Topics[0].Topic == nil || *dtr.Topics[0].Topic != "adm" {
		t.Errorf("delete by id: %v %+v", err, dtr)
	}
	dtr, _ = dt.RequestWith(ctx, cl)
	if dtr.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("second delete by id: %d", dtr.Topics[0].ErrorCode)
	}
	// Internal topics cannot be deleted.
	r, err := adm.DeleteTopics(ctx, "__consumer_offsets")
	if err == nil && r["__consumer_offsets"].Err == nil {
		t.Error("__consumer_offsets deleted")
	}
}

func TestFetchSessions(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 2, 1, nil, "s"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("s"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	raw := tb.Client(fetchMax(12))
	// Initial (epoch 0): full answer, new session id.
	req := fetchReq("s", 0, 1<<20, 1<<20, 0, 0)
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	req.SessionEpoch = 0
	resp, err := req.RequestWith(ctx, raw)
	if err != nil || resp.ErrorCode != 0 || resp.SessionID == 0 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("initial session fetch: %v %+v", err, resp)
	}
	id := resp.SessionID
	// Incremental epoch 1, client moved partition 0 to offset 1: nothing new
	// anywhere, so the answer is empty.
	inc := kmsg.NewPtrFetchRequest()
	inc.Version = 12
	inc.MaxBytes = 1 << 20
	inc.SessionID, inc.SessionEpoch = id, 1
	it := kmsg.NewFetchRequestTopic()
	it.Topic = "s"
	ip := kmsg.NewFetchRequestTopicPartition()
	ip.FetchOffset, ip.PartitionMaxBytes = 1, 1<<20
	it.Partitions = append(it.Partitions, ip)
	inc.Topics = append(inc.Topics, it)
	resp, err = inc.RequestWith(ctx, raw)
	if err != nil || resp.ErrorCode != 0 || resp.SessionID != id {
		t.Fatalf("incremental: %v %+v", err, resp)
	}
	// Partition 0 changed position, so it is answered once (no records).
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 0 {
		t.Errorf("incremental answer: %+v", resp.Topics)
	}
	// Epoch 2, no changes: empty answer.
	inc.SessionEpoch = 2
	inc.Topics = nil
	resp, _ = inc.RequestWith(ctx, raw)
	if resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Errorf("no-news incremental: %+v", resp)
	}
	// New data on partition 1 shows up without naming it.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("b"), Partition: 1}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	inc.SessionEpoch = 3
	resp, _ = inc.RequestWith(ctx, raw)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 1 ||
		len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Errorf("news on partition 1: %+v", resp.Topics)
	}
	// Wrong epoch.
	inc.SessionEpoch = 9
	resp, _ = inc.RequestWith(ctx, raw)
	if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Errorf("wrong epoch: %d", resp.ErrorCode)
	}
	// Close (epoch -1) then the id is gone.
	inc.SessionEpoch = -1
	if resp, _ = inc.RequestWith(ctx, raw); resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Errorf("close: %+v", resp)
	}
	inc.SessionEpoch = 4
	if resp, _ = inc.RequestWith(ctx, raw); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("closed session: %d", resp.ErrorCode)
	}
}

// TestFetchMinBytesAsDelayedFetch: a consumer's fetch that cannot fill min
// bytes with whole batches is still answered at once when Kafka's
// DelayedFetch.tryComplete would complete it: the bytes readable up to the
// high watermark (capped by the partition max bytes) reach min bytes, or
// the fetch offset is in a segment older than the high watermark's
// ("fetching older segments"). Before, Strata waited max wait there
// (kafka-go's TestReaderReadCompactedMessage, min = max = 200 bytes over
// 200-byte segments, paid it on every batch and timed out).
func TestFetchMinBytesAsDelayedFetch(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	small := "200"
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, nil, "same"); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &small}, "older"); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 60)
	for _, topic := range []string{"same", "older"} {
		cl := tb.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
		for i := 0; i < 3; i++ { // three batches of ~130 bytes
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	raw := tb.Client(fetchMax(12))
	const maxWait = 30000 // a wait would be seen as >= 15 s even on a loaded machine
	for _, c := range []struct {
		name, topic               string
		maxBytes, partMax, minBts int32
	}{
		// One batch fits in 200 bytes, two do not; 390 bytes are readable.
		{"readable bytes reach min bytes", "same", 200, 200, 200},
		// The read stops at its 200-byte segment's end, far below 1 MiB.
		{"older segment", "older", 1 << 20, 1 << 20, 1 << 20},
	} {
		start := time.Now()
		resp, err := fetchReq(c.topic, 0, c.maxBytes, c.partMax, c.minBts, maxWait).RequestWith(ctx, raw)
		el := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p := resp.Topics[0].Partitions[0]
		if el >= maxWait/2*time.Millisecond || p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
			t.Errorf("%s: answered after %v (max wait %d ms), error %d, %d bytes", c.name, el, maxWait, p.ErrorCode, len(p.RecordBatches))
		}
	}
}
