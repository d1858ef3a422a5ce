package server_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTransaction measures whole transactions with franz-go against
// Strata (durable: every coordinator state change and the markers are
// fsynced, and EndTxn is answered once the markers are) and against kfake
// (in memory) in the same run: begin, produce 10 records of 1 KiB over 2
// partitions, flush, commit. One op = one transaction.
//
//	go test ./internal/server -run '^$' -bench Transaction -benchtime 300x -count 3
func BenchmarkTransaction(b *testing.B) {
	for _, name := range []string{"strata", "kfake"} {
		b.Run(name, func(b *testing.B) {
			t := targets[name](b, "out", 2)
			defer t.close()
			cl, err := kgo.NewClient(kgo.SeedBrokers(t.addr), kgo.TransactionalID("bench"), kgo.DefaultProduceTopic("out"),
				kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx := context.Background()
			val := make([]byte, 1024)
			b.SetBytes(10 * 1024)
			b.ResetTimer()
			for range b.N {
				if err := cl.BeginTransaction(); err != nil {
					b.Fatal(err)
				}
				for range 10 {
					cl.Produce(ctx, &kgo.Record{Value: val}, nil)
				}
				if err := cl.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
