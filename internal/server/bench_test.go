package server_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker benchmarks: end-to-end produce (acks=all) and consume of 1 KiB
// records with franz-go against Strata and against kfake, plus the raw
// ceilings (loopback TCP, fdatasync'ed append) measured in the same run.
// Run: go test ./internal/server -run XXX -bench . -benchtime 2s

const benchRecordSize = 1024

// target is something a kgo client can be pointed at.
type target struct {
	addr  string
	close func()
}

func strataTarget(b *testing.B, topic string, partitions int32) target {
	return strataTargetWith(b, topic, partitions, nil)
}

// strataNoDurableTarget acknowledges acks=all once written, without
// waiting for fsync (strata.durable.acks=false): Kafka's own meaning of
// acks=all on a single replica.
func strataNoDurableTarget(b *testing.B, topic string, partitions int32) target {
	return strataTargetWith(b, topic, partitions, map[string]string{"strata.durable.acks": "false"})
}

func strataTargetWith(b *testing.B, topic string, partitions int32, ov map[string]string) target {
	tb := startBroker(b, "", ov)
	if _, err := tb.Server().Broker().CreateTopic(createReq(topic, partitions)); err != nil {
		b.Fatal(err)
	}
	return target{addr: tb.Addr(), close: tb.Close}
}

func kfakeTarget(b *testing.B, topic string, partitions int32) target {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		b.Fatal(err)
	}
	return target{addr: c.ListenAddrs()[0], close: c.Close}
}

var targets = map[string]func(*testing.B, string, int32) target{
	"strata": strataTarget, "strata-nodurable": strataNoDurableTarget, "kfake": kfakeTarget,
}

func benchValue() []byte {
	v := make([]byte, benchRecordSize)
	rand.Read(v)
	return v
}

// produceN produces n 1 KiB records round-robin over the partitions with
// acks=all and waits for every ack.
func produceN(b testing.TB, addr, topic string, n int, inflight int) {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MaxBufferedRecords(100000)}
	if inflight > 1 {
		// kgo allows one in-flight request per broker when idempotent.
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(inflight))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	val := benchValue()
	ctx := context.Background()
	var firstErr error
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

// consumeN consumes n records from the start.
func consumeN(b testing.TB, addr, topic string, n int) {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if os.Getenv("STRATA_BENCH_BIG_FETCH") != "" {
		opts = append(opts, kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(50<<20))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			b.Fatal(err)
		}
		got += fs.NumRecords()
	}
}

// consumeRawN fetches n records from the start of every partition with
// franz-go as the transport but without decoding records: plain Fetch
// requests (kgo's default sizes: 50 MiB per request, 1 MiB per partition)
// whose record bytes are only walked batch header by batch header to find
// the next offset. This measures the broker's fetch path through a real
// client stack, where the record-decoding consumer of consumeN measures
// mostly the client on 2 cores.
func consumeRawN(b testing.TB, addr, topic string, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		b.Fatal(err)
	}
	var parts int32
	var topicID [16]byte // Fetch v13+ (kfake) names topics by id
	for _, t := range md.Topics {
		if t.Topic != nil && *t.Topic == topic {
			parts, topicID = int32(len(t.Partitions)), t.TopicID
		}
	}
	offsets := make([]int64, parts)
	got := 0
	for got < n {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, 50<<20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		for p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offsets[p], 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					b.Fatalf("fetch %s/%d: %v", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
				recs := p.RecordBatches
				for len(recs) >= 61 {
					size := 12 + int(binary.BigEndian.Uint32(recs[8:]))
					if size > len(recs) {
						break // a partial batch at the end of the response
					}
					last := int64(binary.BigEndian.Uint64(recs)) + int64(binary.BigEndian.Uint32(recs[23:]))
					got += int(binary.BigEndian.Uint32(recs[57:]))
					offsets[p.Partition] = last + 1
					recs = recs[size:]
				}
			}
		}
	}
}

// BenchmarkProduce: inflight=1 is kgo's default idempotent producer (one
// request in flight per broker); inflight=5 is a non-idempotent producer
// with five requests in flight (the Java client's default window).
func BenchmarkProduce(b *testing.B) {
	for _, inflight := range []int{1, 5} {
		for _, parts := range []int32{1, 6} {
			for _, sys := range []string{"strata", "strata-nodurable", "kfake"} {
				b.Run(fmt.Sprintf("inflight=%d/partitions=%d/%s", inflight, parts, sys), func(b *testing.B) {
					mk := targets[sys]
					tg := mk(b, "bench", parts)
					defer tg.close()
					b.SetBytes(benchRecordSize)
					b.ResetTimer()
					runClient(b, "produce", tg.addr, "bench", b.N, inflight)
				})
			}
		}
	}
}

func BenchmarkConsume(b *testing.B) {
	for _, parts := range []int32{1, 6} {
		for _, sys := range []string{"strata", "kfake"} {
			b.Run(fmt.Sprintf("partitions=%d/%s", parts, sys), func(b *testing.B) {
				mk := targets[sys]
				tg := mk(b, "bench", parts)
				defer tg.close()
				produceN(b, tg.addr, "bench", b.N, 5)
				b.SetBytes(benchRecordSize)
				b.ResetTimer()
				runClient(b, "consume", tg.addr, "bench", b.N, 0)
			})
		}
	}
}

// BenchmarkConsumeRawFetch: as BenchmarkConsume, with consumeRawN's
// client (Fetch requests through kgo, records not decoded).
func BenchmarkConsumeRawFetch(b *testing.B) {
	for _, parts := range []int32{1, 6} {
		for _, sys := range []string{"strata", "kfake"} {
			b.Run(fmt.Sprintf("partitions=%d/%s", parts, sys), func(b *testing.B) {
				tg := targets[sys](b, "bench", parts)
				defer tg.close()
				produceN(b, tg.addr, "bench", b.N, 5)
				b.SetBytes(benchRecordSize)
				b.ResetTimer()
				runClient(b, "consume-raw", tg.addr, "bench", b.N, 0)
			})
		}
	}
}

// The benchmark clients run in a child process (this test binary
// re-executed): a broker and its clients do not share a heap, a garbage
// collector or a scheduler in real life, and kfake keeps every record in
// its heap, which would otherwise spare an in-process client most GC work.
const (
	envBenchMode     = "STRATA_BENCH_CLIENT_MODE"
	envBenchAddr     = "STRATA_BENCH_CLIENT_ADDR"
	envBenchTopic    = "STRATA_BENCH_CLIENT_TOPIC"
	envBenchN        = "STRATA_BENCH_CLIENT_N"
	envBenchInflight = "STRATA_BENCH_CLIENT_INFLIGHT"
)

// TestBenchClient is the child-process client of the benchmarks; it is a
// no-op unless started by one.
func TestBenchClient(t *testing.T) {
	mode := os.Getenv(envBenchMode)
	if mode == "" {
		t.Skip("benchmark helper")
	}
	n, _ := strconv.Atoi(os.Getenv(envBenchN))
	inflight, _ := strconv.Atoi(os.Getenv(envBenchInflight))
	addr, topic := os.Getenv(envBenchAddr), os.Getenv(envBenchTopic)
	switch mode {
	case "produce":
		produceN(t, addr, topic, n, inflight)
	case "consume":
		consumeN(t, addr, topic, n)
	case "consume-raw":
		consumeRawN(t, addr, topic, n)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

// runClient runs one benchmark client in a child process and waits.
func runClient(b *testing.B, mode, addr, topic string, n, inflight int) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchClient$", "-test.count=1", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), envBenchMode+"="+mode, envBenchAddr+"="+addr, envBenchTopic+"="+topic,
		envBenchN+"="+strconv.Itoa(n), envBenchInflight+"="+strconv.Itoa(inflight))
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s client: %v\n%s", mode, err, out)
	}
}

// BenchmarkRawLoopbackTCP is the network ceiling: 1 MiB writes over a
// loopback TCP connection to a reader that discards.
func BenchmarkRawLoopbackTCP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 1<<20)
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	buf := benchBuf(1 << 20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.Close()
	<-done
}

// BenchmarkRawFdatasyncAppend is the disk ceiling for durable produce:
// append 1 MiB (kgo's default max batch) then fdatasync, repeatedly.
func BenchmarkRawFdatasyncAppend(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "append"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := benchBuf(1 << 20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
	}
}

func benchBuf(n int) []byte {
	buf := make([]byte, n)
	_, _ = io.ReadFull(rand.Reader, buf)
	return buf
}
