package vfs

import (
	"errors"
	"io"
	"os"
	"testing"
)

func readAll(t *testing.T, fsys FS, name string) (string, error) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, _ := f.Stat()
	buf := make([]byte, st.Size())
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return "", err
	}
	return string(buf), nil
}

func TestCrashFSDropsUnsynced(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d", 0o755)
	f, _ := c.OpenFile("/d/a", os.O_CREATE|os.O_RDWR, 0o644)
	f.Write([]byte("hello"))
	// Not synced, dir not synced: the file does not exist after a crash.
	if _, err := readAll(t, c.Crash(), "/d/a"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unsynced dir entry survived: %v", err)
	}
	c.SyncDir("/d")
	if got, _ := readAll(t, c.Crash(), "/d/a"); got != "" {
		t.Fatalf("unsynced data survived: %q", got)
	}
	f.Sync()
	f.Write([]byte(" world"))
	if got, _ := readAll(t, c.Crash(), "/d/a"); got != "hello" {
		t.Fatalf("after sync: %q", got)
	}
	f.WriteAt([]byte("J"), 0)
	f.Truncate(3)
	if got, _ := readAll(t, c.Crash(), "/d/a"); got != "hello" {
		t.Fatalf("overwrite before sync leaked: %q", got)
	}
	f.Sync()
	if got, _ := readAll(t, c.Crash(), "/d/a"); got != "Jel" {
		t.Fatalf("after second sync: %q", got)
	}
	// Rename durable only after SyncDir.
	c.Rename("/d/a", "/d/b")
	img := c.Crash()
	if _, err := readAll(t, img, "/d/b"); err == nil {
		t.Fatal("unsynced rename survived")
	}
	if got, _ := readAll(t, img, "/d/a"); got != "Jel" {
		t.Fatalf("old name lost: %q", got)
	}
	c.SyncDir("/d")
	img = c.Crash()
	if got, _ := readAll(t, img, "/d/b"); got != "Jel" {
		t.Fatalf("synced rename: %q", got)
	}
	// Remove durable only after SyncDir; open handles keep reading.
	c.Remove("/d/b")
	if got, _ := readAll(t, c.Crash(), "/d/b"); got != "Jel" {
		t.Fatalf("unsynced remove: %q", got)
	}
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "Jel" {
		t.Fatalf("open handle after remove: %q %v", buf, err)
	}
}

func TestCrashFSHook(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d", 0o755)
	c.SetHook(func(op, name string) error {
		if op == "rename" {
			return ErrInjected
		}
		return nil
	})
	f, _ := c.OpenFile("/d/a", os.O_CREATE|os.O_RDWR, 0o644)
	f.Close()
	if err := c.Rename("/d/a", "/d/b"); !errors.Is(err, ErrInjected) {
		t.Fatalf("hook not applied: %v", err)
	}
	if _, err := c.Stat("/d/a"); err != nil {
		t.Fatal("failed rename had an effect")
	}
}

func TestCrashFSSyncFS(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d/p", 0o755)
	s, err := c.OpenSyncFS("/d")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, _ := c.OpenFile("/d/p/a", os.O_CREATE|os.O_RDWR, 0o644)
	a.Write([]byte("one"))
	b, _ := c.OpenFile("/d/b", os.O_CREATE|os.O_RDWR, 0o644)
	b.Write([]byte("two"))
	c.Rename("/d/b", "/d/c")
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	a.Write([]byte(" more"))
	c.Remove("/d/c")
	img := c.Crash()
	if got, _ := readAll(t, img, "/d/p/a"); got != "one" {
		t.Fatalf("a after syncfs and a later write: %q", got)
	}
	if got, _ := readAll(t, img, "/d/c"); got != "two" {
		t.Fatalf("renamed file after syncfs and an unsynced remove: %q", got)
	}
	if _, err := readAll(t, img, "/d/b"); err == nil {
		t.Fatal("old name of a rename made durable by syncfs survived")
	}
	c.SetHook(func(op, name string) error {
		if op == "syncfs" {
			return ErrInjected
		}
		return nil
	})
	if err := s.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("injected syncfs failure: %v", err)
	}
	if _, err := c.OpenSyncFS("/nope"); err == nil {
		t.Fatal("OpenSyncFS of a missing dir")
	}
}

// TestCrashFSClone: a kill -9 image keeps what was written, synced or not,
// and a power cut of that image still drops what was never synced.
func TestCrashFSClone(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d", 0o755)
	f, _ := c.OpenFile("/d/a", os.O_CREATE|os.O_RDWR, 0o644)
	f.Write([]byte("hello"))
	c.SyncDir("/d")
	f.Sync()
	f.Write([]byte(" world"))
	g, _ := c.OpenFile("/d/b", os.O_CREATE|os.O_RDWR, 0o644) // entry never synced
	g.Write([]byte("new"))
	k := c.Clone()
	if got, _ := readAll(t, k, "/d/a"); got != "hello world" {
		t.Fatalf("clone holds %q, want everything written", got)
	}
	if got, _ := readAll(t, k, "/d/b"); got != "new" {
		t.Fatalf("clone holds %q for the unsynced entry", got)
	}
	f.Write([]byte("!")) // the original goes on alone
	if got, _ := readAll(t, k, "/d/a"); got != "hello world" {
		t.Fatalf("a write to the original reached the clone: %q", got)
	}
	p := k.Crash()
	if got, _ := readAll(t, p, "/d/a"); got != "hello" {
		t.Fatalf("power cut of the clone kept %q, want the synced %q", got, "hello")
	}
	if _, err := readAll(t, p, "/d/b"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("power cut of the clone kept the unsynced entry: %v", err)
	}
}

// TestCrashEntriesFirst: a rename (or create) of a file whose data was
// not synced is durable in CrashEntriesFirst while the data is not: the
// new name holds an empty file, as a real file system may leave it. A
// file synced before its rename keeps its data, and Crash of the same
// state still shows the old name.
func TestCrashEntriesFirst(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d", 0o755)
	write := func(name, data string, sync bool) {
		f, err := c.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(data))
		if sync {
			f.Sync()
		}
		f.Close()
	}
	write("/d/ck", "old", true)
	c.SyncDir("/d")
	write("/d/ck.tmp", "new", false)
	c.Rename("/d/ck.tmp", "/d/ck")
	if got, _ := readAll(t, c.Crash(), "/d/ck"); got != "old" {
		t.Fatalf("Crash: %q, want the old file (rename not synced)", got)
	}
	img := c.CrashEntriesFirst()
	if got, err := readAll(t, img, "/d/ck"); err != nil || got != "" {
		t.Fatalf("CrashEntriesFirst: %q %v, want the renamed file without its unsynced data", got, err)
	}
	if _, err := readAll(t, img, "/d/ck.tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CrashEntriesFirst kept the old name: %v", err)
	}
	write("/d/ck2.tmp", "synced", true)
	c.Rename("/d/ck2.tmp", "/d/ck2")
	if got, _ := readAll(t, c.CrashEntriesFirst(), "/d/ck2"); got != "synced" {
		t.Fatalf("synced then renamed: %q", got)
	}
}
