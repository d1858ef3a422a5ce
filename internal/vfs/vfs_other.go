//go:build !linux

package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

func openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

func fdatasync(f *os.File) error { return f.Sync() }

func fallocate(f *os.File, size int64) error { return nil }

// syncfs has no per-file-system form here: sync(2) flushes every file
// system (and reports nothing).
func syncfs(*os.File) error {
	syscall.Sync()
	return nil
}

// freeSpace is not measured here: callers take the disk as having room.
func freeSpace(string) (int64, error) { return 0, errors.ErrUnsupported }
