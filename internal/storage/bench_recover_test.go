package storage

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

// BenchmarkRecoverIdlePartitions is the start after kill -9 of a broker
// whose partitions were idle since their last clean start (issue 18: the
// 9,000 partitions a kill -9 during a produce to 1,000 leaves with nothing
// past their recovery points): 1,000 partitions closed cleanly once, then
// opened without a clean shutdown with one shared Syncer, page cache warm.
// "small" partitions hold 128 KiB of batches of two 512 B records without
// a producer id, "large" ten 64 KiB batches of an idempotent producer (what
// franz-go sends at full rate, as in the ManyPartitions benchmark).
// Reported per partition.
//
//	go test ./internal/storage/ -run '^$' -bench RecoverIdlePartitions -benchtime 10x
func BenchmarkRecoverIdlePartitions(b *testing.B) {
	b.Run("small", func(b *testing.B) { benchRecoverIdle(b, 2, 64, -1) })
	b.Run("large", func(b *testing.B) { benchRecoverIdle(b, 128, 10, 1) })
}

// benchRecoverIdle fills 1,000 partitions with batches of recs 512 B
// records, of producer pid (-1: none), and measures their recovery.
func benchRecoverIdle(b *testing.B, recs, batches int, pid int64) {
	const parts = 1000
	root := b.TempDir()
	cfg := DefaultConfig()
	cfg.Durable = false
	rs := make([]record.Record, recs)
	for i := range rs {
		rs[i] = record.Record{TimestampDelta: int64(i), Value: make([]byte, 512)}
	}
	for p := range parts {
		l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", p)), [16]byte{}, cfg, false, Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		for n := range batches {
			h := record.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: int64(1000 + n), ProducerID: -1, BaseSequence: -1}
			if pid >= 0 {
				h.ProducerID, h.BaseSequence = pid, int32(n*recs)
			}
			if _, err := l.Append(recordtest.Batch(h, rs...), AppendOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := cpuTime()
	benchOpenPartitions(b, root, parts, cfg, false)
	// Process CPU (every goroutine's), steadier than wall time on a
	// shared machine; it includes the closes between rounds.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*parts), "cpu-µs/partition")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
