package storage

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/vfs"
)

// readCountFS counts the bytes read from .log files.
type readCountFS struct {
	vfs.FS
	mu    sync.Mutex
	bytes int64
	calls int
}

func (c *readCountFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, LogSuffix) {
		return f, err
	}
	return &readCountFile{File: f, c: c}, nil
}

func (c *readCountFS) take() (int64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, n := c.bytes, c.calls
	c.bytes, c.calls = 0, 0
	return b, n
}

type readCountFile struct {
	vfs.File
	c *readCountFS
}

func (f *readCountFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.mu.Lock()
	f.c.bytes += int64(n)
	f.c.calls++
	f.c.mu.Unlock()
	return n, err
}

// resumeConfig has segments large enough to hold a few hundred index
// entries, and no time-based roll.
func resumeConfig() Config {
	c := testConfig()
	c.SegmentBytes = 1 << 20
	c.SegmentIndexBytes = 64 << 10
	c.SegmentMs = 100 * 365 * 24 * time.Hour
	return c
}

// TestRecoveryIdlePartitionReadsNoSegmentData: after kill -9, a partition
// with nothing past its recovery point reads its index files and one
// window of batch headers from its last offset index entry, not its
// segment; one written since its last clean start reads the headers of
// what was written since (its on-disk index is of the last close).
// Without usable index files the same recovery reads the whole segment.
func TestRecoveryIdlePartitionReadsNoSegmentData(t *testing.T) {
	// The invariants build's check at Open reads every batch header: the
	// counts are checked without it.
	counts := !invariantsEnabled
	cfg := resumeConfig()
	base := vfs.NewCrashFS()
	dir := "/d/idle-0"
	l := openTest(t, base, dir, cfg, false)
	for i := range 2000 {
		mustAppend(t, l, mkBatch(t, 1+i%3, fmt.Sprint("b", i), int64(1000+i)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, base, dir, cfg, true)
	size := l.Segments()[0].Size
	if len(l.Segments()) != 1 || size < 100<<10 {
		t.Fatalf("want one segment of 100+ KiB, have %+v", l.Segments())
	}
	want := readAll(t, l, 0)

	recoverCounting := func(fsys vfs.FS) (*Log, int64, int) {
		t.Helper()
		c := &readCountFS{FS: fsys}
		r := openTest(t, c, dir, cfg, false) // kill -9: no clean shutdown
		n, calls := c.take()
		if got := readAll(t, r, 0); len(got) != len(want) || !slices.EqualFunc(got, want, func(a, b record.Batch) bool { return string(a) == string(b) }) {
			t.Fatalf("recovered %d batches, want %d", len(got), len(want))
		}
		checkSegmentIndexes(t, r)
		return r, n, calls
	}

	// Idle since its clean start.
	r, n, calls := recoverCounting(base.Clone())
	if counts && (n > headerWindow+record.HeaderSize || calls > 2) { // and openActive reads the first header
		t.Fatalf("idle partition: recovery read %d bytes of its segment in %d reads (segment %d bytes), want one window of %d and the first header",
			n, calls, size, headerWindow)
	}
	if r.changed {
		t.Fatal("idle partition: recovery changed the log")
	}
	r.Close()

	// Without its index files: the whole segment.
	img := base.Clone()
	for _, suf := range []string{IndexSuffix, TimeIndexSuffix} {
		if err := img.Remove(filepath.Join(dir, FileName(0, suf))); err != nil {
			t.Fatal(err)
		}
	}
	r, n, _ = recoverCounting(img)
	if n < size {
		t.Fatalf("without index files recovery read %d bytes, want the segment's %d", n, size)
	}
	r.Close()

	// Written since its clean start, then synced: headers of what came
	// since the last close (and the producer state from its snapshot).
	for i := range 100 {
		b := mkBatch(t, 2, fmt.Sprint("c", i), int64(5000+i))
		mustAppend(t, l, b)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	want = readAll(t, l, 0)
	grown := l.Segments()[0].Size - size
	r, n, _ = recoverCounting(base.Clone())
	if counts && (n > 2*grown+2*headerWindow || n >= size) {
		t.Fatalf("partition written since its clean start (%d bytes): recovery read %d bytes (segment %d)", grown, n, size+grown)
	}
	r.Close()
	l.Close()
}

// checkSegmentIndexes checks every loaded offset index entry of l against
// the batch it names, and every time index entry against the batches'
// timestamps: (T, O) where O is the first batch whose maxTimestamp is T
// and every earlier batch's is below T.
func checkSegmentIndexes(t *testing.T, l *Log) {
	t.Helper()
	for _, s := range l.v.Load().segs {
		oi, ti, err := s.indexes()
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.acquire()
		if err != nil {
			t.Fatal(err)
		}
		type bt struct{ last, maxTs int64 }
		var batches []bt
		byPos := map[int64]int64{}
		var hdr [record.HeaderSize]byte
		for pos := int64(0); pos < s.size.Load(); {
			h, err := readHeader(f.f, pos, hdr[:])
			if err != nil {
				t.Fatal(err)
			}
			byPos[pos] = h.last
			batches = append(batches, bt{h.last, h.maxTs})
			pos += h.size
		}
		f.Release()
		ob := oi.snapshot()
		for i := 0; i < len(ob); i += offsetEntrySize {
			rel := int64(int32(binary.BigEndian.Uint32(ob[i:])))
			pos := int64(int32(binary.BigEndian.Uint32(ob[i+4:])))
			if last, ok := byPos[pos]; !ok || last != s.base+rel {
				t.Fatalf("segment %d: offset index entry (%d, %d) does not name a batch ending at %d", s.base, rel, pos, s.base+rel)
			}
		}
		tb := ti.snapshot()
		for i := 0; i < len(tb); i += timeEntrySize {
			ts := int64(binary.BigEndian.Uint64(tb[i:]))
			off := s.base + int64(int32(binary.BigEndian.Uint32(tb[i+8:])))
			k := slices.IndexFunc(batches, func(b bt) bool { return b.last >= off })
			if k < 0 || batches[k].maxTs != ts {
				t.Fatalf("segment %d: time index entry (%d, %d) does not name a batch with that timestamp", s.base, ts, off)
			}
			for _, b := range batches[:k] {
				if b.maxTs >= ts {
					t.Fatalf("segment %d: time index entry (%d, %d) after a batch with timestamp %d", s.base, ts, off, b.maxTs)
				}
			}
		}
	}
}

// resumeImage is a crash image and the number of batches acknowledged
// when it was taken.
type resumeImage struct {
	what  string
	fsys  *vfs.CrashFS
	acked int
}

// TestRecoveryResumeMatchesFullScan cuts the power (exact, directory
// entries first, torn) and kills the process before every file system
// operation of a log's life over two clean restarts (appends with
// timestamps out of order, aborted and committed transactions, rolls,
// flushes, closes with CloseDeferSync and Syncer.Close), and recovers
// each image twice: as is, and without its index files and recovery
// point (recovery then reads and checks every batch from the start,
// rebuilding every index). Both must serve every acknowledged batch and
// answer every read, time lookup, max timestamp and aborted transaction
// query alike, and the recovered indexes must name what they claim.
func TestRecoveryResumeMatchesFullScan(t *testing.T) {
	cfg := resumeConfig()
	cfg.SegmentBytes = 5 << 10 // a few rolls
	fsys := vfs.NewCrashFS()
	dir := "/d/res-0"
	var mu sync.Mutex
	var images []resumeImage
	var acked []record.Batch
	snap := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		n := len(acked)
		images = append(images,
			resumeImage{"power cut " + what, fsys.Crash(), n},
			resumeImage{"power cut, entries first, " + what, fsys.CrashEntriesFirst(), n},
			resumeImage{"torn power cut " + what, fsys.CrashTorn(func(u int) int { return u / 2 }), n},
			resumeImage{"kill -9 " + what, fsys.Clone(), n})
	}
	var step int
	fsys.SetHook(func(op, name string) error {
		mu.Lock()
		step++
		k := step
		mu.Unlock()
		snap(fmt.Sprintf("before %s %s (step %d)", op, name, k))
		return nil
	})
	var pending []record.Batch
	var syncer *Syncer
	ack := func(l *Log) {
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		// The broker's periodic checkpoint: the recovery point reaches
		// the log end, so a crash finds nothing past it.
		if err := syncer.WriteCheckpoints(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		acked = append(acked, pending...)
		mu.Unlock()
		pending = nil
	}
	seq := int32(0)
	n := 0
	write := func(l *Log, batches int) {
		for range batches {
			ts := int64(1000 + 10*n)
			if n%7 == 3 {
				ts -= 45 // out of order
			}
			b := mkBatch(t, 1+n%3, fmt.Sprint("b", n), ts)
			if _, err := l.Append(b, AppendOptions{LeaderEpoch: 1}); err != nil {
				t.Fatal(err)
			}
			pending = append(pending, b)
			n++
			if n%12 == 0 {
				ack(l)
			}
			if n%10 == 5 { // a transaction, every other one aborted
				const pid = 77
				tb := mkTxnBatch(t, 2, fmt.Sprint("t", n), pid, 0, seq)
				seq += 2
				if _, err := l.Append(tb, AppendOptions{LeaderEpoch: 1}); err != nil {
					t.Fatal(err)
				}
				if _, err := l.AppendMarker(pid, 0, 1, n%20 == 5, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		ack(l)
	}
	life := func(clean bool, batches int) {
		s := NewSyncer(quiet)
		syncer = s
		l, err := Open(dir, [16]byte{1}, cfg, clean, Options{FS: fsys, Syncer: s, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		write(l, batches)
		snap("idle")
		if err := l.CloseDeferSync(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	life(false, 80)
	life(true, 25)
	life(true, 0)
	fsys.SetHook(nil)
	if len(images) < 100 {
		t.Fatalf("only %d images", len(images))
	}
	for _, img := range images {
		ref := img.fsys.Clone()
		removeIndexes(t, ref, dir)
		a := recoverImage(t, img.what, img.fsys, dir, cfg)
		b := recoverImage(t, img.what+" (full scan)", ref, dir, cfg)
		compareRecovered(t, img.what, a, b, acked[:img.acked])
		a.Close()
		b.Close()
	}
}

func recoverImage(t *testing.T, what string, fsys vfs.FS, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, [16]byte{1}, cfg, false, Options{FS: fsys, Logger: quiet})
	if err != nil {
		t.Fatalf("%s: recover: %v", what, err)
	}
	checkSegmentIndexes(t, l)
	return l
}

// removeIndexes removes the index files of the partition dir and its
// recovery point, so that recovery reads the whole log.
func removeIndexes(t *testing.T, fsys *vfs.CrashFS, dir string) {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return // not created yet
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, IndexSuffix) || strings.HasSuffix(n, TimeIndexSuffix) || strings.HasSuffix(n, TxnIndexSuffix) {
			if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fsys.Remove(filepath.Join(filepath.Dir(dir), RecoveryPointFile)); err != nil && !errNotExist(err) {
		t.Fatal(err)
	}
}

func compareRecovered(t *testing.T, what string, a, b *Log, acked []record.Batch) {
	t.Helper()
	if a.LogEndOffset() != b.LogEndOffset() || a.LogStartOffset() != b.LogStartOffset() {
		t.Fatalf("%s: log [%d, %d), full scan [%d, %d)", what, a.LogStartOffset(), a.LogEndOffset(), b.LogStartOffset(), b.LogEndOffset())
	}
	ga, gb := readAll(t, a, a.LogStartOffset()), readAll(t, b, b.LogStartOffset())
	if !slices.EqualFunc(ga, gb, func(x, y record.Batch) bool { return string(x) == string(y) }) {
		t.Fatalf("%s: %d batches read, full scan %d, or they differ", what, len(ga), len(gb))
	}
	// Every acknowledged producer batch is there (records past the
	// acknowledged ones may be too).
	have := map[string]bool{}
	for _, x := range ga {
		have[string(x[record.HeaderSize-4:])] = true // records and count: outside the fields written in place
	}
	for i, x := range acked {
		if !have[string(x[record.HeaderSize-4:])] {
			t.Fatalf("%s: acknowledged batch %d of %d lost (log end %d)", what, i, len(acked), a.LogEndOffset())
		}
	}
	// Every offset reads from its batch.
	for _, x := range ga {
		for o := x.BaseOffset(); o <= x.LastOffset(); o++ {
			res, err := a.Read(o, 1, true)
			if err != nil || len(res.Chunks) == 0 {
				t.Fatalf("%s: read %d: %v", what, o, err)
			}
			buf := make([]byte, record.HeaderSize)
			if _, err := res.Chunks[0].File.File().ReadAt(buf, res.Chunks[0].Pos); err != nil {
				t.Fatal(err)
			}
			res.Release()
			if rb := record.Batch(buf); rb.BaseOffset() != x.BaseOffset() {
				t.Fatalf("%s: read %d starts at batch %d, want %d", what, o, rb.BaseOffset(), x.BaseOffset())
			}
		}
	}
	for ts := int64(900); ts < int64(1000+10*200); ts += 5 {
		oa, ta, fa, ea := a.OffsetForTimestamp(ts)
		ob, tb, fb, eb := b.OffsetForTimestamp(ts)
		if oa != ob || ta != tb || fa != fb || (ea == nil) != (eb == nil) {
			t.Fatalf("%s: offset for timestamp %d: (%d, %d, %v, %v), full scan (%d, %d, %v, %v)", what, ts, oa, ta, fa, ea, ob, tb, fb, eb)
		}
	}
	oa, ta, ea := a.MaxTimestamp()
	ob, tb, eb := b.MaxTimestamp()
	if oa != ob || ta != tb || (ea == nil) != (eb == nil) {
		t.Fatalf("%s: max timestamp (%d, %d), full scan (%d, %d)", what, oa, ta, ob, tb)
	}
	if x, y := a.AbortedTransactions(0, a.LogEndOffset()), b.AbortedTransactions(0, b.LogEndOffset()); !slices.Equal(x, y) {
		t.Fatalf("%s: aborted transactions %v, full scan %v", what, x, y)
	}
}

// TestHeaderReaderWindows: small batches' headers come from one window
// read; past a large batch only the header is read, not the window (which
// would read the batches' bodies).
func TestHeaderReaderWindows(t *testing.T) {
	fsys := vfs.NewCrashFS()
	f, err := fsys.OpenFile("/x.log", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var pos []int64
	var data []byte
	for i := range 40 {
		n := 1 + i%3
		if i >= 20 {
			n = 40 // ~10 KiB batches
		}
		recs := make([]record.Record, n)
		for j := range recs {
			recs[j] = record.Record{Value: make([]byte, 250)}
		}
		b := mkBatchRecs(recs)
		pos = append(pos, int64(len(data)))
		data = append(data, b...)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	c := &readCountFS{FS: fsys}
	cf := &readCountFile{File: f, c: c}
	hr := headerReader{f: cf, size: int64(len(data)), prev: -1}
	for i, p := range pos {
		h, err := hr.header(p)
		if err != nil || h.BatchLength() != record.Batch(data[p:]).BatchLength() {
			t.Fatalf("header %d at %d: %v", i, p, err)
		}
		if i == 19 {
			if n, calls := c.take(); calls > 1+int(p)/headerWindow || n > int64(len(data[:pos[20]]))+headerWindow {
				t.Fatalf("20 small batches: %d reads of %d bytes", calls, n)
			}
		}
	}
	if n, calls := c.take(); calls > 20 || n > 2*headerWindow+20*record.HeaderSize {
		t.Fatalf("20 large batches (%d bytes): %d reads of %d bytes, want about a header each", len(data)-int(pos[20]), calls, n)
	}
}

func mkBatchRecs(recs []record.Record) []byte {
	return recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: 1, ProducerID: -1, BaseSequence: -1}, recs...)
}
