//go:build linux

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

func fallocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, size)
	if err == unix.EOPNOTSUPP {
		return nil
	}
	return err
}
