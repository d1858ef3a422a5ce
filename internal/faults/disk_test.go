package faults

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// mountLoopDisk mounts a 64 MiB loop-mounted ext4 disk on a fresh
// directory, in a mount namespace of the test's own (ShareMounts) that
// t's cleanup leaves; the caller unmounts the disk.
func mountLoopDisk(t *testing.T) (string, *LoopDisk) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	unshare, err := ShareMounts(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unshare() })
	d, err := MountLoop(dir, filepath.Join(base, "img"), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	return dir, d
}

// TestLoopDiskPowerCut: a power cut keeps what was fsynced and drops what
// was only written (the page cache), and the file system mounts again.
func TestLoopDiskPowerCut(t *testing.T) {
	dir, d := mountLoopDisk(t)
	write := func(name string, sync bool) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("data of " + name)); err != nil {
			t.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write("synced", true)
	write("unsynced", false)
	if err := d.PowerCut(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(dir, "synced")); err == nil {
		t.Fatal("the file system still answers after the power cut")
	}
	if err := d.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := d.Remount(); err != nil {
		t.Fatal(err)
	}
	defer d.Unmount()
	if b, err := os.ReadFile(filepath.Join(dir, "synced")); err != nil || string(b) != "data of synced" {
		t.Fatalf("fsynced file after the power cut: %q %v", b, err)
	}
	// The unsynced file's data is gone (its name may survive, committed by
	// the fsync's journal transaction, as on a real disk).
	if b, _ := os.ReadFile(filepath.Join(dir, "unsynced")); len(b) != 0 {
		t.Fatalf("unsynced data survived the power cut: %q", b)
	}
}

// TestDiskFillTo: FillTo leaves at most the asked free space (and not much
// less), Free gives it back; on a tmpfs and on a loop-mounted ext4.
func TestDiskFillTo(t *testing.T) {
	t.Run("tmpfs", func(t *testing.T) {
		dir := t.TempDir()
		d, err := MountDisk(dir, "64m")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Unmount()
		checkFillTo(t, dir, d.FillTo, d.Free)
	})
	t.Run("ext4", func(t *testing.T) {
		dir, d := mountLoopDisk(t)
		defer d.Unmount()
		checkFillTo(t, dir, d.FillTo, d.Free)
	})
}

func checkFillTo(t *testing.T, dir string, fillTo func(int64) error, free func() error) {
	t.Helper()
	d := struct {
		FillTo func(int64) error
		Free   func() error
	}{fillTo, free}
	avail := func() int64 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Bavail) * st.Bsize
	}
	before := avail()
	if err := d.FillTo(16 << 20); err != nil {
		t.Fatal(err)
	}
	if got := avail(); got > 16<<20 || got < 15<<20 {
		t.Fatalf("after FillTo(16 MiB): %d bytes free", got)
	}
	if err := d.Free(); err != nil {
		t.Fatal(err)
	}
	if got := avail(); got != before {
		t.Fatalf("after Free: %d bytes free, %d before", got, before)
	}
}
