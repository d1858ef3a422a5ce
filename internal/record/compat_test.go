package record

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kgoCodecs maps our codecs to franz-go's, the peer implementation.
var kgoCodecs = map[Compression]kgo.CompressionCodec{
	Gzip:   kgo.GzipCompression(),
	Snappy: kgo.SnappyCompression(),
	LZ4:    kgo.Lz4Compression(),
	Zstd:   kgo.ZstdCompression(),
}

// TestCodecsInteropWithKgo checks each codec both ways against franz-go.
func TestCodecsInteropWithKgo(t *testing.T) {
	raw := AppendRecords(nil, sampleRecords())
	dec := kgo.DefaultDecompressor()
	for c, kc := range kgoCodecs {
		comp, err := kgo.DefaultCompressor(kc)
		if err != nil {
			t.Fatal(err)
		}
		theirs, _ := comp.Compress(new(bytes.Buffer), raw)
		got, err := Decompress(c, theirs)
		if err != nil || !bytes.Equal(got, raw) {
			t.Errorf("%v: decompressing kgo output: err %v", c, err)
		}
		ours, err := Compress(c, raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err = dec.Decompress(ours, kgo.CompressionCodecType(c))
		if err != nil || !bytes.Equal(got, raw) {
			t.Errorf("%v: kgo decompressing our output: err %v", c, err)
		}
	}
}

// TestKgoProducedBatches produces through a real client (franz-go) to kfake,
// fetches the raw batch bytes and decodes them with this package.
func TestKgoProducedBatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t-none", "t-gzip", "t-snappy", "t-lz4", "t-zstd"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	for _, c := range allCodecs {
		topic := "t-" + c.String()
		kc := kgo.NoCompression()
		if c != None {
			kc = kgoCodecs[c]
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerBatchCompression(kc), kgo.DefaultProduceTopic(topic))
		if err != nil {
			t.Fatal(err)
		}
		var want []*kgo.Record
		for i := 0; i < 20; i++ {
			r := &kgo.Record{Value: bytes.Repeat([]byte(fmt.Sprint(i)), 100*i), Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}}}
			if i%3 != 0 {
				r.Key = []byte(fmt.Sprint("key", i))
			}
			want = append(want, r)
		}
		if err := cl.ProduceSync(ctx, want...).FirstErr(); err != nil {
			t.Fatalf("%v: produce: %v", c, err)
		}
		raw := fetchRaw(ctx, t, cl, topic)
		cl.Close()
		var got []Record
		for len(raw) > 0 {
			b, rest, err := Next(raw)
			if err != nil {
				t.Fatalf("%v: Next: %v", c, err)
			}
			if err := Validate(b); err != nil {
				t.Fatalf("%v: Validate kgo batch: %v", c, err)
			}
			if b.Compression() != c {
				t.Fatalf("batch codec %v, want %v", b.Compression(), c)
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatalf("%v: Records: %v", c, err)
			}
			got = append(got, recs...)
			raw = rest
		}
		if len(got) != len(want) {
			t.Fatalf("%v: %d records, want %d", c, len(got), len(want))
		}
		for i := range got {
			if (got[i].Key == nil) != (want[i].Key == nil) || !bytes.Equal(got[i].Key, want[i].Key) ||
				!bytes.Equal(got[i].Value, want[i].Value) || len(got[i].Headers) != 1 || got[i].Headers[0].Key != "i" {
				t.Fatalf("%v: record %d differs: %+v", c, i, got[i])
			}
		}
	}
}

// TestBuiltBatchesReadByKgo sends batches built here in raw Produce requests
// to kfake and consumes them with franz-go.
func TestBuiltBatchesReadByKgo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "built"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"built": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := sampleRecords()
	topicID := topicID(ctx, t, cl, "built")
	for _, c := range allCodecs {
		h := sampleHeader(c)
		h.BaseOffset, h.ProducerID, h.ProducerEpoch, h.BaseSequence = 0, -1, -1, -1
		b := mustBuild(t, h, recs)
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "built", topicID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = b
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%v: produce: %v", c, err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("%v: produce error code %d", c, code)
		}
	}
	var got []*kgo.Record
	for len(got) < len(allCodecs)*len(recs) {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		w := recs[i%len(recs)]
		if (r.Key == nil) != (w.Key == nil) || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: kgo read key %q value len %d headers %d", i, r.Key, len(r.Value), len(r.Headers))
		}
		if want := 1_700_000_000_000 + w.TimestampDelta; r.Timestamp.UnixMilli() != want {
			t.Fatalf("record %d: timestamp %d, want %d", i, r.Timestamp.UnixMilli(), want)
		}
	}
}

// topicID looks up a topic's id (Produce v13+ and Fetch v13+ address topics by id).
func topicID(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	return mresp.Topics[0].TopicID
}

// fetchRaw returns the raw record batch bytes of partition 0 of topic.
func fetchRaw(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) []byte {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes, req.MinBytes = 100, 50<<20, 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, topicID(ctx, t, cl, topic)
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 50 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch error code %d", p.ErrorCode)
	}
	return p.RecordBatches
}
