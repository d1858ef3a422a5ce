//go:build unix

package main

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// brokerRunning reports whether a broker holds dir's .lock (the exclusive
// flock a running Strata broker keeps on each of its log dirs). It never
// creates the file and only probes with a shared, non-blocking lock that
// it releases at once.
func brokerRunning(dir string) bool {
	f, err := os.Open(filepath.Join(dir, ".lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}
