package replica_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/broker"
)

// BenchmarkReplicatedProduce measures acks=all produce of 1 KiB records to
// one partition replicated on three in-process brokers (RF=3, durable acks:
// acknowledged once every ISR member fsynced it) and, in the same run and
// process, to a single-replica partition on the first broker (RF=1), so
// the two are compared as a ratio on one machine. The three brokers share
// this machine's cores and disk.
//
//	go test ./internal/replica -run '^$' -bench BenchmarkReplicatedProduce -benchtime 20000x -count 3
func BenchmarkReplicatedProduce(b *testing.B) {
	r := newRig(b, 3)
	if _, err := r.node(1).b.Broker().CreateTopic(broker.CreateTopicRequest{Name: "single", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 1024)
	for _, tc := range []struct{ name, topic string }{{"rf=1", "single"}, {"rf=3", r.tp.Topic}} {
		b.Run(tc.name, func(b *testing.B) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(r.node(1).b.Addr()), kgo.DefaultProduceTopic(tc.topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(10000))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var failed atomic.Int64
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d records failed", n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
