//go:build linux

package etcdnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseMapped asks the kernel to reclaim the resident pages of this
// process's mappings of file path (madvise MADV_PAGEOUT, Linux 5.4+) and
// returns the bytes of the mappings it advised. The advice preserves the
// contents (madvise(2): clean file pages are dropped and read again from
// the file on the next access; anonymous pages would be swapped, never
// zeroed), so advising a range that was unmapped and reused meanwhile
// costs at most a page fault later, never data. A kernel without
// MADV_PAGEOUT answers EINVAL, returned as an error.
func releaseMapped(path string) (int64, error) {
	want, err := filepath.Abs(path)
	if err == nil {
		want, err = filepath.EvalSymlinks(want)
	}
	if err != nil {
		return 0, fmt.Errorf("release pages of %s: %w", path, err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("release pages of %s: %w", path, err)
	}
	var advised int64
	for _, line := range strings.Split(string(maps), "\n") {
		// address perms offset dev inode pathname
		if !strings.HasSuffix(line, " "+want) {
			continue
		}
		lo, hi, ok := strings.Cut(strings.Fields(line)[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT); e != 0 {
			return advised, fmt.Errorf("release pages of %s: madvise: %w", path, e)
		}
		advised += int64(end - start)
	}
	return advised, nil
}
