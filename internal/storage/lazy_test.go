package storage

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// opsFS records the file operations of a partition directory: opens
// (by file name), stats, directory listings and reads (by file name and
// offset).
type opsFS struct {
	vfs.FS
	mu  sync.Mutex
	ops []string
}

func (c *opsFS) add(op, name string) {
	c.mu.Lock()
	c.ops = append(c.ops, op+" "+filepath.Base(name))
	c.mu.Unlock()
}

// take returns the operations so far and forgets them.
func (c *opsFS) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := c.ops
	c.ops = nil
	return ops
}

func (c *opsFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	c.add("open", name)
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return f, err
	}
	return &opsFile{File: f, c: c}, nil
}

func (c *opsFS) Stat(name string) (fs.FileInfo, error) {
	c.add("stat", name)
	return c.FS.Stat(name)
}

func (c *opsFS) ReadDir(name string) ([]fs.DirEntry, error) {
	c.add("readdir", name)
	return c.FS.ReadDir(name)
}

type opsFile struct {
	vfs.File
	c *opsFS
}

func (f *opsFile) ReadAt(p []byte, off int64) (int, error) {
	f.c.add(fmt.Sprintf("read@%d", off), f.Name())
	return f.File.ReadAt(p, off)
}

// count returns how many of ops start with prefix and name a file ending
// in suffix.
func count(ops []string, prefix, suffix string) int {
	n := 0
	for _, op := range ops {
		if strings.HasPrefix(op, prefix) && strings.HasSuffix(op, suffix) {
			n++
		}
	}
	return n
}

// dirFiles lists the names in a partition directory.
func dirFiles(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// TestNewPartitionCreatesThreeInodes: a new partition creates its
// directory, its first .log and partition.metadata only; the .index and
// .timeindex of a segment appear when it closes (a roll, a clean close of
// a written log), as Kafka's LazyIndex creates them on first use. Closed
// segments keep both files.
func TestNewPartitionCreatesThreeInodes(t *testing.T) {
	cfg := testConfig()
	fsys := vfs.NewCrashFS()
	dir := "/d/new-0"
	var creates []string
	fsys.SetHook(func(op, name string) error {
		if op == "create" || op == "mkdir" {
			creates = append(creates, op+" "+filepath.Base(name))
		}
		return nil
	})
	l := openTest(t, fsys, dir, cfg, false)
	fsys.SetHook(nil)
	if len(creates) != 3 {
		t.Fatalf("opening a new partition created %d inodes, want 3 (dir, .log, partition.metadata): %v", len(creates), creates)
	}
	log0, idx0, tidx0 := FileName(0, LogSuffix), FileName(0, IndexSuffix), FileName(0, TimeIndexSuffix)
	if got, want := dirFiles(t, fsys, dir), []string{log0, PartitionMetaFile}; !slices.Equal(got, want) {
		t.Fatalf("new partition holds %v, want %v", got, want)
	}
	// Readers of the empty partition: no file appears.
	if res, err := l.Read(0, 1<<10, true); err != nil || len(res.Chunks) != 0 {
		t.Fatalf("read of an empty partition: %v %v", res.Chunks, err)
	}
	if _, _, found, err := l.OffsetForTimestamp(0); err != nil || found {
		t.Fatalf("time lookup of an empty partition: found %v, %v", found, err)
	}
	for i := range 20 {
		mustAppend(t, l, mkBatch(t, 3, fmt.Sprint("a", i), int64(1000+i)))
	}
	if files := dirFiles(t, fsys, dir); slices.Contains(files, idx0) || slices.Contains(files, tidx0) {
		t.Fatalf("the active segment's index files appeared before it closed: %v", files)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	next := l.LogEndOffset()
	files := dirFiles(t, fsys, dir)
	if !slices.Contains(files, idx0) || !slices.Contains(files, tidx0) {
		t.Fatalf("a rolled segment lacks its index files: %v", files)
	}
	if slices.Contains(files, FileName(next, IndexSuffix)) || slices.Contains(files, FileName(next, TimeIndexSuffix)) {
		t.Fatalf("the new active segment has index files: %v", files)
	}
	mustAppend(t, l, mkBatch(t, 3, "b", 5000))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files = dirFiles(t, fsys, dir)
	if !slices.Contains(files, FileName(next, IndexSuffix)) || !slices.Contains(files, FileName(next, TimeIndexSuffix)) {
		t.Fatalf("a clean close of a written log did not write the active segment's index files: %v", files)
	}
	// An idle partition's clean close writes no index file.
	fsys2 := vfs.NewCrashFS()
	l = openTest(t, fsys2, dir, cfg, false)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, fsys2, dir, cfg, true)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := dirFiles(t, fsys2, dir), []string{log0, PartitionMetaFile}; !slices.Equal(got, want) {
		t.Fatalf("an empty partition after two clean starts holds %v, want %v", got, want)
	}
}

// lazyLog writes a log as an idle partition of a broker holds it: data of
// an idempotent producer over two segments, a transaction left open, and
// batches of increasing timestamps; then a clean close. It returns the
// transaction's first offset and the idempotent batches.
func lazyLog(t *testing.T, fsys vfs.FS, dir string, cfg Config) (txnFirst int64, idem [][]byte) {
	t.Helper()
	l := openTest(t, fsys, dir, cfg, false)
	for i := range 30 {
		b := mkBatchP(t, 2, fmt.Sprint("p", i), int64(1000+i), 42, 0, int32(2*i))
		idem = append(idem, slices.Clone(b)) // as sent: Append sets offsets in b
		mustAppend(t, l, b)
		if i == 14 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	txnFirst = mustAppend(t, l, mkTxnBatch(t, 2, "open", 77, 0, 0)).BaseOffset
	mustAppend(t, l, mkBatch(t, 2, "after", 3000))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return txnFirst, idem
}

// checkLazyLog checks what an open left for later: the last stable
// offset (the open transaction), duplicate detection of the idempotent
// producer's last batch, time lookups and the largest timestamp.
func checkLazyLog(t *testing.T, what string, l *Log, txnFirst int64, idem [][]byte) {
	t.Helper()
	if got := l.LastStableOffset(); got != txnFirst {
		t.Fatalf("%s: last stable offset %d, want the open transaction's first offset %d", what, got, txnFirst)
	}
	res, err := l.Read(txnFirst, 1<<20, true)
	if err != nil || res.LastStableOffset != txnFirst {
		t.Fatalf("%s: read: last stable offset %d (%v), want %d", what, res.LastStableOffset, err, txnFirst)
	}
	res.Release()
	off, ts, found, err := l.OffsetForTimestamp(1020)
	if err != nil || !found || ts != 1020 {
		t.Fatalf("%s: time lookup of 1020: offset %d ts %d found %v %v", what, off, ts, found, err)
	}
	if segs := l.Segments(); segs[len(segs)-1].LargestTimestamp != 3001 {
		t.Fatalf("%s: largest timestamp of the active segment %d, want 3001", what, segs[len(segs)-1].LargestTimestamp)
	}
	leo := l.LogEndOffset()
	r, err := l.Append(slices.Clone(idem[len(idem)-1]), AppendOptions{LeaderEpoch: 1})
	if err != nil || !r.Duplicate {
		t.Fatalf("%s: resend of the idempotent producer's last batch: %+v %v, want a duplicate", what, r, err)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("%s: a duplicate was written", what)
	}
	mustAppend(t, l, mkBatch(t, 1, "new", 4000))
}

// TestIdleOpenReadsNoIndexNorSnapshot: an idle partition's open reads
// neither its .timeindex nor its producer snapshot (nor the batches
// before it), nor its active segment's first batch header: after a clean
// shutdown it reads the last entry of the .index and the few batch
// headers past it (the log end), after kill -9 with nothing past the
// recovery point what recovery checks (index files and one window).
// The producer state, the indexes and the first timestamp load on first
// use, with the same answers.
func TestIdleOpenReadsNoIndexNorSnapshot(t *testing.T) {
	cfg := resumeConfig()
	for _, clean := range []bool{true, false} {
		base := vfs.NewCrashFS()
		dir := "/d/lazy-0"
		txnFirst, idem := lazyLog(t, base, dir, cfg)
		img := base.Clone()
		c := &opsFS{FS: img}
		l := openTest(t, c, dir, cfg, clean)
		ops := c.take()
		what := fmt.Sprintf("clean=%v", clean)
		// The invariants build's check at Open reads every index and
		// batch header: the reads are checked without it.
		if invariantsEnabled {
			ops = nil
		}
		if n := count(ops, "open", SnapshotSuffix) + count(ops, "read", SnapshotSuffix); n > 0 {
			t.Errorf("%s: the open read the producer snapshot: %v", what, ops)
		}
		if clean && count(ops, "open", TimeIndexSuffix) > 0 {
			t.Errorf("%s: the open read the .timeindex: %v", what, ops)
		}
		if n := count(ops, "read@", LogSuffix); n > 1 {
			t.Errorf("%s: the open made %d reads of .log files, want 1: %v", what, n, ops)
		}
		if slices.Contains(ops, "read@0 "+FileName(15, LogSuffix)) {
			t.Errorf("%s: the open read the active segment's first header: %v", what, ops)
		}
		if !invariantsEnabled && l.ps != nil {
			t.Errorf("%s: producer state loaded at open", what)
		}
		checkLazyLog(t, what, l, txnFirst, idem)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLazyProducerStateExpiry: an expiry pass (MaybeRoll) that finds the
// producer state not loaded yet expires it as of then when it loads, as
// the loaded state would have been; without one, nothing expires at load.
func TestLazyProducerStateExpiry(t *testing.T) {
	cfg := resumeConfig()
	for _, pass := range []bool{false, true} {
		fsys := vfs.NewCrashFS()
		dir := "/d/exp-0"
		lazyLog(t, fsys, dir, cfg)
		l := openTest(t, fsys, dir, cfg, true)
		if pass {
			if _, err := l.MaybeRoll(time.Now().Add(48 * time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		ps := l.Producers()
		has := slices.ContainsFunc(ps, func(p ProducerInfo) bool { return p.ProducerID == 42 })
		if has == pass {
			t.Fatalf("expiry pass %v: producer 42 known %v after the load (%+v)", pass, has, ps)
		}
		l.Close()
	}
}

// TestKill9OfNeverLoadedPartition: a partition opened and left idle (its
// producer state, active indexes and first timestamp never loaded),
// through expiry and retention passes, then killed (-9) or cut from power:
// the next open serves the same log, and the first uses answer alike.
func TestKill9OfNeverLoadedPartition(t *testing.T) {
	cfg := resumeConfig()
	for _, clean := range []bool{true, false} {
		fsys := vfs.NewCrashFS()
		dir := "/d/k9-0"
		txnFirst, idem := lazyLog(t, fsys, dir, cfg)
		l := openTest(t, fsys, dir, cfg, clean)
		want := readAll(t, l, 0) // reads load the producer state: checked apart below
		l.Close()
		l = openTest(t, fsys, dir, cfg, clean)
		if _, err := l.MaybeRoll(time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := l.ApplyRetention(time.Now()); err != nil {
			t.Fatal(err)
		}
		if !invariantsEnabled && l.ps != nil {
			t.Fatalf("clean=%v: producer state loaded by an idle partition's passes", clean)
		}
		images := map[string]*vfs.CrashFS{"kill -9": fsys.Clone(), "power cut": fsys.Crash(), "power cut, entries first": fsys.CrashEntriesFirst()}
		for what, img := range images {
			what = fmt.Sprintf("clean=%v %s", clean, what)
			r := openTest(t, img, dir, cfg, false)
			if got := readAll(t, r, 0); !slices.EqualFunc(got, want, func(a, b record.Batch) bool { return sameBatch(a, b) }) {
				t.Fatalf("%s: recovered %d batches, want %d", what, len(got), len(want))
			}
			checkSegmentIndexes(t, r)
			checkLazyLog(t, what, r, txnFirst, idem)
			r.Close()
		}
		l.Close()
	}
}

// TestRecoveryWritesStaleIndexesAtClose: after kill -9 of a partition
// written (and flushed) since its last clean close, with the recovery
// point at its end, recovery reads nothing past the recovery point but
// its in-memory indexes hold entries (and a larger timestamp) that the
// active segment's index files, of the last close, lack: the next clean
// close writes them, so the clean start after it answers the segment's
// largest timestamp (time retention, ListOffsets MAX_TIMESTAMP) right.
// Before, that close wrote nothing and the clean start loaded the stale
// files: largest timestamp 1050 instead of 5050.
func TestRecoveryWritesStaleIndexesAtClose(t *testing.T) {
	cfg := resumeConfig()
	base := vfs.NewCrashFS()
	dir := "/d/stale-0"
	l := openTest(t, base, dir, cfg, false)
	for i := range 50 {
		mustAppend(t, l, mkBatch(t, 2, fmt.Sprint("a", i), int64(1000+i)))
	}
	l.Close()
	l = openTest(t, base, dir, cfg, true)
	for i := range 50 {
		mustAppend(t, l, mkBatch(t, 2, fmt.Sprint("b", i), int64(5000+i)))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.ck.persist(ckRecovery, false); err != nil { // the periodic checkpoint
		t.Fatal(err)
	}
	want := readAll(t, l, 0)
	img := base.Clone() // kill -9
	l.Close()
	for round, clean := range []bool{false, true, true} {
		r := openTest(t, img, dir, cfg, clean)
		if got := r.Segments()[0].LargestTimestamp; got != 5050 {
			t.Fatalf("open %d (clean %v): largest timestamp %d, want 5050", round, clean, got)
		}
		if got := readAll(t, r, 0); len(got) != len(want) {
			t.Fatalf("open %d: %d batches, want %d", round, len(got), len(want))
		}
		checkSegmentIndexes(t, r)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPowerCutAroundFirstIndexFiles cuts the power before every file
// operation of a new partition's life up to and past the first index
// files it writes (its first roll, then a clean close): each image, and
// each kill -9 image, recovers every acknowledged batch with indexes
// that name what they claim, twice (the second time from a clean close
// of the first, whose files the third open reads).
func TestPowerCutAroundFirstIndexFiles(t *testing.T) {
	cfg := resumeConfig()
	cfg.SegmentBytes = 3 << 10
	fsys := vfs.NewCrashFS()
	dir := "/d/first-0"
	type image struct {
		what  string
		fsys  *vfs.CrashFS
		acked int
	}
	var images []image
	var acked []record.Batch
	step := 0
	fsys.SetHook(func(op, name string) error {
		step++
		what := fmt.Sprintf("before %s %s (step %d)", op, filepath.Base(name), step)
		images = append(images, image{"power cut " + what, fsys.Crash(), len(acked)},
			image{"power cut, entries first, " + what, fsys.CrashEntriesFirst(), len(acked)},
			image{"kill -9 " + what, fsys.Clone(), len(acked)})
		return nil
	})
	l := openTest(t, fsys, dir, cfg, false)
	for i := 0; len(l.Segments()) < 3; i++ {
		b := mkBatch(t, 2, fmt.Sprint("a", i), int64(1000+i))
		mustAppend(t, l, b)
		acked = append(acked, b)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fsys.SetHook(nil)
	images = append(images, image{"after the close", fsys.Clone(), len(acked)})
	for _, img := range images {
		for round, clean := range []bool{false, true} {
			r := openTest(t, img.fsys, dir, cfg, clean)
			got := readAll(t, r, 0)
			if len(got) < img.acked {
				t.Fatalf("%s, open %d: %d batches, want at least the %d acknowledged", img.what, round, len(got), img.acked)
			}
			for i := range img.acked {
				if !sameBatch(got[i], acked[i]) {
					t.Fatalf("%s, open %d: batch %d differs", img.what, round, i)
				}
			}
			checkSegmentIndexes(t, r)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
