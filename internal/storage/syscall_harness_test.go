package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

// TestStartSyscallHarness is a harness for counting the system calls of a
// broker-like start with strace (docs/benchmarks.md, issue 18, session 9);
// it does nothing unless told to by the environment.
// STRATA_LZ_SETUP=dir: 1,000 partitions of ten 64 KiB idempotent batches
// (RecoverIdlePartitions/large) closed cleanly. STRATA_LZ_OPEN=dir,
// STRATA_LZ_N=n, STRATA_LZ_CLEAN=0/1: open n of them and close them.
func TestStartSyscallHarness(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Durable = false
	if dir := os.Getenv("STRATA_LZ_SETUP"); dir != "" {
		rs := make([]record.Record, 128)
		for i := range rs {
			rs[i] = record.Record{TimestampDelta: int64(i), Value: make([]byte, 512)}
		}
		for p := range 1000 {
			l, err := Open(filepath.Join(dir, fmt.Sprintf("t-%d", p)), [16]byte{}, cfg, false, Options{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			for n := range 10 {
				h := record.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: int64(1000 + n), ProducerID: 1, BaseSequence: int32(n * 128)}
				if _, err := l.Append(recordtest.Batch(h, rs...), AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dir := os.Getenv("STRATA_LZ_OPEN"); dir != "" {
		n, _ := strconv.Atoi(os.Getenv("STRATA_LZ_N"))
		clean := os.Getenv("STRATA_LZ_CLEAN") == "1"
		syncer := NewSyncer(quiet)
		var logs []*Log
		for p := range n {
			l, err := Open(filepath.Join(dir, fmt.Sprintf("t-%d", p)), [16]byte{}, cfg, clean, Options{Syncer: syncer, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			logs = append(logs, l)
		}
		for _, l := range logs {
			l.Close()
		}
	}
}
