//go:build !linux

package etcdnode

// releaseMapped does nothing outside Linux (see pages_linux.go).
func releaseMapped(string) (int64, error) { return 0, nil }
