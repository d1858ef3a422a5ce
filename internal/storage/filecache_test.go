package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// openSegmentFDs counts this process's open descriptors on .log files
// under dir (read from /proc/self/fd).
func openSegmentFDs(t testing.TB, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("read /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue // closed meanwhile (the ReadDir's own descriptor)
		}
		if strings.HasPrefix(target, dir+"/") && strings.HasSuffix(target, LogSuffix) {
			n++
		}
	}
	return n
}

// manyLogs opens n partitions of one log dir under root sharing syncer
// and files.
func manyLogs(t testing.TB, fsys vfs.FS, root string, n int, cfg Config, clean bool, s *Syncer, files *FileCache) []*Log {
	t.Helper()
	logs := make([]*Log, n)
	for i := range logs {
		l, err := Open(filepath.Join(root, fmt.Sprintf("fc-%d", i)), [16]byte{7, byte(i >> 8), byte(i)}, cfg, clean,
			Options{FS: fsys, Syncer: s, Logger: quiet, Files: files})
		if err != nil {
			t.Fatalf("open partition %d: %v", i, err)
		}
		logs[i] = l
	}
	return logs
}

// TestFileCacheBoundsDescriptors: 10,000 partitions on the real disk with
// a file cache of 64: opening them, producing to every one, fetching from
// every one (from several goroutines at once) and a clean restart never
// keep more .log descriptors open than the cache's limit (plus, while
// requests run, the files they hold), and every batch reads back.
func TestFileCacheBoundsDescriptors(t *testing.T) {
	parts := 10000
	if testing.Short() {
		parts = 1000
	}
	const limit, workers = 64, 8
	// On tmpfs when there is one: the test is about descriptors, and
	// 10,000 partitions' worth of fsyncs on a shared disk take minutes.
	root, err := os.MkdirTemp("/dev/shm", "strata-filecache-")
	if err == nil {
		t.Cleanup(func() { os.RemoveAll(root) })
	} else {
		root, parts = t.TempDir(), 1000
	}
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	open := func(clean bool) (*Syncer, *FileCache, []*Log) {
		s := NewSyncer(quiet)
		files := NewFileCache(limit)
		return s, files, manyLogs(t, vfs.Default(), root, parts, cfg, clean, s, files)
	}
	check := func(when string, slack int) {
		t.Helper()
		if n := openSegmentFDs(t, root); n > limit+slack {
			t.Fatalf("%s: %d .log descriptors open, bound %d (+%d held by requests)", when, n, limit, slack)
		}
	}
	s, files, logs := open(false)
	check("after opening", 0)

	batches := make([][]byte, parts)
	var wg sync.WaitGroup
	var peakMu sync.Mutex
	peak := 0
	sample := func() {
		n := openSegmentFDs(t, root)
		peakMu.Lock()
		peak = max(peak, n)
		peakMu.Unlock()
	}
	// Produce (acks=all) from several writers, each over its own share.
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < parts; i += workers {
				b := mkBatch(t, 2, fmt.Sprintf("p%d", i), int64(i))
				batches[i] = b
				res, err := logs[i].Append(b, AppendOptions{LeaderEpoch: 1})
				if err == nil {
					err = logs[i].WaitDurable(context.Background(), res.LastOffset+1)
				}
				if err != nil {
					t.Errorf("partition %d: %v", i, err)
					return
				}
				if i%500 == w {
					sample()
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	check("after producing", 0)
	// Fetch every partition, concurrently, holding each chunk while the
	// others evict its file: the read must still see its bytes.
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < parts; i += workers {
				got := readAll(t, logs[i], 0)
				if len(got) != 1 || string(got[0][12:]) != string(batches[i][12:]) {
					t.Errorf("partition %d: read %d batches, not its one batch", i, len(got))
					return
				}
				if i%500 == w {
					sample()
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	check("after fetching", 0)
	if peak > limit+2*workers {
		t.Fatalf("%d .log descriptors open while producing and fetching, bound %d + %d held by requests", peak, limit, 2*workers)
	}
	all, active := files.Evictions()
	if active == 0 || all < uint64(parts) {
		t.Fatalf("the cache evicted %d segments, %d active: the bound was not exercised", all, active)
	}
	t.Logf("%d partitions, limit %d: peak %d .log descriptors, %d evictions (%d active segments)", parts, limit, peak, all, active)
	closeAll(t, s, logs)
	check("after close", -limit)

	s, _, logs = open(true)
	check("after a clean restart", 0)
	for _, i := range []int{0, parts / 2, parts - 1} {
		if got := readAll(t, logs[i], 0); len(got) != 1 || string(got[0][12:]) != string(batches[i][12:]) {
			t.Fatalf("partition %d after restart: %d batches", i, len(got))
		}
	}
	closeAll(t, s, logs)
}

// TestFileCacheEvictionFsyncsFirst: without durable acks nothing fsyncs
// an append, but the cache closing an active segment's file fsyncs it
// first (a write-back error is reported on a descriptor that is still
// open, never lost with the last one): after a power cut the bytes of
// every partition whose file the cache closed are back.
func TestFileCacheEvictionFsyncsFirst(t *testing.T) {
	fsys := vfs.NewCrashFS()
	cfg := testConfig()
	cfg.Durable = false
	s := NewSyncer(quiet)
	files := NewFileCache(2)
	logs := manyLogs(t, fsys, "/data", 6, cfg, false, s, files)
	var want [][]byte
	for i, l := range logs {
		b := mkBatch(t, 3, fmt.Sprintf("e%d", i), 1)
		if _, err := l.Append(b, AppendOptions{LeaderEpoch: 1}); err != nil {
			t.Fatal(err)
		}
		want = append(want, b)
	}
	if _, active := files.Evictions(); active < 4 {
		t.Fatalf("%d active segments evicted, want at least 4", active)
	}
	img := fsys.Crash()
	s.Close()
	s2 := NewSyncer(quiet)
	logs2 := manyLogs(t, img, "/data", 6, cfg, false, s2, NewFileCache(2))
	for i, l := range logs2[:4] { // the last two may still be in the cache, unsynced
		got := readAll(t, l, 0)
		if len(got) != 1 || string(got[0][12:]) != string(want[i][12:]) {
			t.Fatalf("partition %d: %d batches after the power cut; its file was closed by the cache, so fsynced", i, len(got))
		}
	}
	closeAll(t, s2, logs2)
}

// TestFileCachePowerLossKeepsAcked: writers append with acks=all across 40
// partitions whose active and closed segments share a file cache of 3, so
// segments are evicted and reopened all the time, while readers fetch;
// power-cut images taken at random moments (exact and torn) each recover
// with every acknowledged batch back byte for byte.
func TestFileCachePowerLossKeepsAcked(t *testing.T) {
	const parts, writers, appends = 40, 4, 120
	fsys := vfs.NewCrashFS()
	cfg := testConfig()
	cfg.SegmentBytes = 2048
	s := NewSyncer(quiet)
	files := NewFileCache(3)
	logs := manyLogs(t, fsys, "/data", parts, cfg, false, s, files)
	done := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { // a fetcher touching every partition's segments
		defer readers.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			l := logs[i%parts]
			res, err := l.Read(l.LogStartOffset(), 1<<12, true)
			if err != nil {
				t.Error(err)
				return
			}
			res.Release()
		}
	}()
	acked, images := appendWithPowerCuts(t, fsys, logs, writers, appends, 1, 4, 40)
	close(done)
	readers.Wait()
	if t.Failed() {
		t.FailNow()
	}
	images = append(images, powerCutImage{fsys.Crash(), snapshotAcked(acked)})
	all, active := files.Evictions()
	if active == 0 {
		t.Fatalf("no active segment was evicted (%d evictions)", all)
	}
	t.Logf("%d evictions (%d active segments), %d power-cut images", all, active, len(images))
	closeAll(t, s, logs)
	for k, im := range images {
		s2 := NewSyncer(quiet)
		logs2 := manyLogs(t, im.fs, "/data", parts, cfg, false, s2, NewFileCache(3))
		checkAcked(t, fmt.Sprintf("image %d", k), logs2, im.acked)
		closeAll(t, s2, logs2)
	}
}
