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

// FillTo writes ballast until at most free bytes are left for everyone
// (statfs f_bavail): a log dir filled by its own data to below a
// free-space reserve, with room left for writes the reserve protects
// (the metadata store's WAL on a combined node).
func (d *Disk) FillTo(free int64) error {
	avail := func() (int64, error) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d.Dir, &st); err != nil {
			return 0, fmt.Errorf("statfs %s: %w", d.Dir, err)
		}
		return int64(st.Bavail) * st.Bsize, nil
	}
	have, err := avail()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(d.ballast, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("ballast: %w", err)
	}
	defer f.Close()
	// Allocated, not written (fallocate: instant, and a loop image stays
	// sparse); written where the file system cannot allocate. The file
	// system's own metadata may take a little more: top up until below.
	buf := make([]byte, 1<<20)
	for have > free {
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("ballast: %w", err)
		}
		n := have - free
		if err := syscall.Fallocate(int(f.Fd()), 0, st.Size(), n); err != nil {
			if !errors.Is(err, syscall.EOPNOTSUPP) {
				return fmt.Errorf("ballast: fallocate: %w", err)
			}
			if _, err := f.Write(buf[:min(int64(len(buf)), n)]); err != nil {
				return fmt.Errorf("ballast: %w", err)
			}
			if err := f.Sync(); err != nil { // blocks allocated, statfs current
				return fmt.Errorf("ballast: %w", err)
			}
		}
		if have, err = avail(); err != nil {
			return err
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

// LoopDisk is an ext4 file system in an image file, loop-mounted at a
// broker's directory: it can be filled (Fill/Free, as Disk) and it can lose
// power. PowerCut shuts the file system down without flushing its journal
// or its dirty pages (EXT4_IOC_SHUTDOWN with EXT4_GOING_FLAGS_NOLOGFLUSH,
// xfstests' "godown"): what was not fsynced is dropped, exactly as a power
// cut drops the page cache, and Remount mounts the image again, replaying
// the journal as a boot after a crash does. It is vfs.CrashFS for a real
// process, at the kernel's level. Needs root, mkfs.ext4 and loop devices.
type LoopDisk struct {
	Dir     string
	image   string
	ballast string
}

// ext4 shutdown ioctl (linux/ext4.h): EXT4_IOC_SHUTDOWN = _IOR('X', 125,
// __u32); EXT4_GOING_FLAGS_NOLOGFLUSH = 0x2 (do not flush the log).
const (
	ext4IocShutdown          = 0x8004587D
	ext4GoingFlagsNoLogFlush = 0x2
)

// MountLoop creates a sparse image of size bytes at image, makes an ext4
// file system in it and mounts it at dir (which must exist and be empty).
func MountLoop(dir, image string, size int64) (*LoopDisk, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	f, err := os.Create(image)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := run("mkfs.ext4", "-q", "-F", image); err != nil {
		return nil, err
	}
	d := &LoopDisk{Dir: dir, image: image, ballast: filepath.Join(dir, ".faults-ballast")}
	if err := d.Remount(); err != nil {
		return nil, err
	}
	return d, nil
}

// Remount mounts the image at Dir again (after PowerCut: the journal is
// replayed).
func (d *LoopDisk) Remount() error {
	if err := run("mount", "-o", "loop", d.image, d.Dir); err != nil {
		return fmt.Errorf("mount %s (is a loop device free? losetup -f): %w", d.image, err)
	}
	return nil
}

// PowerCut drops everything the file system had not written to its
// device, then unmounts it. Every process using it must be stopped
// (SIGSTOP or dead) first: a running one would get EIO. After it, kill
// them, Unmount, and Remount to bring the file system back as a reboot
// would.
func (d *LoopDisk) PowerCut() error {
	f, err := os.Open(d.Dir)
	if err != nil {
		return err
	}
	err = ioctlShutdown(f, ext4GoingFlagsNoLogFlush)
	f.Close()
	if err != nil {
		return fmt.Errorf("ext4 shutdown of %s: %w", d.Dir, err)
	}
	return nil
}

// Unmount unmounts the file system (its processes must be dead).
func (d *LoopDisk) Unmount() error { return run("umount", d.Dir) }

// Fill fills the file system to the last byte (see Disk.Fill).
func (d *LoopDisk) Fill() error { return (&Disk{Dir: d.Dir, ballast: d.ballast}).Fill() }

// FillTo fills the file system until at most free bytes are left (see
// Disk.FillTo).
func (d *LoopDisk) FillTo(free int64) error {
	return (&Disk{Dir: d.Dir, ballast: d.ballast}).FillTo(free)
}

// Free removes the ballast.
func (d *LoopDisk) Free() error { return (&Disk{Dir: d.Dir, ballast: d.ballast}).Free() }

// ShareMounts bind-mounts dir on itself with shared propagation, so that
// file systems mounted and unmounted under it later (LoopDisk) are
// mounted and unmounted in the mount namespaces of processes started
// since (`ip netns exec` gives each its own, a slave of this one) too.
// Without it such a namespace keeps its copy of an unmounted file system
// alive, and mounting the image again would hand back the old, shut-down
// one. The returned function undoes it (after everything under dir is
// unmounted).
func ShareMounts(dir string) (func() error, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if err := run("mount", "--bind", dir, dir); err != nil {
		return nil, err
	}
	if err := run("mount", "--make-rshared", dir); err != nil {
		_ = run("umount", dir)
		return nil, err
	}
	return func() error { return run("umount", dir) }, nil
}
