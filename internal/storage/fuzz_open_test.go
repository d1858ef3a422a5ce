package storage

import (
	"os"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// FuzzOpenCorruptSegment feeds arbitrary .log and .index bytes to Open: it
// must not panic, and whatever it serves must be whole, valid batches with
// increasing offsets.
func FuzzOpenCorruptSegment(f *testing.F) {
	var good []byte
	for i := 0; i < 4; i++ {
		b := record.Batch(mkBatch(f, 1+i, "z", int64(i)))
		b.SetBaseOffset(int64(i * 10))
		good = append(good, b...)
	}
	f.Add(good, []byte{}, false)
	f.Add(good[:len(good)-7], []byte{0, 0, 0, 5, 0, 0, 0, 0}, false)
	f.Add(good, []byte{0, 0, 0, 15, 0, 0, 0, 90, 0, 0, 0, 1, 0, 0, 0, 2}, true)
	bad := append([]byte(nil), good...)
	bad[70] ^= 0x40
	f.Add(bad, []byte{}, false)
	f.Fuzz(func(t *testing.T, logBytes, indexBytes []byte, clean bool) {
		fsys := vfs.NewCrashFS()
		dir := "/f/fz-0"
		fsys.MkdirAll(dir, 0o755)
		for name, data := range map[string][]byte{FileName(0, LogSuffix): logBytes, FileName(0, IndexSuffix): indexBytes} {
			fl, _ := fsys.OpenFile(dir+"/"+name, os.O_CREATE|os.O_RDWR, 0o644)
			fl.WriteAt(data, 0)
			fl.Close()
		}
		// A clean shutdown trusts the .log bytes (as Kafka does), so only
		// the index is untrusted there; otherwise recovery checks all.
		if clean {
			fl, _ := fsys.OpenFile(dir+"/"+FileName(0, LogSuffix), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
			fl.WriteAt(good, 0)
			fl.Close()
		}
		l, err := Open(dir, [16]byte{}, testConfig(), clean, Options{FS: fsys, Logger: quiet})
		if err != nil {
			return // refusing is fine
		}
		defer l.Close()
		next := int64(-1)
		for _, b := range readAll(t, l, l.LogStartOffset()) {
			if b.BaseOffset() < next {
				t.Fatalf("offsets go back: %d after %d", b.BaseOffset(), next)
			}
			next = b.LastOffset() + 1
		}
		if next > l.LogEndOffset() {
			t.Fatalf("served offset %d past leo %d", next, l.LogEndOffset())
		}
		// The log keeps working.
		if _, err := l.Append(mkBatch(t, 1, "after", 1), AppendOptions{}); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

// FuzzAppend feeds arbitrary produce payloads to Append (with and without
// RequireKeys): it must not panic, and a rejected payload leaves no byte.
func FuzzAppend(f *testing.F) {
	f.Add(mkBatch(f, 3, "a", 1), false)
	f.Add(append(mkBatch(f, 1, "a", 1), mkBatch(f, 2, "b", 2)...), true)
	f.Add(mkBatchP(f, 2, "p", 1, 5, 0, 0), false)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49}, false)
	f.Fuzz(func(t *testing.T, data []byte, keys bool) {
		l, err := Open("/f/ap-0", [16]byte{}, testConfig(), false, Options{FS: vfs.NewCrashFS(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		in := append([]byte(nil), data...)
		res, err := l.Append(in, AppendOptions{RequireKeys: keys})
		if err != nil {
			if l.Size() != 0 || l.LogEndOffset() != 0 {
				t.Fatalf("rejected append left data: %v", err)
			}
			return
		}
		l.Flush()
		got := readAll(t, l, 0)
		if len(got) == 0 || got[0].BaseOffset() != res.BaseOffset || got[len(got)-1].LastOffset() != res.LastOffset {
			t.Fatalf("accepted append reads back wrong: %+v", res)
		}
	})
}
