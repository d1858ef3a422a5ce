package broker

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"golang.org/x/sys/unix"
)

// bigBatch builds one uncompressed batch of n 1 KiB records.
func bigBatch(b *testing.B, n int) []byte {
	val := make([]byte, 1024)
	rand.Read(val)
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: val}
	}
	h := recordtest.NoProducer
	h.PartitionLeaderEpoch, h.BaseTimestamp = 0, time.Now().UnixMilli()
	return recordtest.Batch(h, recs...)
}

// BenchmarkPartitionAppendDurable is the broker's durable produce path
// without the network: append a 1 MiB batch to each partition, wait for
// fsync (acks=all), repeat.
func BenchmarkPartitionAppendDurable(b *testing.B) {
	for _, parts := range []int32{1, 6} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			br := openTestB(b, b.TempDir())
			defer br.Close()
			if _, err := br.CreateTopic(CreateTopicRequest{Name: "t", NumPartitions: parts, ReplicationFactor: 1}); err != nil {
				b.Fatal(err)
			}
			batch := bigBatch(b, 1000)
			b.SetBytes(int64(len(batch)) * int64(parts))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for p := int32(0); p < parts; p++ {
					wg.Add(1)
					go func(p int32) {
						defer wg.Done()
						pt, _ := br.Partition("t", p)
						if _, err := pt.Append(context.Background(), append([]byte(nil), batch...), -1); err != nil {
							b.Error(err)
						}
					}(p)
				}
				wg.Wait()
			}
		})
	}
}

// BenchmarkRawFdatasync1MiB is the same disk's ceiling: write 1 MiB, fdatasync.
func BenchmarkRawFdatasync1MiB(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	rand.Read(buf)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		f.Write(buf)
		unix.Fdatasync(int(f.Fd()))
	}
}
