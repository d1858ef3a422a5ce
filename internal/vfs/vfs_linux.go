//go:build linux

package vfs

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// openFile is os.OpenFile without its attempt to register every file
// with the runtime poller (fcntl O_NONBLOCK, an epoll_ctl that fails for
// a regular file, fcntl back): os.NewFile of a blocking descriptor costs
// one fcntl. A start after a clean shutdown opens a few files per
// partition, so over 10,000 partitions that is tens of thousands of
// system calls (7.8 % of the CPU of such a start, perf record).
func openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	for {
		fd, err := unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

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
