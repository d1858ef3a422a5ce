//go:build linux

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// syncfs flushes the file system holding d; since Linux 5.8 it reports
// write-back errors of any file of it since d was opened.
func syncfs(d *os.File) error { return unix.Syncfs(int(d.Fd())) }

func fallocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, size)
	if err == unix.EOPNOTSUPP {
		return nil
	}
	return err
}

// freeSpace is statfs(2)'s f_bavail in bytes.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
