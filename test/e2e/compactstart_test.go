package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawFetch fetches topic-0 from offset and returns the partition's error
// code, log start offset and the offset of the first record returned (-1
// if none).
func rawFetch(t *testing.T, cl *kgo.Client, topic string, offset int64) (int16, int64, int64) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxWaitMillis = 100
	req.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	// kgo negotiates Fetch v13+, which names topics by id (KIP-516).
	tds, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("topic id of %s: %v", topic, err)
	}
	ft.TopicID = tds[topic].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset = offset
	fp.PartitionMaxBytes = 1 << 20
	fp.LogStartOffset = -1
	fp.CurrentLeaderEpoch = -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch %s-0 at %d: %v", topic, offset, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("fetch %s-0 at %d: top-level %v", topic, offset, err)
	}
	p := resp.Topics[0].Partitions[0]
	first := int64(-1)
	fp2, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: 0, KeepControlRecords: true, Offset: offset}, &p, kgo.DefaultDecompressor(), nil)
	if len(fp2.Records) > 0 {
		first = fp2.Records[0].Offset
	}
	return p.ErrorCode, p.LogStartOffset, first
}

// TestCompactionKeepsLogStart compacts a topic whose first records are all
// superseded and checks, live and after a restart, that the log start
// offset stays 0 (Kafka: the cleaned segment keeps the first source
// segment's base offset) and that a fetch at offset 0 returns the first
// surviving record instead of OFFSET_OUT_OF_RANGE.
func TestCompactionKeepsLogStart(t *testing.T) {
	t.Run("values", func(t *testing.T) { compactionKeepsLogStart(t, false) })
	t.Run("tombstones", func(t *testing.T) { compactionKeepsLogStart(t, true) })
}

// compactionKeepsLogStart: with tombstones, key "a" is deleted after its
// 200 values, so every record before "b" is eventually removed.
func compactionKeepsLogStart(t *testing.T, tombstone bool) {
	dir := t.TempDir()
	flags := []string{"--log.cleaner.backoff.ms", "50", "--strata.idle.roll.check.interval.ms", "100"}
	p := startBroker(t, dir, flags...)
	ctx := ctxFor(t, 2*time.Minute)
	cfg := func(s string) *string { return &s }
	adm := newAdmin(t, p.Kafka)
	if res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": cfg("compact"), "segment.bytes": cfg("2048"), "segment.ms": cfg("100"),
		"min.cleanable.dirty.ratio": cfg("0.01"), "delete.retention.ms": cfg("100"),
	}, "cstart"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.DefaultProduceTopic("cstart"), kgo.ProducerBatchMaxBytes(1024))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Key "a" 200 times (all but the last superseded), then key "b" once.
	for i := 0; i < 200; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("a"), Value: []byte(fmt.Sprintf("a%03d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if tombstone {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("a")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("b"), Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Bounded wait for the cleaner to remove offset 0.
	deadline := time.Now().Add(60 * time.Second)
	first := int64(0)
	var code int16
	var logStart int64
	for time.Now().Before(deadline) {
		code, logStart, first = rawFetch(t, cl, "cstart", 0)
		if code != 0 || first > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code == 0 && first <= 0 {
		t.Fatalf("the cleaner did not remove offset 0 within 60s")
	}
	check := func(when string) {
		t.Helper()
		code, logStart, first = rawFetch(t, cl, "cstart", 0)
		starts, err := newAdmin(t, p.Kafka).ListStartOffsets(ctx, "cstart")
		if err != nil || starts.Error() != nil {
			t.Fatalf("list start offsets: %v %v", err, starts.Error())
		}
		so, _ := starts.Lookup("cstart", 0)
		t.Logf("%s: fetch at 0: error %d, log start %d, first record %d; ListOffsets(earliest) %d", when, code, logStart, first, so.Offset)
		if code != 0 {
			t.Errorf("BUG: %s: fetch at offset 0 of a compacted topic returns %v (log start %d): compaction moved the log start offset; Kafka keeps it at the first segment's base and returns the next surviving record", when, kerr.ErrorForCode(code), logStart)
		}
		if so.Offset != 0 {
			t.Errorf("BUG: %s: ListOffsets(earliest) of a compacted topic is %d, want 0 (compaction never moves logStartOffset)", when, so.Offset)
		}
	}
	check("after compaction")
	if code := p.Term(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	p = startBroker(t, dir, flags...)
	cl.Close()
	cl, err = kgo.NewClient(kgo.SeedBrokers(p.Kafka))
	if err != nil {
		t.Fatal(err)
	}
	check("after restart")
	p.Kill()
	p = startBroker(t, dir, flags...)
	cl.Close()
	cl, err = kgo.NewClient(kgo.SeedBrokers(p.Kafka))
	if err != nil {
		t.Fatal(err)
	}
	check("after SIGKILL and restart")
}
