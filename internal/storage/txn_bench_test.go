package storage

import (
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// txnBenchLog builds an in-memory log of n transactions of producers
// 1..8 (every third aborted) and leaves producer 9's transaction open
// after them; segments are small so entries spread over many .txnindex.
func txnBenchLog(b *testing.B, n int) *Log {
	b.Helper()
	cfg := txnConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.Durable = false
	l, err := Open("/b/txn-0", [16]byte{}, cfg, false, Options{FS: vfs.NewCrashFS(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	seq := map[int64]int32{}
	for i := 0; i < n; i++ {
		pid := int64(1 + i%8)
		if _, err := l.Append(mkTxnBatch(b, 4, "v", pid, 0, seq[pid]), AppendOptions{}); err != nil {
			b.Fatal(err)
		}
		seq[pid] += 4
		if _, err := l.AppendMarker(pid, 0, 0, i%3 != 0, 0); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := l.Append(mkTxnBatch(b, 1, "open", 9, 0, 0), AppendOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := l.Append(mkBatch(b, 4, "tail", 1), AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// BenchmarkAbortedTransactions is the per-fetch lookup of a READ_COMMITTED
// consumer reading a 1000-offset range somewhere in the log.
func BenchmarkAbortedTransactions(b *testing.B) {
	l := txnBenchLog(b, 4000)
	defer l.Close()
	end := l.LastStableOffset()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		from := int64(i*7919) % end
		n += len(l.AbortedTransactions(from, from+1000))
	}
	if n == 0 {
		b.Fatal("no aborted transactions found")
	}
}

// BenchmarkReadCommitted reads 64 KiB fetches below the last stable
// offset (an open transaction keeps it below the high watermark).
func BenchmarkReadCommitted(b *testing.B) {
	l := txnBenchLog(b, 4000)
	defer l.Close()
	lso := l.LastStableOffset()
	if lso >= l.HighWatermark() {
		b.Fatal("no open transaction")
	}
	b.ReportAllocs()
	b.ResetTimer()
	off := int64(0)
	for i := 0; i < b.N; i++ {
		res, err := l.ReadCommitted(off, 64<<10, true)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Chunks) == 0 {
			off = 0
			continue
		}
		c := res.Chunks[0]
		off = res.LastStableOffset - 1 - int64(i%500) // land near the LSO often
		if off < 0 {
			off = 0
		}
		_ = c
		res.Release()
	}
}

// BenchmarkAbortTxn appends a one-batch transaction and its ABORT marker (no fsync): the marker path with its .txnindex append.
func BenchmarkAbortTxn(b *testing.B) {
	l := txnBenchLog(b, 0)
	defer l.Close()
	seq := int32(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(mkTxnBatch(b, 1, "v", 9, 0, seq), AppendOptions{}); err != nil {
			b.Fatal(err)
		}
		seq++
		if _, err := l.AppendMarker(9, 0, 0, false, 0); err != nil {
			b.Fatal(err)
		}
	}
}
