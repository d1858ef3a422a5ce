package faults

import (
	"os"

	"golang.org/x/sys/unix"
)

// ioctlShutdown shuts down the file system holding f (EXT4_IOC_SHUTDOWN).
func ioctlShutdown(f *os.File, flags int) error {
	return unix.IoctlSetPointerInt(int(f.Fd()), ext4IocShutdown, flags)
}
