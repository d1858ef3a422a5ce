package storage

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/vfs"
)

// settle flushes the machine's dirty pages before a write benchmark so
// that each starts from the same writeback state (write benchmarks run
// one after the other would otherwise pay for their predecessors).
func settle(b *testing.B) {
	b.Helper()
	unix.Sync()
	b.ResetTimer()
}

const (
	benchRecord = 1 << 10  // 1 KiB values
	benchBatch  = 16 << 10 // ~16 KiB batches
)

// benchBatchBytes is one producer batch of 16 records of 1 KiB.
func benchBatchBytes(b testing.TB) []byte {
	n := benchBatch / benchRecord
	recs := make([]record.Record, n)
	for i := range recs {
		v := make([]byte, benchRecord)
		for j := range v {
			v[j] = byte(i*31 + j)
		}
		recs[i] = record.Record{TimestampDelta: int64(i), Key: []byte(fmt.Sprint(i)), Value: v}
	}
	return recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: 1, ProducerID: -1, BaseSequence: -1}, recs...)
}

func benchConfig(durable, prealloc bool) Config {
	c := DefaultConfig() // 1 GiB segments: no roll inside a 20000x run
	c.Durable = durable
	c.Preallocate = prealloc
	return c
}

// BenchmarkRawSequentialWrite measures the machine: 16 KiB pwrites
// extending a file, no fsync (the page-cache write rate appends compete
// with).
func BenchmarkRawSequentialWrite(b *testing.B) {
	dir := b.TempDir()
	buf := benchBatchBytes(b)
	b.SetBytes(int64(len(buf)))
	settle(b)
	var f *os.File
	var off int64
	for i := 0; i < b.N; i++ {
		if f == nil || off > 256<<20 {
			if f != nil {
				f.Close()
			}
			var err error
			if f, err = os.Create(filepath.Join(dir, fmt.Sprint(i))); err != nil {
				b.Fatal(err)
			}
			off = 0
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		off += int64(len(buf))
	}
	f.Close()
}

// BenchmarkRawFdatasync measures the machine: write 16 KiB then
// fdatasync, one at a time (ns/op is the durable write latency).
func BenchmarkRawFdatasync(b *testing.B) {
	fsys := vfs.Default()
	f, err := fsys.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := benchBatchBytes(b)
	b.SetBytes(int64(len(buf)))
	settle(b)
	var off int64
	for i := 0; i < b.N; i++ {
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		off += int64(len(buf))
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// rawGroupRig is the raw durable baseline: 8 plain files; each round
// writes 8 x 16 KiB to every file and fdatasyncs the 8 files in parallel
// (what a perfect group commit would do).
type rawGroupRig struct {
	files []vfs.File
	offs  []int64
	buf   []byte
}

func newRawGroupRig(b *testing.B, dir string) *rawGroupRig {
	r := &rawGroupRig{buf: benchBatchBytes(b), offs: make([]int64, 8)}
	for i := 0; i < 8; i++ {
		f, err := vfs.Default().OpenFile(filepath.Join(dir, fmt.Sprintf("raw-%d", i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		r.files = append(r.files, f)
	}
	return r
}

func (r *rawGroupRig) run(n int) {
	for done := 0; done < n; {
		var wg sync.WaitGroup
		for i, f := range r.files {
			for k := 0; k < 8 && done < n; k++ {
				f.WriteAt(r.buf, r.offs[i])
				r.offs[i] += int64(len(r.buf))
				done++
			}
			wg.Add(1)
			go func(f vfs.File) { defer wg.Done(); f.Sync() }(f)
		}
		wg.Wait()
	}
}

func (r *rawGroupRig) close() {
	for _, f := range r.files {
		f.Close()
	}
}

// BenchmarkRawGroupFdatasync measures the machine's durable sequential
// rate with a perfect group commit over 8 files.
func BenchmarkRawGroupFdatasync(b *testing.B) {
	r := newRawGroupRig(b, b.TempDir())
	defer r.close()
	b.SetBytes(int64(len(r.buf)))
	settle(b)
	r.run(b.N)
}

// BenchmarkRawFdatasync8 measures the machine: 8 goroutines each writing
// 16 KiB to its own file and fdatasyncing (the best a durable 8-partition
// writer without batching could do).
func BenchmarkRawFdatasync8(b *testing.B) {
	fsys := vfs.Default()
	dir := b.TempDir()
	buf := benchBatchBytes(b)
	b.SetBytes(int64(len(buf)))
	settle(b)
	var wg sync.WaitGroup
	per := (b.N + 7) / 8
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			f, _ := fsys.OpenFile(filepath.Join(dir, fmt.Sprint(w)), os.O_CREATE|os.O_RDWR, 0o644)
			defer f.Close()
			var off int64
			for i := 0; i < per; i++ {
				f.WriteAt(buf, off)
				off += int64(len(buf))
				f.Sync()
			}
		}(w)
	}
	wg.Wait()
}

func benchAppendNoFsync(b *testing.B, prealloc bool) {
	l, err := Open(filepath.Join(b.TempDir(), "bench-0"), [16]byte{}, benchConfig(false, prealloc), false, Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	buf := benchBatchBytes(b)
	b.SetBytes(int64(len(buf)))
	settle(b)
	for i := 0; i < b.N; i++ {
		record.Batch(buf).SetBaseOffset(0)
		if _, err := l.Append(buf, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendNoFsync appends 16 KiB batches with durable=false (the
// flush.* mode: acknowledged once written).
func BenchmarkAppendNoFsync(b *testing.B) { benchAppendNoFsync(b, false) }

// BenchmarkAppendNoFsyncPrealloc is the same into preallocated segments.
func BenchmarkAppendNoFsyncPrealloc(b *testing.B) { benchAppendNoFsync(b, true) }

// durableRig is 8 partitions sharing one Syncer (acks=all group commit).
type durableRig struct {
	syncer *Syncer
	logs   []*Log
	buf    []byte
}

func newDurableRig(b *testing.B, dir string, prealloc bool) *durableRig {
	d := &durableRig{syncer: NewSyncer(quiet), buf: benchBatchBytes(b)}
	for i := 0; i < 8; i++ {
		l, err := Open(filepath.Join(dir, fmt.Sprintf("bench-%d", i)), [16]byte{}, benchConfig(true, prealloc), false, Options{Syncer: d.syncer, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		d.logs = append(d.logs, l)
	}
	return d
}

func (d *durableRig) close() {
	for _, l := range d.logs {
		l.Close()
	}
	d.syncer.Close()
}

// run makes 8 writers append n batches in total; each keeps up to window
// appends in flight (like a producer's in-flight requests) and waits for
// their group-committed fsync.
func (d *durableRig) run(b *testing.B, n, window int) {
	per := (n + 7) / 8
	var wg sync.WaitGroup
	for _, l := range d.logs {
		wg.Add(1)
		go func(l *Log) {
			defer wg.Done()
			own := append([]byte(nil), d.buf...)
			pending := make([]int64, 0, window)
			for i := 0; i < per; i++ {
				record.Batch(own).SetBaseOffset(0)
				res, err := l.Append(own, AppendOptions{})
				if err != nil {
					b.Error(err)
					return
				}
				pending = append(pending, res.LastOffset+1)
				if len(pending) == window {
					if err := l.WaitDurable(context.Background(), pending[0]); err != nil {
						b.Error(err)
						return
					}
					pending = pending[1:]
				}
			}
			if len(pending) > 0 {
				l.WaitDurable(context.Background(), pending[len(pending)-1])
			}
		}(l)
	}
	wg.Wait()
}

func benchAppendDurable(b *testing.B, prealloc bool, window int) {
	d := newDurableRig(b, b.TempDir(), prealloc)
	defer d.close()
	b.SetBytes(int64(len(d.buf)))
	rounds0 := d.syncer.Rounds()
	settle(b)
	d.run(b, b.N, window)
	b.ReportMetric(float64(b.N)/float64(max(1, d.syncer.Rounds()-rounds0)), "batches/fsync-round")
}

// BenchmarkAppendDurable8 is acks=all with group commit, 8 writers x 8
// partitions, one append in flight per writer.
func BenchmarkAppendDurable8(b *testing.B) { benchAppendDurable(b, false, 1) }

// BenchmarkAppendDurable8Window8 keeps 8 appends in flight per writer.
func BenchmarkAppendDurable8Window8(b *testing.B) { benchAppendDurable(b, false, 8) }

// BenchmarkAppendDurable8Window8Prealloc is the same into preallocated segments.
func BenchmarkAppendDurable8Window8Prealloc(b *testing.B) { benchAppendDurable(b, true, 8) }

// fillLog writes size bytes of 16 KiB batches and closes the log.
func fillLog(b *testing.B, dir string, size int64) {
	l, err := Open(dir, [16]byte{}, benchConfig(false, false), false, Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	buf := benchBatchBytes(b)
	for n := int64(0); n < size; n += int64(len(buf)) {
		record.Batch(buf).SetBaseOffset(0)
		if _, err := l.Append(buf, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRead reads 1 MiB fetches sequentially through Read + ReadAt
// (page cache hot).
func BenchmarkRead(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "bench-0")
	fillLog(b, dir, 64<<20)
	l, err := Open(dir, [16]byte{}, benchConfig(false, false), true, Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	buf := make([]byte, 1<<20)
	var total int64
	off := int64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := l.Read(off, 1<<20, true)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Chunks) == 0 {
			off = 0
			continue
		}
		c := res.Chunks[0]
		n, _ := c.File.File().ReadAt(buf[:c.Len], c.Pos)
		total += int64(n)
		for rest := buf[:c.Len]; len(rest) > 0; {
			bt, r, err := record.Next(rest)
			if err != nil {
				b.Fatal(err)
			}
			off = bt.LastOffset() + 1
			rest = r
		}
		res.Release()
	}
	b.SetBytes(total / int64(b.N))
}

// BenchmarkOffsetLookup is the sparse-index binary search (must not
// allocate).
func BenchmarkOffsetLookup(b *testing.B) {
	n := 1 << 17
	buf := make([]byte, n*offsetEntrySize)
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint32(buf[i*8:], uint32(i*16+15))
		binary.BigEndian.PutUint32(buf[i*8+4:], uint32(i*benchBatch))
	}
	b.ReportAllocs()
	b.ResetTimer()
	var sink int32
	for i := 0; i < b.N; i++ {
		_, p := lookupOffsetIndex(buf, int64((i*7919)%(n*16)))
		sink += p
	}
	_ = sink
}

// BenchmarkRecovery measures unclean-start recovery (full validating scan
// with CRC checks and index rebuild) of a 64 MiB log.
func BenchmarkRecovery(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "bench-0")
	size := int64(64 << 20)
	fillLog(b, dir, size)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		os.Remove(filepath.Join(filepath.Dir(dir), RecoveryPointFile))
		l, err := Open(dir, [16]byte{}, benchConfig(false, false), false, Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		l.Close()
		b.StartTimer()
	}
}

// BenchmarkOpenManyPartitions measures a clean start: opening 1000
// partitions of 3 segments each (one shared Syncer), reported per
// partition. Closed segments are only stat'ed; nothing is fsynced.
func BenchmarkOpenManyPartitions(b *testing.B) {
	const parts = 1000
	root := b.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 40 << 10
	cfg.Durable = false
	buf := benchBatchBytes(b)
	for p := 0; p < parts; p++ {
		l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", p)), [16]byte{}, cfg, false, Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 6; i++ {
			record.Batch(buf).SetBaseOffset(0)
			if _, err := l.Append(buf, AppendOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		l.Close()
	}
	benchOpenPartitions(b, root, parts, cfg, true)
}

// benchOpenPartitions opens the logs root/t-<p>, p < parts, with one
// Syncer, clean or recovering, b.N times, timing the opens only (not the
// closes), and reports µs/partition.
func benchOpenPartitions(b *testing.B, root string, parts int, cfg Config, clean bool) {
	b.ResetTimer()
	for range b.N {
		syncer := NewSyncer(quiet)
		logs := make([]*Log, parts)
		for p := range logs {
			l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", p)), [16]byte{}, cfg, clean, Options{Syncer: syncer, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			logs[p] = l
		}
		b.StopTimer()
		for _, l := range logs {
			l.Close()
		}
		syncer.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*parts), "µs/partition")
}

// BenchmarkAppendDurableManyPartitions is acks=all over many partitions
// of one log dir: 64 writers each append a batch of 8 records of 512 B to
// a random partition among `parts` and wait for it to be durable (like
// the in-flight requests of producers spread over a topic), with the
// write-ahead journal (one fsync per round) and without (one fsync per
// partition written in the round). Compare the sub-benchmarks of one run:
//
//	go test ./internal/storage/ -run '^$' -bench AppendDurableManyPartitions -benchtime 20000x
func BenchmarkAppendDurableManyPartitions(b *testing.B) {
	for _, parts := range []int{1, 1000} {
		for _, journal := range []bool{false, true} {
			if parts == 1 && journal {
				continue // a one-partition round never uses the journal
			}
			b.Run(fmt.Sprintf("parts=%d/journal=%v", parts, journal), func(b *testing.B) {
				benchManyPartitions(b, parts, journal)
			})
		}
	}
}

func benchManyPartitions(b *testing.B, parts int, journal bool) {
	dir := b.TempDir()
	s := NewSyncer(quiet)
	if journal {
		if err := s.OpenJournal(vfs.Default(), dir, DefaultJournalFileBytes); err != nil {
			b.Fatal(err)
		}
	}
	cfg := benchConfig(true, false)
	cfg.SegmentBytes = 64 << 20
	logs := make([]*Log, parts)
	for i := range logs {
		l, err := Open(filepath.Join(dir, fmt.Sprintf("p-%d", i)), [16]byte{1}, cfg, false, Options{Syncer: s, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		logs[i] = l
	}
	if err := s.StartJournal(); err != nil {
		b.Fatal(err)
	}
	if journal { // prepare the files before timing
		s.jrnl.reserve(0)
		s.jrnl.wait()
	}
	defer func() {
		for _, l := range logs {
			l.CloseDeferSync()
		}
		s.Close()
	}()
	recs := make([]record.Record, 8)
	for i := range recs {
		recs[i] = record.Record{Value: make([]byte, 512)}
	}
	batch := recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: 1, ProducerID: -1, BaseSequence: -1}, recs...)
	b.SetBytes(int64(len(batch)))
	const writers = 64
	per := (b.N + writers - 1) / writers
	rounds0 := s.Rounds()
	settle(b)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := append([]byte(nil), batch...)
			x := uint32(w*7919 + 1)
			for range per {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				l := logs[int(x)%parts]
				record.Batch(own).SetBaseOffset(0)
				res, err := l.Append(own, AppendOptions{})
				if err == nil {
					err = l.WaitDurable(context.Background(), res.LastOffset+1)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/float64(max(1, s.Rounds()-rounds0)), "batches/round")
}

// BenchmarkFirstAppendNewPartitions: the first append to each of 200
// partitions just created (CreateTopics, then a produce spread over the
// new topic), by 8 goroutines as a Produce request's workers, then one
// wait for all to be durable. A first append writes the leader epoch
// checkpoint; in a new directory it is fsynced with the directory by the
// first group-commit round instead of under the log lock. append-ms is
// the time to append them all (what a produce request holds its workers
// for), ms/op the time until all are durable.
//
//	go test ./internal/storage -run '^$' -bench FirstAppendNewPartitions -benchtime 5x
func BenchmarkFirstAppendNewPartitions(b *testing.B) {
	const parts, workers = 200, 8
	dir := b.TempDir()
	s := NewSyncer(quiet)
	defer s.Close()
	cfg := benchConfig(true, false)
	recs := []record.Record{{Value: make([]byte, 512)}}
	batch := recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: 1, ProducerID: -1, BaseSequence: -1}, recs...)
	var appendTime time.Duration
	for n := range b.N {
		b.StopTimer()
		logs := make([]*Log, parts)
		for i := range logs {
			l, err := Open(filepath.Join(dir, fmt.Sprintf("t%d-%d", n, i)), [16]byte{1}, cfg, false, Options{Syncer: s, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			logs[i] = l
		}
		unix.Sync() // not settle: it would reset the timer of earlier rounds
		b.StartTimer()
		start := time.Now()
		ends := make([]int64, parts)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				own := append([]byte(nil), batch...)
				for i := int(next.Add(1) - 1); i < parts; i = int(next.Add(1) - 1) {
					res, err := logs[i].Append(own, AppendOptions{})
					if err != nil {
						b.Error(err)
						return
					}
					ends[i] = res.LastOffset + 1
				}
			}()
		}
		wg.Wait()
		appendTime += time.Since(start)
		for i, l := range logs {
			if err := l.WaitDurable(context.Background(), ends[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		for _, l := range logs {
			l.CloseDeferSync()
		}
	}
	b.ReportMetric(float64(appendTime.Microseconds())/1e3/float64(b.N), "append-ms")
}
