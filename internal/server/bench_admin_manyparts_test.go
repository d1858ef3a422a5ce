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

// BenchmarkCreateTopicManyPartitions is issue 18's CreateTopics row in
// process: one CreateTopics request of STRATA_BENCH_PARTITIONS (1000)
// partitions per iteration (a new topic each), timed from the client.
//
//	go test ./internal/server -run '^$' -bench CreateTopicManyPartitions -benchtime 5x
func BenchmarkCreateTopicManyPartitions(b *testing.B) {
	parts := int32(benchEnvInt("STRATA_BENCH_PARTITIONS", 1000))
	tb := servertest.Start(b, servertest.Options{ProductDefaults: true})
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
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
	tb := servertest.Start(b, servertest.Options{ProductDefaults: true})
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
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
