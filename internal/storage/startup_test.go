package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestManyPartitionsLazyOpen reopens many multi-segment partitions and
// checks that descriptors stay bounded: one per partition (the active
// segment) plus the shared cache of closed segments.
func TestManyPartitionsLazyOpen(t *testing.T) {
	const parts, cacheSize = 150, 8
	root := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 600
	cfg.Durable = false
	for p := 0; p < parts; p++ {
		l := openTest(t, vfs.Default(), filepath.Join(root, fmt.Sprintf("t-%d", p)), cfg, false)
		for i := 0; i < 20; i++ {
			if _, err := l.Append(mkBatch(t, 2, "m", int64(i)), AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if len(l.Segments()) < 3 {
			t.Fatalf("want several segments, got %d", len(l.Segments()))
		}
		l.Close()
	}
	cache := NewFileCache(cacheSize)
	syncer := NewSyncer(quiet)
	defer syncer.Close()
	before := openFDs(t)
	logs := make([]*Log, parts)
	for p := range logs {
		l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", p)), [16]byte{1, 2, 3}, cfg, true, Options{Files: cache, Syncer: syncer, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		logs[p] = l
	}
	if d := openFDs(t) - before; d > parts+cacheSize+4 {
		t.Fatalf("%d descriptors open after opening %d partitions", d, parts)
	}
	for _, l := range logs {
		if got := readAll(t, l, 0); len(got) != 20 {
			t.Fatalf("read %d batches", len(got))
		}
	}
	if d := openFDs(t) - before; d > parts+cacheSize+4 {
		t.Fatalf("%d descriptors open after reading %d partitions", d, parts)
	}
	for _, l := range logs {
		l.Close()
	}
}
