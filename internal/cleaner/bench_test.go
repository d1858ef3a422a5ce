package cleaner

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// benchSize returns (records, distinct keys): 10M x 1M with STRATA_LONG=1,
// else a size that runs in seconds.
func benchSize() (int, int) {
	if os.Getenv("STRATA_LONG") == "1" {
		return 10_000_000, 1_000_000
	}
	return 200_000, 20_000
}

const benchBatchRecords = 16

// fillLog appends n 1 KiB-value records over k keys (random order),
// benchBatchRecords per batch, and rolls.
func fillLog(tb testing.TB, h *harness, n, k int) {
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 1000)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	kvs := make([]kv, benchBatchRecords)
	for i := 0; i < n; i += benchBatchRecords {
		for j := range kvs {
			key := make([]byte, 16)
			binary.BigEndian.PutUint64(key, uint64(rng.IntN(k)))
			copy(key[8:], "key-suff")
			kvs[j] = kv{key, val}
		}
		if _, err := h.append(clientBatch(record.None, noProducer, 1, kvs)); err != nil {
			tb.Fatalf("append: %v", err)
		}
	}
	if err := h.log.Roll(); err != nil {
		tb.Fatal(err)
	}
}

// rawCopyRate copies every closed segment file of dir to a scratch file
// with 1 MiB reads and writes, then fsyncs it when sync is set, and
// returns bytes/second.
func rawCopyRate(tb testing.TB, dir string, segs []storage.SegmentInfo, sync bool) float64 {
	scratch := filepath.Join(tb.TempDir(), "copy")
	out, err := os.Create(scratch)
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	buf := make([]byte, 1<<20)
	start := time.Now()
	var total int64
	for _, s := range segs {
		if s.Active {
			continue
		}
		in, err := os.Open(filepath.Join(dir, storage.FileName(s.BaseOffset, storage.LogSuffix)))
		if err != nil {
			tb.Fatal(err)
		}
		n, err := io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, buf)
		in.Close()
		if err != nil {
			tb.Fatal(err)
		}
		total += n
	}
	if sync {
		if err := out.Sync(); err != nil {
			tb.Fatal(err)
		}
	}
	el := time.Since(start)
	os.Remove(scratch)
	return float64(total) / el.Seconds()
}

// heapPeak samples HeapInuse until stop is closed.
func heapPeak(stop <-chan struct{}, peak *atomic.Uint64, wg *sync.WaitGroup) {
	defer wg.Done()
	var ms runtime.MemStats
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak.Load() {
			peak.Store(ms.HeapInuse)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

func benchLogCfg() storage.Config {
	cfg := compactCfg()
	cfg.SegmentBytes = 64 << 20
	return cfg
}

// BenchmarkCleanThroughput cleans a log of 1 KiB records (200k records /
// 20k keys by default; 10M / 1M with STRATA_LONG=1) in one round with the
// default 128 MiB dedupe buffer and reports the cleaning rate of the dirty
// log, the raw copy rate of the same files measured in the same run, their
// ratio, and the peak HeapInuse during cleaning. Run with -benchtime=1x.
func BenchmarkCleanThroughput(b *testing.B) {
	n, k := benchSize()
	base := b.TempDir()
	prep := filepath.Join(base, "prep")
	ccfg := DefaultConfig()
	ccfg.Backoff = time.Hour
	h := newHarness(b, prep, benchLogCfg(), ccfg, nil, nil)
	fillLog(b, h, n, k)
	segs := h.log.Segments()
	var dirty int64
	for _, s := range segs {
		if !s.Active {
			dirty += s.Size
		}
	}
	h.close()
	b.SetBytes(dirty)
	var rawTime, rawNoSyncTime time.Duration
	b.ResetTimer()
	var elapsed time.Duration
	var peak atomic.Uint64
	var baseline uint64
	var rssPeak int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		// The long run cleans the prepared log in place (its 10 GB are
		// not copied); the default run cleans a fresh copy each time.
		dir := prep
		if long := os.Getenv("STRATA_LONG") == "1"; long && i > 0 {
			b.Fatal("STRATA_LONG=1: run with -benchtime=1x")
		} else if !long {
			dir = filepath.Join(base, "run")
			os.RemoveAll(dir)
			copyDirTB(b, prep, dir)
		}
		syscall.Sync()
		rawTime += time.Duration(float64(dirty) / rawCopyRate(b, filepath.Join(dir, "t-0"), segs, true) * float64(time.Second))
		syscall.Sync()
		rawNoSyncTime += time.Duration(float64(dirty) / rawCopyRate(b, filepath.Join(dir, "t-0"), segs, false) * float64(time.Second))
		syscall.Sync()
		hh := newHarness(b, dir, benchLogCfg(), ccfg, nil, nil)
		hh.cl.now = time.Now
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		baseline = ms.HeapInuse
		peak.Store(0)
		resetPeakRSS()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go heapPeak(stop, &peak, &wg)
		b.StartTimer()
		start := time.Now()
		if err := hh.cl.CleanNow(context.Background(), "t", 0); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		close(stop)
		wg.Wait()
		rssPeak = max(rssPeak, peakRSS())
		hh.cl.mu.Lock()
		r := hh.cl.parts[tp{"t", 0}].last
		hh.cl.mu.Unlock()
		b.Logf("round: total %v map %v swap(fsync) %v read %d written %d keys %d", r.Duration, r.MapDuration, r.SwapDuration, r.Stats.BytesRead, r.Stats.BytesWritten, r.MapKeys)
		if r.MapFull {
			b.Fatalf("map filled: %d keys do not fit the default buffer", k)
		}
		hh.close()
		b.StartTimer()
	}
	b.StopTimer()
	rate := float64(dirty) * float64(b.N) / elapsed.Seconds()
	raw := float64(dirty) * float64(b.N) / rawTime.Seconds()
	rawNoSync := float64(dirty) * float64(b.N) / rawNoSyncTime.Seconds()
	b.ReportMetric(raw/1e6, "raw-copy-MB/s")
	b.ReportMetric(rate/1e6, "clean-MB/s")
	b.ReportMetric(100*rate/raw, "pct-of-raw")
	b.ReportMetric(rawNoSync/1e6, "raw-copy-nosync-MB/s")
	b.ReportMetric(100*rate/rawNoSync, "pct-of-raw-nosync")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(baseline)/(1<<20), "baseline-heap-MiB")
	b.ReportMetric(float64(rssPeak)/(1<<20), "peak-rss-MiB")
}

func copyDirTB(tb testing.TB, src, dst string) {
	t, ok := tb.(*testing.T)
	if ok {
		copyDir(t, src, dst)
		return
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkProduceWhileCleaning measures append throughput (1 KiB records,
// 16 per batch, one log) while the cleaner compacts one of eight dirty
// logs of benchSize()/8 records each (every round a real first cleaning),
// then with the cleaner idle for the same time, eight times over so that
// each busy window has an idle neighbour under the same background load,
// and reports total busy vs idle throughput and the median pair ratio.
func BenchmarkProduceWhileCleaning(b *testing.B) {
	b.Run("unthrottled", func(b *testing.B) { benchProduceWhileCleaning(b, 0) })
	// log.cleaner.io.max.bytes.per.second = 200 MB/s (bytes read + written).
	b.Run("io=200MB/s", func(b *testing.B) { benchProduceWhileCleaning(b, 200e6) })
}

func benchProduceWhileCleaning(b *testing.B, ioRate float64) {
	n, k := benchSize()
	base := b.TempDir()
	ccfg := DefaultConfig()
	ccfg.Backoff = time.Hour
	ccfg.IOMaxBytesPerSecond = ioRate
	const parts = 8
	var dirty [parts]*harness
	for i := range dirty {
		dirty[i] = newHarness(b, filepath.Join(base, fmt.Sprint("dirty", i)), benchLogCfg(), ccfg, nil, nil)
		dirty[i].cl.throttle.now = time.Now
		dirty[i].cl.throttle.start = time.Now()
		defer dirty[i].close()
		fillLog(b, dirty[i], n/parts, k/parts)
	}
	prodCfg := compactCfg()
	prodCfg.Compact = false
	prodCfg.Delete = true
	prodCfg.SegmentBytes = 64 << 20
	prod := newHarness(b, filepath.Join(base, "prod"), prodCfg, testCleanerCfg(), nil, nil)
	defer prod.close()
	val := make([]byte, 1000)
	kvs := make([]kv, benchBatchRecords)
	for i := range kvs {
		kvs[i] = kv{[]byte("key"), val}
	}
	batch := clientBatch(record.None, noProducer, 1, kvs)
	// produce appends until done is closed (or for d when done is nil).
	produce := func(done <-chan struct{}, d time.Duration) (float64, time.Duration) {
		start := time.Now()
		var bytes int64
		scratch := make([]byte, len(batch))
		for {
			if done != nil {
				select {
				case <-done:
					el := time.Since(start)
					return float64(bytes) / el.Seconds(), el
				default:
				}
			} else if time.Since(start) >= d {
				el := time.Since(start)
				return float64(bytes) / el.Seconds(), el
			}
			copy(scratch, batch)
			if _, err := prod.log.Append(scratch, storage.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
			bytes += int64(len(batch))
		}
	}
	syscall.Sync()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i > 0 {
			b.Fatal("run with -benchtime=1x: the dirty logs are clean after one iteration")
		}
		var busyBytes, idleBytes float64
		var busyTime, idleTime time.Duration
		var ratios []float64
		for _, h := range dirty {
			done := make(chan struct{})
			go func() {
				defer close(done)
				if err := h.cl.CleanNow(context.Background(), "t", 0); err != nil {
					b.Error(err)
				}
			}()
			br, w := produce(done, 0)
			ir, _ := produce(nil, w)
			busyBytes += br * w.Seconds()
			idleBytes += ir * w.Seconds()
			busyTime += w
			idleTime += w
			ratios = append(ratios, br/ir)
		}
		slices.Sort(ratios)
		busy := busyBytes / busyTime.Seconds()
		idle := idleBytes / idleTime.Seconds()
		window := busyTime
		b.ReportMetric(100*ratios[len(ratios)/2], "median-pair-pct")
		b.ReportMetric(idle/1e6, "produce-idle-MB/s")
		b.ReportMetric(busy/1e6, "produce-cleaning-MB/s")
		b.ReportMetric(100*busy/idle, "pct-of-idle")
		b.ReportMetric(window.Seconds(), "cleaning-secs")
	}
}

// resetPeakRSS resets the process's VmHWM (Linux clear_refs 5; best effort).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns VmHWM in bytes, -1 if unknown.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// BenchmarkCleanTinySegments cleans a log shaped like kafka-go's
// TestReaderReadCompactedMessage: segment.bytes=200, so every batch of
// three 4-byte records rolls its own segment (about 150 segments of
// ~210 bytes), a third of the keys repeated. It reports the round's time
// per source segment and the fsyncs it issued, the cost that dominates
// when segments are tiny. Run with -benchtime=10x.
func BenchmarkCleanTinySegments(b *testing.B) {
	base := b.TempDir()
	prep := filepath.Join(base, "prep")
	cfg := compactCfg()
	cfg.SegmentBytes = 200
	ccfg := DefaultConfig()
	ccfg.Backoff = time.Hour
	h := newHarness(b, prep, cfg, ccfg, nil, nil)
	n := 0
	for i := 0; i < 150; i++ {
		kvs := make([]kv, 3)
		for j := range kvs {
			key := n
			if (i+j)%3 == 0 {
				key = n % 10 // a duplicate key
			}
			kvs[j] = kv{[]byte(fmt.Sprintf("%04d", key)), []byte(fmt.Sprintf("%04d", n))}
			n++
		}
		if _, err := h.append(clientBatch(record.None, noProducer, 1, kvs)); err != nil {
			b.Fatal(err)
		}
	}
	if err := h.log.Roll(); err != nil {
		b.Fatal(err)
	}
	segs := len(h.log.Segments()) - 1
	h.close()
	var elapsed time.Duration
	var syncs int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		dir := filepath.Join(base, "run")
		os.RemoveAll(dir)
		copyDirTB(b, prep, dir)
		cf := &countingFS{FS: vfs.Default()}
		hh := newHarness(b, dir, cfg, ccfg, nil, cf)
		hh.cl.now = time.Now
		cf.syncs.Store(0)
		b.StartTimer()
		start := time.Now()
		if err := hh.cl.CleanNow(context.Background(), "t", 0); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		syncs += cf.syncs.Load()
		hh.cl.mu.Lock()
		r := hh.cl.parts[tp{"t", 0}].last
		hh.cl.mu.Unlock()
		if i == 0 {
			b.Logf("segments %d groups %d: total %v map %v swap %v", r.Segments, r.Groups, r.Duration, r.MapDuration, r.SwapDuration)
		}
		hh.close()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(segs), "segments")
	b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N)/float64(segs), "ms/segment")
	b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/round")
}

// countingFS counts fsyncs of files and directories.
type countingFS struct {
	vfs.FS
	syncs atomic.Int64
}

func (c *countingFS) SyncDir(dir string) error {
	c.syncs.Add(1)
	return c.FS.SyncDir(dir)
}

func (c *countingFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &countingFile{File: f, syncs: &c.syncs}, nil
}

type countingFile struct {
	vfs.File
	syncs *atomic.Int64
}

func (f *countingFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

// Fd keeps the descriptor visible (mmap and sendfile paths).
func (f *countingFile) Fd() uintptr {
	if fd, ok := f.File.(vfs.FDFile); ok {
		return fd.Fd()
	}
	return ^uintptr(0)
}
