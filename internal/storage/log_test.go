package storage

import (
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

func TestAppendReadReopen(t *testing.T) {
	for _, name := range []string{"os", "crashfs"} {
		t.Run(name, func(t *testing.T) {
			var fsys vfs.FS = vfs.Default()
			dir := t.TempDir() + "/topic-0"
			if name == "crashfs" {
				fsys = vfs.NewCrashFS()
				dir = "/data/topic-0"
			}
			cfg := testConfig()
			l := openTest(t, fsys, dir, cfg, false)
			var want [][]byte
			for i := 0; i < 100; i++ {
				b := mkBatch(t, 1+i%5, "v", int64(1000+i*10))
				res := mustAppend(t, l, b)
				want = append(want, b)
				if i == 0 && res.BaseOffset != 0 {
					t.Fatalf("first base %d", res.BaseOffset)
				}
			}
			if len(l.Segments()) < 3 {
				t.Fatalf("expected rolls, got %d segments", len(l.Segments()))
			}
			got := readAll(t, l, 0)
			if len(got) != len(want) {
				t.Fatalf("got %d batches want %d", len(got), len(want))
			}
			for i := range got {
				if !sameBatch(got[i], want[i]) {
					t.Fatalf("batch %d differs", i)
				}
			}
			leo := l.LogEndOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			for _, clean := range []bool{true, false} {
				l = openTest(t, fsys, dir, cfg, clean)
				if l.LogEndOffset() != leo {
					t.Fatalf("clean=%v leo %d want %d", clean, l.LogEndOffset(), leo)
				}
				got = readAll(t, l, 0)
				if len(got) != len(want) {
					t.Fatalf("reopen: got %d batches want %d", len(got), len(want))
				}
				// Mid-batch offsets.
				for off := int64(0); off < leo; off += 7 {
					bs := readAll(t, l, off)
					if len(bs) == 0 || bs[0].BaseOffset() > off || bs[0].LastOffset() < off {
						t.Fatalf("read at %d starts wrong", off)
					}
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestReadLimits(t *testing.T) {
	l := openTest(t, vfs.NewCrashFS(), "/d/lim-0", testConfig(), false)
	defer l.Close()
	b := mkBatch(t, 5, "big", 1)
	mustAppend(t, l, b)
	mustAppend(t, l, mkBatch(t, 1, "s", 1))
	if res, err := l.Read(0, 10, false); err != nil || len(res.Chunks) != 0 {
		t.Fatalf("first batch over maxBytes without minOneBatch: %+v %v", res, err)
	}
	res, err := l.Read(0, 10, true)
	if err != nil || len(res.Chunks) != 1 || res.Chunks[0].Len != int64(len(b)) {
		t.Fatalf("minOneBatch: %+v %v", res, err)
	}
	res.Release()
	if _, err := l.Read(l.LogEndOffset()+1, 100, true); err == nil {
		t.Fatal("read past LEO succeeded")
	}
	if res, err := l.Read(l.LogEndOffset(), 100, true); err != nil || len(res.Chunks) != 0 {
		t.Fatalf("read at LEO: %+v %v", res, err)
	}
	l.DeleteRecords(3)
	if _, err := l.Read(2, 100, true); err == nil {
		t.Fatal("read below log start succeeded")
	}
	res, err = l.Read(3, 1000, true)
	if err != nil || len(res.Chunks) != 1 || res.Chunks[0].Pos != 0 {
		t.Fatalf("read mid-batch after DeleteRecords: %+v %v", res, err)
	}
	res.Release()
}
