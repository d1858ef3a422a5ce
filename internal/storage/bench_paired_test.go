package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
)

// BenchmarkPairedAppendVsRaw interleaves, op by op, a raw 16 KiB pwrite
// extending a plain file and a no-fsync Append of a 16 KiB batch, so both
// see the same machine state (the shared 2-core test VM is noisy). It
// reports both rates and append as a percentage of raw.
func BenchmarkPairedAppendVsRaw(b *testing.B) {
	for _, prealloc := range []bool{false, true} {
		b.Run(fmt.Sprintf("prealloc=%v", prealloc), func(b *testing.B) {
			dir := b.TempDir()
			raw, err := os.Create(filepath.Join(dir, "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			l, err := Open(filepath.Join(dir, "bench-0"), [16]byte{}, benchConfig(false, prealloc), false, Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			buf := benchBatchBytes(b)
			settle(b)
			var tRaw, tApp time.Duration
			var off int64
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := raw.WriteAt(buf, off); err != nil {
					b.Fatal(err)
				}
				off += int64(len(buf))
				t1 := time.Now()
				record.Batch(buf).SetBaseOffset(0)
				if _, err := l.Append(buf, AppendOptions{}); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				tRaw += t1.Sub(t0)
				tApp += t2.Sub(t1)
			}
			mb := float64(b.N) * float64(len(buf)) / 1e6
			b.ReportMetric(mb/tRaw.Seconds(), "raw-MB/s")
			b.ReportMetric(mb/tApp.Seconds(), "append-MB/s")
			b.ReportMetric(100*tRaw.Seconds()/tApp.Seconds(), "append-%-of-raw")
		})
	}
}

// BenchmarkPairedDurableVsRaw alternates phases of 1000 batches: the raw
// durable baseline (rawGroupRig) and the durable 8-writer group-commit
// append with 8 appends in flight per writer.
func BenchmarkPairedDurableVsRaw(b *testing.B) {
	for _, prealloc := range []bool{false, true} {
		b.Run(fmt.Sprintf("prealloc=%v", prealloc), func(b *testing.B) {
			dir := b.TempDir()
			r := newRawGroupRig(b, dir)
			defer r.close()
			d := newDurableRig(b, dir, prealloc)
			defer d.close()
			settle(b)
			const phase = 1000
			var tRaw, tApp time.Duration
			for n := 0; n < b.N; n += phase {
				k := min(phase, b.N-n)
				t0 := time.Now()
				r.run(k)
				t1 := time.Now()
				d.run(b, k, 8)
				t2 := time.Now()
				tRaw += t1.Sub(t0)
				tApp += t2.Sub(t1)
			}
			mb := float64(b.N) * float64(len(d.buf)) / 1e6
			b.ReportMetric(mb/tRaw.Seconds(), "raw-durable-MB/s")
			b.ReportMetric(mb/tApp.Seconds(), "append-durable-MB/s")
			b.ReportMetric(100*tRaw.Seconds()/tApp.Seconds(), "append-%-of-raw")
		})
	}
}
