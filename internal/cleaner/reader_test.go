package cleaner

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/strata-io/strata/internal/record"
)

// TestBatchReader reads batches larger than its buffer, stops at a torn
// tail, and restores a normal-sized buffer afterwards.
func TestBatchReader(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 5000)
	var file []byte
	var want []int64
	for i := 0; i < 20; i++ {
		v := []byte("small")
		if i%7 == 3 {
			v = big
		}
		b := mkBatch(t, int64(i*2), record.None, -1, 1, kv{[]byte("k"), v}, kv{[]byte("j"), nil})
		file = append(file, b...)
		want = append(want, int64(i*2))
	}
	torn := mkBatch(t, 100, record.None, -1, 1, kv{[]byte("k"), []byte("v")})
	file = append(file, torn[:len(torn)-3]...)
	path := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// ReadAt mode with a small buffer, and mmap mode with a small window.
	readAll(t, newBatchReader(context.Background(), bytes.NewReader(file), 0, int64(len(file)), make([]byte, 1024), nil), want, len(file))
	br := newBatchReader(context.Background(), f, 0, int64(len(file)), nil, nil)
	if br.mm == nil && runtime.GOOS == "linux" {
		t.Fatal("no mmap mode for a real file")
	}
	br.window = 4096
	readAll(t, br, want, len(file))
	br.close()
	// A corrupt length is an error, not a huge allocation.
	bad := append([]byte{}, file[:record.HeaderSize]...)
	bad[8], bad[9], bad[10], bad[11] = 0, 0, 0, 1
	br = newBatchReader(context.Background(), bytes.NewReader(bad), 0, int64(len(bad)), make([]byte, 16), nil)
	if _, err := br.next(); err == nil || err == io.EOF {
		t.Fatalf("corrupt length: %v", err)
	}
}

func readAll(t *testing.T, br *batchReader, want []int64, size int) {
	t.Helper()
	var got []int64
	for {
		b, err := br.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := record.ValidateStored(b); err != nil {
			t.Fatal(err)
		}
		got = append(got, b.BaseOffset())
	}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if br.read != int64(size) {
		t.Fatalf("read %d of %d bytes", br.read, size)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
}
