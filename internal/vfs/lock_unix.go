//go:build unix

package vfs

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Lock implements FS with flock(2): the lock belongs to this open file, so
// it is released when the file closes or the process dies.
func (OS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
