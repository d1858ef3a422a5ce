package faults

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Disk is a small tmpfs mounted at a broker's directory, so that directory
// can be filled to the last byte without touching the machine's disk.
type Disk struct {
	Dir     string
	ballast string
}

// MountDisk mounts a tmpfs of size (mount's syntax: "64m") at dir, which
// must exist and be empty. It fails, never skips, without root.
func MountDisk(dir, size string) (*Disk, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if err := run("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir); err != nil {
		return nil, err
	}
	return &Disk{Dir: dir, ballast: filepath.Join(dir, ".faults-ballast")}, nil
}

// Fill writes ballast until the file system is full (ENOSPC): every write
// the broker makes from now on fails.
func (d *Disk) Fill() error {
	f, err := os.OpenFile(d.ballast, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("ballast: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				return fmt.Errorf("ballast: %w", err)
			}
			buf = buf[:len(buf)/2] // fill the last, smaller holes too
		}
	}
	return nil
}

// Free removes the ballast.
func (d *Disk) Free() error {
	if err := os.Remove(d.ballast); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ballast: %w", err)
	}
	return nil
}

// Unmount removes the tmpfs (and everything on it).
func (d *Disk) Unmount() error { return run("umount", d.Dir) }
