package logtool

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/record"
)

// BenchmarkVerify verifies a partition of one ~8 MiB segment of 1 KiB
// batches with an index entry every 4 KiB.
func BenchmarkVerify(b *testing.B) {
	root := b.TempDir()
	dir := filepath.Join(root, "bench-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	w := newSegWriter(b, dir, 0, 4096)
	for len(w.log) < 8<<20 {
		w.appendBatch(8, record.None, int64(len(w.log)))
	}
	w.write()
	b.SetBytes(int64(len(w.log)))
	for b.Loop() {
		rep, err := Verify(root, VerifyOptions{})
		if err != nil || !rep.OK() {
			b.Fatalf("%v %v", err, rep.Problems)
		}
	}
}
