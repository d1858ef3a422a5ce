package cleaner

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// lowerThreadPriority pins the calling goroutine to its OS thread and
// lowers that thread's scheduling priority (nice) by n, so that under CPU
// contention the kernel prefers the broker's produce and fetch threads
// over the cleaner. The thread dies with the goroutine (it is never
// unlocked), so no lowered thread returns to the runtime's pool.
func lowerThreadPriority(n int) error {
	if n <= 0 {
		return nil
	}
	runtime.LockOSThread()
	tid := unix.Gettid()
	cur, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return fmt.Errorf("cleaner thread priority: %w", err)
	}
	// getpriority(2) returns 20 - nice.
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, min(20-cur+n, 19)); err != nil {
		return fmt.Errorf("cleaner thread priority: %w", err)
	}
	return nil
}
