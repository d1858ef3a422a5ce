package storage

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
)

// BenchmarkHeapOpenManyLogs measures the live heap an opened, idle
// partition log holds (issue 18's memory row: ~10,100 logs on a broker).
// It builds 2,000 small logs of one segment each (one batch of 8 records
// appended, then a clean close, as a broker leaves them), then opens all
// of them as a broker's start does (one Syncer for the log dir, one shared
// file cache) after a clean shutdown ("clean") and after a crash
// ("recovered"), and reports the HeapAlloc growth after a GC divided by
// the partition count:
//
//	go test ./internal/storage -run '^$' -bench HeapOpenManyLogs -benchtime 3x
//
// For what holds the bytes, STRATA_BENCH_HEAP=prefix writes a heap
// profile of the opened logs to prefix-<mode>.pprof (add -memprofilerate 1
// for every allocation) for go tool pprof -sample_index=inuse_space.
func BenchmarkHeapOpenManyLogs(b *testing.B) {
	const parts = 2000
	root := b.TempDir()
	cfg := DefaultConfig()
	batch := mkBatch(b, 8, "v", 1)
	// A real handler, as the broker's (slog.Logger.With copies it per log).
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	syncer := NewSyncer(logger)
	for p := 0; p < parts; p++ {
		l, err := Open(filepath.Join(root, fmt.Sprintf("topic-%d", p)), [16]byte{1}, cfg, false, Options{Syncer: syncer, Logger: logger})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(append([]byte(nil), batch...), AppendOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	syncer.Close()
	for _, mode := range []struct {
		name  string
		clean bool
	}{{"clean", true}, {"recovered", false}} {
		b.Run(mode.name, func(b *testing.B) {
			var perPart float64
			for i := 0; i < b.N; i++ {
				before := liveHeap()
				files := NewFileCache(10000)
				syncer := NewSyncer(logger)
				logs := make([]*Log, parts)
				for p := range logs {
					l, err := Open(filepath.Join(root, fmt.Sprintf("topic-%d", p)), [16]byte{1}, cfg, mode.clean,
						Options{Syncer: syncer, Files: files, Logger: logger})
					if err != nil {
						b.Fatal(err)
					}
					logs[p] = l
				}
				after := liveHeap()
				if prefix := os.Getenv("STRATA_BENCH_HEAP"); prefix != "" {
					writeHeapProfile(b, prefix+"-"+mode.name+".pprof")
				}
				perPart = float64(after-before) / parts
				b.StopTimer()
				for _, l := range logs {
					if err := l.Close(); err != nil {
						b.Fatal(err)
					}
				}
				syncer.Close()
				runtime.KeepAlive(files)
				b.StartTimer()
			}
			b.ReportMetric(perPart, "heapB/partition")
		})
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
