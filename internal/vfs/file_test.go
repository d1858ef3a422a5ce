package vfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFileAtomicPerm writes over a stale tmp file of other
// permissions on the OS: the file gets perm and no tmp file stays.
func TestWriteFileAtomicPerm(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "secret")
	if err := os.WriteFile(name+".tmp", []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(Default(), name, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	if data, err := ReadFile(Default(), name); err != nil || string(data) != "new" {
		t.Fatalf("read %q %v", data, err)
	}
	if _, err := os.Stat(name + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("tmp file left: %v", err)
	}
}

// TestWriteFileAtomicCrashAtEveryStep cuts the power before each step of
// a replacement: the file then holds the old or the new content, whole.
func TestWriteFileAtomicCrashAtEveryStep(t *testing.T) {
	setup := func() *CrashFS {
		c := NewCrashFS()
		if err := c.MkdirAll("/d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(c, "/d/f", []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		return c
	}
	write := func(c *CrashFS) func() error {
		return func() error { return WriteFileAtomic(c, "/d/f", []byte("new content"), 0o644) }
	}
	c := setup()
	ops, err := c.Steps(write(c))
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k <= ops; k++ {
		c := setup()
		img, err := c.CrashAt(k, write(c))
		got, rerr := ReadFile(img, "/d/f")
		if rerr != nil || (string(got) != "old" && string(got) != "new content") || (err == nil && k == ops && string(got) != "new content") {
			t.Fatalf("step %d of %d (write error %v): file %q, %v", k, ops, err, got, rerr)
		}
	}
}

// TestCrashFSLock checks that a lock excludes a second holder until closed.
func TestCrashFSLock(t *testing.T) {
	c := NewCrashFS()
	if _, err := c.Lock("/nodir/.lock"); err == nil {
		t.Fatal("lock in a missing directory")
	}
	l, err := c.Lock("/.lock")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock("/.lock"); err == nil {
		t.Fatal("second lock succeeded")
	}
	l.Close()
	l2, err := c.Lock("/.lock")
	if err != nil {
		t.Fatal(err)
	}
	l2.Close()
}
