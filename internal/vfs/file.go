package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic durably replaces name with data: it writes name.tmp with
// permissions perm (a stale name.tmp is removed first, as an existing file
// would keep its old permissions), fsyncs it, renames it over name and
// fsyncs the directory. A crash at any point leaves either the old file or
// the new one, never a mix; once it returns the new file survives a power
// cut. Every small durable file (checkpoints, snapshots, metadata,
// credentials, markers) is written through it.
func WriteFileAtomic(fsys FS, name string, data []byte, perm fs.FileMode) error {
	tmp := name + ".tmp"
	if err := fsys.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", tmp, err)
	}
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("fsync dir of %s: %w", name, err)
	}
	return nil
}

// ReadFile reads a whole (small) file through fsys. A missing file is an
// error wrapping fs.ErrNotExist.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, st.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return nil, err
	}
	return buf[:n], nil
}

// RemoveDurably removes name (a missing file is not an error) and fsyncs
// its directory, so the removal survives a power cut.
func RemoveDurably(fsys FS, name string) error {
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("fsync dir of %s: %w", name, err)
	}
	return nil
}
