package storage

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

// BenchmarkRecoverIdlePartitions is the start after kill -9 of a broker
// whose partitions were idle since their last clean start (issue 18: the
// 9,000 partitions a kill -9 during a produce to 1,000 leaves with nothing
// past their recovery points): 1,000 partitions of 128 KiB in one segment
// (batches of two 512 B records), closed cleanly once, then opened without
// a clean shutdown with one shared Syncer, page cache warm. Reported per
// partition.
//
//	go test ./internal/storage/ -run '^$' -bench RecoverIdlePartitions -benchtime 10x
func BenchmarkRecoverIdlePartitions(b *testing.B) {
	const parts = 1000
	root := b.TempDir()
	cfg := DefaultConfig()
	cfg.Durable = false
	recs := make([]record.Record, 2)
	for i := range recs {
		recs[i] = record.Record{TimestampDelta: int64(i), Value: make([]byte, 512)}
	}
	for p := range parts {
		l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", p)), [16]byte{}, cfg, false, Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < 128<<10; {
			buf := recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: int64(1000 + n), ProducerID: -1, BaseSequence: -1}, recs...)
			if _, err := l.Append(buf, AppendOptions{}); err != nil {
				b.Fatal(err)
			}
			n += len(buf)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	benchOpenPartitions(b, root, parts, cfg, false)
}
