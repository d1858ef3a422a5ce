package cleaner

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// killFS counts the mutating file-system operations (create, write, sync,
// rename, remove, directory sync) made once armed, and SIGKILLs the
// process just before or just after operation number at.
type killFS struct {
	vfs.FS
	n     *atomic.Int64
	armed *atomic.Bool
	at    int64
	after bool
}

func (k killFS) step(op func() error) error {
	if !k.armed.Load() {
		return op()
	}
	i := k.n.Add(1)
	if i == k.at && !k.after {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	err := op()
	if i == k.at && k.after {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return err
}

func (k killFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	var f vfs.File
	open := func() error {
		var err error
		f, err = k.FS.OpenFile(name, flag, perm)
		return err
	}
	var err error
	if flag&os.O_CREATE != 0 {
		err = k.step(open)
	} else {
		err = open()
	}
	if err != nil {
		return nil, err
	}
	return killFile{File: f, k: k}, nil
}
func (k killFS) Remove(name string) error { return k.step(func() error { return k.FS.Remove(name) }) }
func (k killFS) Rename(a, b string) error { return k.step(func() error { return k.FS.Rename(a, b) }) }
func (k killFS) SyncDir(name string) error {
	return k.step(func() error { return k.FS.SyncDir(name) })
}

type killFile struct {
	vfs.File
	k killFS
}

func (f killFile) WriteAt(p []byte, off int64) (n int, err error) {
	err = f.k.step(func() error { n, err = f.File.WriteAt(p, off); return err })
	return n, err
}
func (f killFile) Write(p []byte) (n int, err error) {
	err = f.k.step(func() error { n, err = f.File.Write(p); return err })
	return n, err
}
func (f killFile) Sync() error { return f.k.step(f.File.Sync) }

const crashEnv = "STRATA_CLEANER_CRASH_CHILD"

// TestCrashChild is the child process of TestCleanerCrash: it opens the
// log dir from the environment, arms the kill point and cleans.
func TestCrashChild(t *testing.T) {
	spec := os.Getenv(crashEnv)
	if spec == "" {
		t.Skip("child process of TestCleanerCrash only")
	}
	var dir string
	var at int64
	var after int
	if _, err := fmt.Sscanf(spec, "%d %d %s", &at, &after, &dir); err != nil {
		t.Fatalf("bad spec %q: %v", spec, err)
	}
	var n atomic.Int64
	var armed atomic.Bool
	kfs := killFS{FS: vfs.Default(), n: &n, armed: &armed, at: at, after: after == 1}
	h := newHarness(t, dir, crashCfg(), testCleanerCfg(), nil, kfs)
	armed.Store(true)
	h.clean()
	armed.Store(false)
	h.close()
	fmt.Printf("ops=%d\n", n.Load())
}

func crashCfg() storage.Config {
	cfg := compactCfg()
	cfg.SegmentBytes = 1 << 30 // one output group: the state is before or after
	cfg.IndexIntervalBytes = 64
	return cfg
}

// TestCleanerCrash SIGKILLs a child process running storage+cleaner at
// every mutating file operation of a cleaning round (before and after
// each create, write, fsync, rename, remove and directory fsync) and
// checks after recovery that the log equals the state before or after the
// cleaning, and that every latest value survives.
func TestCleanerCrash(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in child")
	}
	base := t.TempDir()
	prep := filepath.Join(base, "prep")
	h := newHarness(t, prep, crashCfg(), testCleanerCfg(), nil, nil)
	latest := map[string][]byte{}
	for seg := 0; seg < 4; seg++ {
		if seg == 1 {
			// A committed and an aborted transaction: the swap must carry
			// the .txnindex entry, aborted data goes, committed stays.
			tp := producer{id: 900, epoch: 0, seq: 0, txn: true}
			h.appendP(&tp, record.Zstd, kv{s("tx-only"), s("committed")}, kv{s("k0"), s("tx")})
			h.appendMarker(tp, true)
			h.appendP(&tp, record.None, kv{s("ab-only"), s("aborted")}, kv{s("k1"), s("ab")})
			h.appendMarker(tp, false)
			latest["tx-only"], latest["k0"] = s("committed"), s("tx")
		}
		for i := 0; i < 5; i++ {
			kvs := []kv{}
			for j := 0; j < 3; j++ {
				k := []byte(fmt.Sprint("k", (seg*7+i*3+j)%11))
				var v []byte
				if (seg+i+j)%5 != 0 {
					v = []byte(fmt.Sprint("v", seg, i, j))
				}
				kvs = append(kvs, kv{k, v})
				latest[string(k)] = v
			}
			codec := codecs[(seg+i)%len(codecs)]
			if _, err := h.append(clientBatch(codec, noProducer, 1000+int64(seg*10+i), kvs)); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := h.readAll()
	abortedTxns := h.log.AbortedTransactions(0, h.log.LogEndOffset())
	if len(abortedTxns) != 1 {
		t.Fatalf("aborted transactions %+v", abortedTxns)
	}
	h.close()

	// Reference run in a child without a kill point: the after state and
	// the number of operations.
	ref := filepath.Join(base, "ref")
	copyDir(t, prep, ref)
	out := runChild(t, ref, 0, 0)
	var ops int
	if _, err := fmt.Sscanf(string(out[bytes.Index(out, []byte("ops=")):]), "ops=%d", &ops); err != nil || ops == 0 {
		t.Fatalf("reference child: %v\n%s", err, out)
	}
	after := reopenAndRead(t, ref, latest, abortedTxns)
	for _, r := range after {
		if string(r.Key) == "ab-only" {
			t.Fatal("aborted record survived the cleaning")
		}
	}
	if len(after) >= len(before) {
		t.Fatalf("cleaning removed nothing (%d -> %d)", len(before), len(after))
	}
	t.Logf("%d records before, %d after, %d kill points x 2", len(before), len(after), ops)

	nBefore, nAfter := 0, 0
	for at := 1; at <= ops; at++ {
		for _, mode := range []int{0, 1} {
			dir := filepath.Join(base, "run-"+strconv.Itoa(at)+"-"+strconv.Itoa(mode))
			copyDir(t, prep, dir)
			runChild(t, dir, at, mode)
			got := reopenAndRead(t, dir, latest, abortedTxns)
			switch {
			case sameRecords(got, before):
				nBefore++
			case sameRecords(got, after):
				nAfter++
			default:
				t.Fatalf("kill at op %d (after=%d): log is neither the before nor the after state: %d records", at, mode, len(got))
			}
			checkLatest(t, got, latest)
			os.RemoveAll(dir)
		}
	}
	t.Logf("recovered to the before state %d times, to the after state %d times", nBefore, nAfter)
	if nBefore == 0 || nAfter == 0 {
		t.Fatal("kill points did not cover both sides of the swap")
	}
}

func runChild(t *testing.T, dir string, at, mode int) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %s", crashEnv, at, mode, dir))
	out, err := cmd.CombinedOutput()
	if at == 0 {
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return out
	}
	var ee *exec.ExitError
	if err == nil {
		t.Fatalf("child with kill point %d finished normally\n%s", at, out)
	}
	if !asExit(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child with kill point %d: %v\n%s", at, err, out)
	}
	return out
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// reopenAndRead opens the log after a crash (recovery on) and reads it.
// The aborted transactions of the log must be aborted, before and after
// cleaning it again (ABORT markers and their .txnindex entries stay).
func reopenAndRead(t *testing.T, logDir string, latest map[string][]byte, aborted []storage.AbortedTxn) []stored {
	t.Helper()
	h := &harness{t: t, logDir: logDir, topic: "t", cfg: crashCfg(), ccfg: testCleanerCfg(), clock: newFakeClock(),
		fs: vfs.Default(), dir: filepath.Join(logDir, "t-0"), logger: discardLogger()}
	h.open(false)
	defer h.close()
	recs, _ := h.readAll()
	if got := h.log.AbortedTransactions(0, h.log.LogEndOffset()); !slices.Equal(got, aborted) {
		t.Fatalf("aborted transactions after recovery %+v, want %+v", got, aborted)
	}
	// The recovered log cleans again (no leftover swap state in the way)
	// without losing anything.
	h.clean()
	again, _ := h.readAll()
	checkLatest(t, again, latest)
	if got := h.log.AbortedTransactions(0, h.log.LogEndOffset()); !slices.Equal(got, aborted) {
		t.Fatalf("aborted transactions after cleaning again %+v, want %+v", got, aborted)
	}
	return recs
}

func sameRecords(a, b []stored) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Offset != b[i].Offset || a[i].TS != b[i].TS || !bytes.Equal(a[i].Key, b[i].Key) ||
			!bytes.Equal(a[i].Value, b[i].Value) || (a[i].Value == nil) != (b[i].Value == nil) {
			return false
		}
	}
	return true
}

// checkLatest checks that the latest-value-per-key view of recs is latest.
func checkLatest(t *testing.T, recs []stored, latest map[string][]byte) {
	checkLatestTB(t, recs, latest)
}

func checkLatestTB(t testing.TB, recs []stored, latest map[string][]byte) {
	t.Helper()
	view := map[string][]byte{}
	present := map[string]bool{}
	for _, r := range recs {
		view[string(r.Key)] = r.Value
		present[string(r.Key)] = true
	}
	for k, v := range latest {
		if v == nil {
			if view[k] != nil {
				t.Fatalf("deleted key %q has value %q", k, view[k])
			}
			continue
		}
		if !present[k] || !bytes.Equal(view[k], v) {
			t.Fatalf("key %q: got %q want %q", k, view[k], v)
		}
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}
