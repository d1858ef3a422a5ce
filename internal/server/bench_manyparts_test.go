package server_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/bench"
	"github.com/strata-io/strata/internal/servertest"
)

// BenchmarkProduceManyPartitions is issue 18's produce row in process, so
// that -cpuprofile, -blockprofile, -mutexprofile and -memprofile see the
// broker: franz-go acks=all producers of 512 B records (internal/bench,
// as `strata bench` and test/e2e's BenchmarkManyPartitions) to a topic of
// one partition and to one of STRATA_BENCH_PARTITIONS (1000), alternated
// in one run, STRATA_BENCH_SECONDS (5) each. It reports each side's MB/s
// and their ratio (the target: at least 0.5x).
//
//	go test ./internal/server -run '^$' -bench ProduceManyPartitions -benchtime 1x -cpuprofile cpu.out
func BenchmarkProduceManyPartitions(b *testing.B) {
	parts := int32(benchEnvInt("STRATA_BENCH_PARTITIONS", 1000))
	secs := benchEnvInt("STRATA_BENCH_SECONDS", 5)
	// Both topics are created first, as test/e2e's BenchmarkManyPartitions
	// does (its topics exist minutes before the produce step): the first
	// iteration's many-partition side then measures the first appends to
	// existing, never written partitions, not the broker opening them.
	tb, _, adm := adminBroker(b)
	ctx := context.Background()
	for _, t := range []struct {
		name  string
		parts int32
	}{{"one", 1}, {"many", parts}} {
		if res, err := adm.CreateTopic(ctx, t.parts, 1, nil, t.name); err != nil || res.Err != nil {
			b.Fatalf("create %s: %v %v", t.name, err, res.Err)
		}
	}
	cfg := func(topic string, partitions int32) bench.Config {
		return bench.Config{Brokers: []string{tb.Addr()}, Topic: topic, Partitions: partitions, RecordSize: 512,
			Duration: time.Duration(secs) * time.Second, Acks: "all"}
	}
	// STRATA_BENCH_ONLY=one or =many runs one side only (to profile it
	// alone); the other side's topic is still created.
	only := os.Getenv("STRATA_BENCH_ONLY")
	produce := func(c bench.Config, skip bool) (bench.Result, error) {
		if skip {
			c.Count, c.Duration = 1, 0
		}
		return bench.Produce(ctx, c)
	}
	var sumOne, sumMany float64
	for i := 0; i < b.N; i++ {
		r1, err := produce(cfg("one", 1), only == "many")
		if err != nil {
			b.Fatal(err)
		}
		before := tb.Server().Broker().JournalStats()
		rm, err := produce(cfg("many", parts), only == "one")
		if err != nil {
			b.Fatal(err)
		}
		after := tb.Server().Broker().JournalStats()
		b.Logf("1 partition %.1f MB/s p50 %.0f ms p99 %.0f ms; %d partitions %.1f MB/s p50 %.0f ms p99 %.0f ms = %.2fx; journal rounds %d, fallbacks %d, checkpoints %d, MB %d, file %d MiB",
			r1.MBPerSec, r1.Latency.P50, r1.Latency.P99, parts, rm.MBPerSec, rm.Latency.P50, rm.Latency.P99, rm.MBPerSec/r1.MBPerSec,
			after.Rounds-before.Rounds, after.Fallbacks-before.Fallbacks, after.Checkpoints-before.Checkpoints,
			(after.Bytes-before.Bytes)>>20, after.FileBytes>>20)
		sumOne += r1.MBPerSec
		sumMany += rm.MBPerSec
	}
	if path := os.Getenv("STRATA_BENCH_HEAP"); path != "" {
		// What the broker still holds after the load (the RSS row).
		runtime.GC()
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.Logf("after the load: heap in use %d MB, heap idle %d MB, released %d MB, sys %d MB",
			ms.HeapInuse>>20, ms.HeapIdle>>20, ms.HeapReleased>>20, ms.Sys>>20)
	}
	b.ReportMetric(sumOne/float64(b.N), "MB/s-1")
	b.ReportMetric(sumMany/float64(b.N), fmt.Sprintf("MB/s-%d", parts))
	b.ReportMetric(sumMany/sumOne, "ratio")
}

func benchEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkConsumeManyPartitions is issue 18's consume row in process (for
// pprof): the same records produced to a topic of one partition and to
// one of STRATA_BENCH_PARTITIONS (1000), then a franz-go consumer reads
// each from the start, alternated in one run. It reports each side's MB/s
// and their ratio (the target: at least 0.7x).
//
//	go test ./internal/server -run '^$' -bench ConsumeManyPartitions -benchtime 1x -cpuprofile cpu.out
func BenchmarkConsumeManyPartitions(b *testing.B) {
	parts := int32(benchEnvInt("STRATA_BENCH_PARTITIONS", 1000))
	records := int64(benchEnvInt("STRATA_BENCH_RECORDS", 400000))
	tb := servertest.Start(b, servertest.Options{ProductDefaults: true})
	ctx := context.Background()
	cfg := func(topic string, partitions int32) bench.Config {
		return bench.Config{Brokers: []string{tb.Addr()}, Topic: topic, Partitions: partitions, RecordSize: 512,
			Count: records, Acks: "1"}
	}
	for _, c := range []bench.Config{cfg("one", 1), cfg("many", parts)} {
		if _, err := bench.Produce(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	only := os.Getenv("STRATA_BENCH_ONLY")
	var sumOne, sumMany float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var r1, rm bench.Result
		var err error
		if only != "many" {
			if r1, err = bench.Consume(ctx, cfg("one", 1)); err != nil {
				b.Fatal(err)
			}
		}
		if only != "one" {
			if rm, err = bench.Consume(ctx, cfg("many", parts)); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("consume %d records: 1 partition %.1f MB/s, %d partitions %.1f MB/s = %.2fx",
			records, r1.MBPerSec, parts, rm.MBPerSec, rm.MBPerSec/r1.MBPerSec)
		sumOne += r1.MBPerSec
		sumMany += rm.MBPerSec
	}
	b.ReportMetric(sumOne/float64(b.N), "MB/s-1")
	b.ReportMetric(sumMany/float64(b.N), fmt.Sprintf("MB/s-%d", parts))
	b.ReportMetric(sumMany/sumOne, "ratio")
}

// BenchmarkE2EManyPartitions is issue 18's end-to-end latency row in
// process (for pprof): an acks=all producer at STRATA_BENCH_RATE (5000)
// records/s and a consumer, STRATA_BENCH_SECONDS (5) each, on a topic of
// one partition and on one of STRATA_BENCH_PARTITIONS (1000), alternated
// in one run. It reports p50/p99 of each side and their ratios (the
// issue's target: within 2x).
//
//	go test ./internal/server -run '^$' -bench E2EManyPartitions -benchtime 1x -cpuprofile cpu.out
func BenchmarkE2EManyPartitions(b *testing.B) {
	parts := int32(benchEnvInt("STRATA_BENCH_PARTITIONS", 1000))
	secs := benchEnvInt("STRATA_BENCH_SECONDS", 5)
	rate := float64(benchEnvInt("STRATA_BENCH_RATE", 5000))
	tb := servertest.Start(b, servertest.Options{ProductDefaults: true})
	ctx := context.Background()
	cfg := func(topic string, partitions int32) bench.Config {
		return bench.Config{Brokers: []string{tb.Addr()}, Topic: topic, Partitions: partitions, RecordSize: 512,
			Duration: time.Duration(secs) * time.Second, Acks: "all", Rate: rate}
	}
	only := os.Getenv("STRATA_BENCH_ONLY")
	var p50, p99 [2]float64
	for i := 0; i < b.N; i++ {
		r := [2]bench.Result{{Latency: &bench.Latency{}}, {Latency: &bench.Latency{}}}
		for side, c := range []bench.Config{cfg("one", 1), cfg("many", parts)} {
			if (side == 0 && only == "many") || (side == 1 && only == "one") {
				continue
			}
			res, err := bench.E2E(ctx, c)
			if err != nil {
				b.Fatal(err)
			}
			r[side] = res
			p50[side] += res.Latency.P50
			p99[side] += res.Latency.P99
		}
		b.Logf("e2e at %.0f records/s: 1 partition p50 %.2f ms p99 %.2f ms; %d partitions p50 %.2f ms p99 %.2f ms (%.1fx, %.1fx)",
			rate, r[0].Latency.P50, r[0].Latency.P99, parts, r[1].Latency.P50, r[1].Latency.P99,
			r[1].Latency.P50/r[0].Latency.P50, r[1].Latency.P99/r[0].Latency.P99)
		if r[0].AckLatency != nil && r[1].AckLatency != nil {
			// The produce ack (acks=all: durable) within it; the rest
			// is the consumer's fetch.
			b.Logf("of which produce ack: 1 partition p50 %.2f ms p99 %.2f ms; %d partitions p50 %.2f ms p99 %.2f ms",
				r[0].AckLatency.P50, r[0].AckLatency.P99, parts, r[1].AckLatency.P50, r[1].AckLatency.P99)
		}
	}
	b.ReportMetric(p50[1]/p50[0], "p50-ratio")
	b.ReportMetric(p99[1]/p99[0], "p99-ratio")
}
