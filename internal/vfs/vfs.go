// Package vfs is the small file-system interface every byte Strata stores
// goes through (partition logs, indexes and checkpoints, the topic metadata
// store, SCRAM credentials, meta.properties, the clean-shutdown marker, the
// cleaner's checkpoint, the log dir lock), so that tests can swap the real
// disk for a double that loses every byte not yet fsynced at a simulated
// power cut (see crashfs.go). The OS implementation is a thin wrapper over
// package os. Small files are replaced with WriteFileAtomic. The one
// exception is a cluster node's metadata store (internal/etcdnode): etcd
// does its own I/O in metadata.log.dir.
package vfs

import (
	"io"
	"io/fs"
	"os"
)

// File is an open file. ReadAt/WriteAt never move a shared offset, so many
// readers may use one File concurrently.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	io.Closer
	// Sync makes the file's data durable (fdatasync on the OS).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Stat returns the file's size and mode.
	Stat() (fs.FileInfo, error)
	// Name is the path the file was opened with.
	Name() string
}

// FDFile is implemented by files backed by a real descriptor; the network
// layer uses it for sendfile(2). Doubles do not implement it, and callers
// fall back to ReadAt.
type FDFile interface {
	File
	Fd() uintptr
}

// FS is the set of file-system operations Strata needs.
type FS interface {
	// OpenFile opens name with os.O_* flags.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	// Rename atomically replaces newname with oldname. It is durable only
	// after SyncDir of the parent directory.
	Rename(oldname, newname string) error
	MkdirAll(name string, perm fs.FileMode) error
	ReadDir(name string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	// SyncDir fsyncs a directory so that creates, renames and removes in it
	// survive a power cut.
	SyncDir(name string) error
	// Preallocate reserves size bytes for f without changing its visible
	// length where the platform allows (fallocate KEEP_SIZE); a no-op else.
	Preallocate(f File, size int64) error
	// Lock takes an exclusive lock on the file name (created if missing),
	// failing at once while another holder has it (flock on the OS, so
	// another process; doubles lock in memory). Close releases it.
	Lock(name string) (io.Closer, error)
	// OpenSyncFS returns a handle on the whole file system holding dir,
	// whose Sync makes every write and directory change on it durable at
	// once (syncfs(2) on Linux). Keep the handle open for as long as the
	// files it covers are written: it reports the write-back errors that
	// happened since it was opened.
	OpenSyncFS(dir string) (SyncFS, error)
}

// SpaceFS is implemented by file systems that tell how much room is left.
// Callers sizing files to the disk (the storage journal) take a file
// system without it, or whose FreeSpace fails, as having room.
type SpaceFS interface {
	// FreeSpace returns the bytes an unprivileged writer may still
	// allocate on the file system holding dir (statfs f_bavail).
	FreeSpace(dir string) (int64, error)
}

// FreeSpace implements SpaceFS.
func (OS) FreeSpace(dir string) (int64, error) { return freeSpace(dir) }

// SyncFS flushes a whole file system (see FS.OpenSyncFS).
type SyncFS interface {
	// Sync makes every file's data, every file's size and every directory
	// entry of the file system durable, and reports a write-back error
	// since the handle was opened.
	Sync() error
	Close() error
}

// OS is the real file system.
type OS struct{}

// Default returns the real file system.
func Default() FS { return OS{} }

type osFile struct{ *os.File }

func (f osFile) Sync() error { return fdatasync(f.File) }

// OpenFile implements FS.
func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := openFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// RemoveAll implements FS.
func (OS) RemoveAll(name string) error { return os.RemoveAll(name) }

// Rename implements FS.
func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// MkdirAll implements FS.
func (OS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

// ReadDir implements FS.
func (OS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// Stat implements FS.
func (OS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// SyncDir implements FS.
func (OS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// OpenSyncFS implements FS.
func (OS) OpenSyncFS(dir string) (SyncFS, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return osSyncFS{d}, nil
}

type osSyncFS struct{ d *os.File }

func (s osSyncFS) Sync() error  { return syncfs(s.d) }
func (s osSyncFS) Close() error { return s.d.Close() }

// Preallocate implements FS.
func (OS) Preallocate(f File, size int64) error {
	of, ok := f.(osFile)
	if !ok {
		return nil
	}
	return fallocate(of.File, size)
}
