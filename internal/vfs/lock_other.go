//go:build !unix

package vfs

import (
	"io"
	"os"
)

// Lock implements FS; without flock the file is only opened (no exclusion).
func (OS) Lock(name string) (io.Closer, error) {
	return os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
}
