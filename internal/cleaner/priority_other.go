//go:build !linux

package cleaner

// lowerThreadPriority is a no-op on this platform.
func lowerThreadPriority(int) error { return nil }
