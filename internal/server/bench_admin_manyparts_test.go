package server_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/bench"
	"github.com/strata-io/strata/internal/servertest"
)

// adminBroker starts an in-process broker with the product's defaults
// and a franz-go client (with opts) and admin client on it; the client
// is closed when b ends.
func adminBroker(b *testing.B, opts ...kgo.Opt) (*servertest.Broker, *kgo.Client, *kadm.Client) {
	tb := servertest.Start(b, servertest.Options{ProductDefaults: true})
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tb.Addr())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return tb, cl, kadm.NewClient(cl)
}

// BenchmarkCreateTopicManyPartitions is issue 18's CreateTopics row in
// process: one CreateTopics request of STRATA_BENCH_PARTITIONS (1000)
// partitions per iteration (a new topic each), timed from the client.
//
//	go test ./internal/server -run '^$' -bench CreateTopicManyPartitions -benchtime 5x
func BenchmarkCreateTopicManyPartitions(b *testing.B) {
	parts := int32(benchEnvInt("STRATA_BENCH_PARTITIONS", 1000))
	_, _, adm := adminBroker(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := adm.CreateTopic(ctx, parts, 1, nil, fmt.Sprintf("ct-%d", i))
		if err != nil || res.Err != nil {
			b.Fatalf("create: %v %v", err, res.Err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/create")
}

// BenchmarkMetadataManyPartitions is issue 18's Metadata row in process:
// a Metadata request for every topic of a broker holding
// STRATA_BENCH_TOPICS (10) topics of STRATA_BENCH_PARTITIONS (1000)
// partitions, timed from a franz-go client.
//
//	go test ./internal/server -run '^$' -bench MetadataManyPartitions -benchtime 20x
func BenchmarkMetadataManyPartitions(b *testing.B) {
	parts := int32(benchEnvInt("STRATA_BENCH_PARTITIONS", 1000))
	topics := benchEnvInt("STRATA_BENCH_TOPICS", 10)
	_, cl, adm := adminBroker(b)
	ctx := context.Background()
	for i := range topics {
		res, err := adm.CreateTopic(ctx, parts, 1, nil, fmt.Sprintf("md-%d", i))
		if err != nil || res.Err != nil {
			b.Fatalf("create: %v %v", err, res.Err)
		}
	}
	var min time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			b.Fatal(err)
		}
		if d := time.Since(start); min == 0 || d < min {
			min = d
		}
		if len(resp.Topics) < topics {
			b.Fatalf("metadata listed %d topics", len(resp.Topics))
		}
	}
	b.ReportMetric(float64(min.Microseconds())/1000, "min-ms")
}

// BenchmarkHeapManyPartitions explains issue 18's memory row: a broker
// with STRATA_BENCH_TOPICS (10) topics of STRATA_BENCH_PARTITIONS (1000)
// partitions, a heap profile at rest (STRATA_BENCH_HEAP.rest) and after an
// acks=all produce and a consume over one topic's partitions, clients
// closed (STRATA_BENCH_HEAP.load), with the runtime's MemStats each time.
// The client runs in process, so only what the broker still holds after
// a GC is in the second profile.
//
//	STRATA_BENCH_HEAP=/tmp/heap go test ./internal/server -run '^$' -bench HeapManyPartitions -benchtime 1x
func BenchmarkHeapManyPartitions(b *testing.B) {
	parts := int32(benchEnvInt("STRATA_BENCH_PARTITIONS", 1000))
	topics := benchEnvInt("STRATA_BENCH_TOPICS", 10)
	secs := benchEnvInt("STRATA_BENCH_SECONDS", 5)
	path := os.Getenv("STRATA_BENCH_HEAP")
	if path == "" {
		b.Skip("set STRATA_BENCH_HEAP to a path prefix for the heap profiles")
	}
	tb, cl, adm := adminBroker(b, kgo.RequestTimeoutOverhead(5*time.Minute))
	adm.SetTimeoutMillis(300000)
	ctx := context.Background()
	for i := range topics {
		res, err := adm.CreateTopic(ctx, parts, 1, nil, fmt.Sprintf("hp-%d", i))
		if err != nil || res.Err != nil {
			b.Fatalf("create: %v %v", err, res.Err)
		}
	}
	cl.Close()
	profile := func(suffix string) {
		runtime.GC()
		f, err := os.Create(path + "." + suffix)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.Logf("%s: heap in use %d MB, heap idle %d MB, released %d MB, stacks %d MB, sys %d MB, goroutines %d",
			suffix, ms.HeapInuse>>20, ms.HeapIdle>>20, ms.HeapReleased>>20, ms.StackInuse>>20, ms.Sys>>20, runtime.NumGoroutine())
	}
	profile("rest")
	c := bench.Config{Brokers: []string{tb.Addr()}, Topic: "hp-0", Partitions: parts, RecordSize: 512,
		Duration: time.Duration(secs) * time.Second, Acks: "all"}
	r, err := bench.Produce(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	c.Duration, c.Count = 0, r.Records
	if _, err := bench.Consume(ctx, c); err != nil {
		b.Fatal(err)
	}
	profile("load")
}
