package storage

import (
	"strings"
	"syscall"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// TestOpenOnFullDisk: after an unclean stop (indexes zeroed, as an
// interrupted in-place write used to leave them) a log opens and serves
// every record even though no write of any index, snapshot or checkpoint
// succeeds; writeIndexFile never destroys the previous file.
func TestOpenOnFullDisk(t *testing.T) {
	fsys := vfs.NewCrashFS()
	dir := "/d/full-0"
	cfg := testConfig()
	l := openTest(t, fsys, dir, cfg, false)
	var want [][]byte
	for i := 0; i < 150; i++ {
		b := mkBatch(t, 3, "v", int64(i))
		mustAppend(t, l, b)
		want = append(want, b)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, have %d", len(l.Segments()))
	}
	img := fsys.Crash()
	l.Close()
	for _, f := range img.Files() {
		if hasSuffix(f, IndexSuffix) || hasSuffix(f, TimeIndexSuffix) {
			g, err := img.OpenFile(f, 0x241 /* O_WRONLY|O_CREATE|O_TRUNC */, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			g.Sync()
			g.Close()
		}
	}
	full := func(op, name string) error {
		if op == "write" && !strings.HasSuffix(name, LogSuffix) {
			return syscall.ENOSPC
		}
		return nil
	}
	img.SetHook(full)
	l = openTest(t, img, dir, cfg, false)
	got := readAll(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("read %d batches, want %d", len(got), len(want))
	}
	if _, _, _, err := l.OffsetForTimestamp(20); err != nil {
		t.Fatalf("offset for timestamp: %v", err)
	}
	l.Close()

	// A failed index write keeps the old file.
	name := "/d/full-0/x.index"
	img.SetHook(nil)
	if err := writeIndexFile(img, name, []byte{0, 0, 0, 1, 0, 0, 0, 2}); err != nil {
		t.Fatal(err)
	}
	img.SetHook(full)
	if err := writeIndexFile(img, name, []byte{0, 0, 0, 3, 0, 0, 0, 4}); err == nil {
		t.Fatal("write on a full disk succeeded")
	}
	data, err := vfs.ReadFile(img, name)
	if err != nil || len(data) != 8 || data[3] != 1 {
		t.Fatalf("old index damaged: %v %v", data, err)
	}
	if _, err := img.Stat(name + TmpSuffix); err == nil {
		t.Fatal("tmp file left behind")
	}
}
