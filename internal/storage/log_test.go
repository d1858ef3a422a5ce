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
