package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// runTxnWorkload drives random transactional traffic (four producers,
// commits, aborts, plain data) through l and the model; snap is called
// after every durable step.
func runTxnWorkload(t *testing.T, l *Log, m *txnModel, rng *rand.Rand, steps int, snap func()) {
	t.Helper()
	for i := 0; i < steps; i++ {
		m.step(t, l, rng.IntN(10), int64(1+rng.IntN(4)))
		if snap != nil {
			snap()
		}
	}
}

// TestTxnPowerLoss runs transactional traffic with several segments and
// takes power-cut images (clean and torn) at random moments: after
// recovery, open transactions, the LSO, the aborted transactions (in
// memory and in the .txnindex files) match what was acknowledged.
func TestTxnPowerLoss(t *testing.T) {
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for round := 0; round < rounds; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(round), 11))
			fsys := vfs.NewCrashFS()
			dir := "/data/tx-0"
			cfg := txnConfig()
			cfg.SegmentBytes = int64(700 + rng.IntN(1500))
			l := openTest(t, fsys, dir, cfg, false)
			m := newTxnModel()
			type image struct {
				fs *vfs.CrashFS
				m  *txnModel
			}
			var images []image
			runTxnWorkload(t, l, m, rng, 160, func() {
				switch rng.IntN(20) {
				case 0:
					images = append(images, image{fsys.Crash(), m.copy()})
				case 1:
					images = append(images, image{fsys.CrashTorn(func(n int) int { return rng.IntN(n + 1) }), m.copy()})
				}
			})
			images = append(images, image{fsys.Crash(), m.copy()})
			if len(l.Segments()) < 4 {
				t.Fatalf("only %d segments", len(l.Segments()))
			}
			m.check(t, "live", l, fsys, dir)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			for i, im := range images {
				what := fmt.Sprintf("image %d", i)
				l := openTest(t, im.fs, dir, cfg, false)
				im.m.check(t, what, l, im.fs, dir)
				// Traffic goes on after the restart, then a clean reopen.
				runTxnWorkload(t, l, im.m, rng, 20, nil)
				im.m.check(t, what+" continued", l, im.fs, dir)
				l.Close()
				l = openTest(t, im.fs, dir, cfg, true)
				im.m.check(t, what+" reopened", l, im.fs, dir)
				l.Close()
			}
		})
	}
}

// TestTxnRecoveryRebuildsTxnIndex deletes or damages the .txnindex files
// and forces a full recovery: the files come back byte for byte.
func TestTxnRecoveryRebuildsTxnIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fsys := vfs.NewCrashFS()
	dir := "/data/rb-0"
	cfg := txnConfig()
	cfg.SegmentBytes = 900
	l := openTest(t, fsys, dir, cfg, false)
	m := newTxnModel()
	runTxnWorkload(t, l, m, rng, 150, nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range fsys.Files() {
		if strings.HasSuffix(f, TxnIndexSuffix) {
			data, err := vfs.ReadFile(fsys, f)
			if err != nil {
				t.Fatal(err)
			}
			files[f] = data
		}
	}
	if len(files) < 2 {
		t.Fatalf("only %d .txnindex files", len(files))
	}
	for _, damage := range []string{"delete", "garbage", "truncate"} {
		t.Run(damage, func(t *testing.T) {
			img := fsys.Crash()
			for f := range files {
				switch damage {
				case "delete":
					if err := img.Remove(f); err != nil {
						t.Fatal(err)
					}
				case "garbage":
					writeFileT(t, img, f, bytes.Repeat([]byte{0xff}, 3*TxnEntrySize))
				case "truncate":
					writeFileT(t, img, f, files[f][:len(files[f])-5])
				}
			}
			// No recovery point: every segment is re-scanned.
			if err := img.Remove(path.Join(path.Dir(dir), RecoveryPointFile)); err != nil {
				t.Fatal(err)
			}
			clean := damage != "delete" // a damaged file is noticed on a clean open too
			l := openTest(t, img, dir, cfg, clean)
			defer l.Close()
			for f, want := range files {
				got, err := vfs.ReadFile(img, f)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s not rebuilt (%v):\n%x\nwant\n%x", f, err, got, want)
				}
			}
			m.check(t, damage, l, img, dir)
		})
	}
}

func writeFileT(t *testing.T, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	if err := vfs.WriteFileAtomic(fsys, name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTxnTruncateDropsEntries truncates below an abort marker: its entry
// goes (memory and file) and the transaction is open again.
func TestTxnTruncateDropsEntries(t *testing.T) {
	fsys := vfs.NewCrashFS()
	dir := "/d/tr-0"
	l := openTest(t, fsys, dir, txnConfig(), false)
	defer l.Close()
	mustAppend(t, l, mkTxnBatch(t, 2, "a", 1, 0, 0)) // 0-1
	a1 := mustMarker(t, l, 1, 0, false)              // 2
	mustAppend(t, l, mkTxnBatch(t, 2, "b", 1, 0, 2)) // 3-4
	mustAppend(t, l, mkBatch(t, 1, "p", 1))          // 5
	a2 := mustMarker(t, l, 1, 0, false)              // 6
	if got := l.AbortedTransactions(0, 10); len(got) != 2 {
		t.Fatalf("aborted %+v", got)
	}
	if _, err := l.TruncateTo(a2); err != nil {
		t.Fatal(err)
	}
	want := []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: a1, LastStableOffset: a1 + 1}}
	if got := l.AbortedTransactions(0, 10); !reflect.DeepEqual(got, want) {
		t.Fatalf("after truncate %+v", got)
	}
	data, _ := vfs.ReadFile(fsys, filepath.Join(dir, FileName(0, TxnIndexSuffix)))
	if ents, err := ParseTxnIndex(data); err != nil || !reflect.DeepEqual(ents, want) {
		t.Fatalf("file after truncate %+v %v", ents, err)
	}
	if l.LastStableOffset() != 3 {
		t.Fatalf("LSO %d, the cut marker's txn starts at 3", l.LastStableOffset())
	}
	if _, err := l.TruncateTo(a1); err != nil {
		t.Fatal(err)
	}
	if got := l.AbortedTransactions(0, 10); len(got) != 0 {
		t.Fatalf("after second truncate %+v", got)
	}
	if _, err := vfs.ReadFile(fsys, filepath.Join(dir, FileName(0, TxnIndexSuffix))); !errNotExist(err) {
		t.Fatalf("empty txnindex kept: %v", err)
	}
	// The next abort lands in a fresh file.
	a3 := mustMarker(t, l, 1, 0, false)
	want = []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: a3, LastStableOffset: a3 + 1}}
	if got := l.AbortedTransactions(0, 10); !reflect.DeepEqual(got, want) {
		t.Fatalf("after new abort %+v", got)
	}
}

// TestTxnRetentionDeletesTxnIndex: a deleted segment's .txnindex goes with
// it (.deleted rename, then unlink).
func TestTxnRetentionDeletesTxnIndex(t *testing.T) {
	fsys := vfs.NewCrashFS()
	dir := "/d/ret-0"
	cfg := txnConfig()
	cfg.SegmentBytes = 600
	l := openTest(t, fsys, dir, cfg, false)
	defer l.Close()
	m := newTxnModel()
	rng := rand.New(rand.NewPCG(5, 5))
	runTxnWorkload(t, l, m, rng, 80, nil)
	for l.LastStableOffset() < l.HighWatermark() {
		for pid := range m.open {
			m.step(t, l, 8, pid)
		}
	}
	segs := l.Segments()
	cut := segs[len(segs)/2].BaseOffset
	if _, err := l.DeleteRecords(cut); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApplyRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, f := range fsys.Files() {
		if b, ok := parseBase(filepath.Base(f)); ok && b < cut && strings.Contains(f, TxnIndexSuffix) {
			t.Fatalf("%s left behind", f)
		}
	}
	for _, e := range l.AbortedTransactions(0, 1<<40) {
		if e.LastOffset < cut {
			t.Fatalf("entry %+v of a deleted segment", e)
		}
	}
}

// txnSwapFixture is a log with aborted transactions in closed segments
// and a cleaner output for the first segments that drops the aborted data
// (markers kept).
type txnSwapFixture struct {
	fs      *vfs.CrashFS
	l       *Log
	dir     string
	cfg     Config
	old     []int64
	ws      []*SegmentWriter
	aborted []AbortedTxn
}

func newTxnSwapFixture(t *testing.T) *txnSwapFixture {
	t.Helper()
	f := &txnSwapFixture{fs: vfs.NewCrashFS(), dir: "/d/tsw-0", cfg: txnConfig()}
	f.cfg.SegmentBytes = 800
	f.l = openTest(t, f.fs, f.dir, f.cfg, false)
	m := newTxnModel()
	rng := rand.New(rand.NewPCG(9, 9))
	runTxnWorkload(t, f.l, m, rng, 120, nil)
	f.aborted = m.aborted
	segs := f.l.Segments()
	if len(segs) < 6 {
		t.Fatalf("only %d segments", len(segs))
	}
	rangeEnd := segs[4].BaseOffset
	for _, s := range segs[:4] {
		f.old = append(f.old, s.BaseOffset)
	}
	isAborted := func(b record.Batch) bool {
		for _, e := range m.aborted {
			if !b.IsControl() && b.ProducerID() == e.ProducerID && b.BaseOffset() >= e.FirstOffset && b.LastOffset() < e.LastOffset {
				return true
			}
		}
		return false
	}
	// Two replacements: [old0, old2) and [old2, rangeEnd).
	for k, base := range []int64{segs[0].BaseOffset, segs[2].BaseOffset} {
		end := rangeEnd
		if k == 0 {
			end = segs[2].BaseOffset
		}
		w, err := f.l.NewCleanedSegment(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range readAll(t, f.l, base) {
			if b.BaseOffset() >= end {
				break
			}
			if !isAborted(b) {
				if err := w.Append(b); err != nil {
					t.Fatal(err)
				}
			}
		}
		f.ws = append(f.ws, w)
	}
	return f
}

// TestTxnReplaceSegmentsCarriesTxnIndex: after a swap (and after a power
// cut or a failure at any step of it) the aborted transactions are
// unchanged and each .txnindex is in the segment holding its markers.
func TestTxnReplaceSegmentsCarriesTxnIndex(t *testing.T) {
	f := newTxnSwapFixture(t)
	ops := 0
	f.fs.SetHook(func(op, name string) error { ops++; return nil })
	if err := f.l.ReplaceSegments(f.old, f.ws); err != nil {
		t.Fatal(err)
	}
	f.fs.SetHook(nil)
	checkSwapTxns(t, "live", f.l, f)
	f.l.Close()
	l := openTest(t, f.fs, f.dir, f.cfg, true)
	checkSwapTxns(t, "reopened", l, f)
	l.Close()

	for k := 0; k < ops; k += 2 {
		f := newTxnSwapFixture(t)
		var img *vfs.CrashFS
		n := 0
		f.fs.SetHook(func(op, name string) error {
			if n == k {
				img = f.fs.Crash()
			}
			n++
			return nil
		})
		f.l.ReplaceSegments(f.old, f.ws)
		f.fs.SetHook(nil)
		f.l.Close()
		l := openTest(t, img, f.dir, f.cfg, false)
		checkSwapTxns(t, fmt.Sprintf("power cut before op %d", k), l, f)
		l.Close()
	}
}

func checkSwapTxns(t *testing.T, what string, l *Log, f *txnSwapFixture) {
	t.Helper()
	if got := l.AbortedTransactions(0, 1<<40); !reflect.DeepEqual(got, f.aborted) {
		t.Fatalf("%s: aborted\n%+v\nwant\n%+v", what, got, f.aborted)
	}
	var onDisk []AbortedTxn
	for _, s := range l.Segments() {
		data, err := vfs.ReadFile(l.fsys, filepath.Join(f.dir, FileName(s.BaseOffset, TxnIndexSuffix)))
		if errNotExist(err) {
			continue
		}
		ents, err := ParseTxnIndex(data)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		onDisk = append(onDisk, ents...)
	}
	if !reflect.DeepEqual(onDisk, f.aborted) {
		t.Fatalf("%s: files\n%+v\nwant\n%+v", what, onDisk, f.aborted)
	}
	for _, name := range l.fsys.(*vfs.CrashFS).Files() {
		if strings.HasSuffix(name, SwapSuffix) || strings.HasSuffix(name, CleanedSuffix) {
			t.Fatalf("%s: leftover %s", what, name)
		}
	}
}

// TestTxnReplaceSegmentsExplicitEntries: a cleaner that sets the entries
// of its output segments gets exactly those (no carrying), also after a
// restart.
func TestTxnReplaceSegmentsExplicitEntries(t *testing.T) {
	f := newTxnSwapFixture(t)
	rangeEnd := f.l.Segments()[len(f.old)].BaseOffset
	var inRange, after []AbortedTxn
	for _, e := range f.aborted {
		if e.LastOffset < rangeEnd {
			inRange = append(inRange, e)
		} else {
			after = append(after, e)
		}
	}
	if len(inRange) < 2 {
		t.Fatalf("only %d aborted transactions in the cleaned range", len(inRange))
	}
	keep := inRange[len(inRange)-1:] // say the cleaner dropped every other one
	f.ws[1].SetAbortedTxns(keep)
	if err := f.l.ReplaceSegments(f.old, f.ws); err != nil {
		t.Fatal(err)
	}
	want := append(append([]AbortedTxn(nil), keep...), after...)
	f.aborted = want
	checkSwapTxns(t, "live", f.l, f)
	f.l.Close()
	l := openTest(t, f.fs, f.dir, f.cfg, false)
	defer l.Close()
	checkSwapTxns(t, "after restart", l, f)
}
