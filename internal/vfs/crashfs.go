package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrInjected is returned by CrashFS operations that a test hook failed.
var ErrInjected = errors.New("vfs: injected failure")

// CrashFS is an in-memory FS that models what survives a power cut: file
// data survives only up to the last Sync of that file, and directory
// entries (creates, renames, removes) only once SyncDir ran on their
// parent. Directories themselves are durable as soon as they are made.
// Crash returns a new CrashFS holding exactly the durable state;
// CrashEntriesFirst the other order a real file system may take, where
// every directory change is durable and file data still only up to its
// last Sync. Safe for concurrent use.
type CrashFS struct {
	mu      sync.Mutex
	files   map[string]*inode // current namespace: clean path -> inode
	durable map[string]*inode // namespace as of the last SyncDir of each parent
	dirs    map[string]bool
	hook    func(op, name string) error
	now     func() time.Time
	locks   map[string]bool // held Lock names (not part of the durable state)
	free    int64           // FreeSpace answer; < 0: not known (SetFreeSpace)
}

type inode struct {
	mu        sync.Mutex
	data      []byte
	synced    []byte
	dirtyFrom int // lowest byte offset written since the last Sync
	mtime     time.Time
}

// NewCrashFS returns an empty in-memory file system with a root "/".
func NewCrashFS() *CrashFS {
	return &CrashFS{
		files:   map[string]*inode{},
		durable: map[string]*inode{},
		dirs:    map[string]bool{"/": true, ".": true},
		now:     time.Now,
		free:    -1,
	}
}

// SetFreeSpace makes FreeSpace report n bytes (n < 0: not known, the
// default). Nothing enforces it: tests of code that sizes files to the
// disk set it.
func (c *CrashFS) SetFreeSpace(n int64) {
	c.mu.Lock()
	c.free = n
	c.mu.Unlock()
}

// FreeSpace implements SpaceFS with the value of SetFreeSpace.
func (c *CrashFS) FreeSpace(string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.free < 0 {
		return 0, errors.ErrUnsupported
	}
	return c.free, nil
}

// SetHook installs fn, called before every mutating operation (op is one of
// "create", "write", "sync", "truncate", "remove", "rename", "syncdir",
// "syncfs", "mkdir"; name the path, for rename "old->new"). A non-nil error fails the
// operation without effect. nil removes the hook.
func (c *CrashFS) SetHook(fn func(op, name string) error) {
	c.mu.Lock()
	c.hook = fn
	c.mu.Unlock()
}

func (c *CrashFS) check(op, name string) error {
	c.mu.Lock()
	h := c.hook
	c.mu.Unlock()
	if h == nil {
		return nil
	}
	if err := h(op, name); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// Steps runs op and returns how many mutating operations (hook calls) it
// made, and op's error.
func (c *CrashFS) Steps(op func() error) (int, error) {
	n := 0
	c.SetHook(func(string, string) error { n++; return nil })
	defer c.SetHook(nil)
	err := op()
	return n, err
}

// CrashAt runs op with a power cut just before its mutating operation k
// (counting from 0): it returns the crash image taken at that moment, while
// in c operation k fails with ErrInjected and op goes on (the "crash at
// every step" tests run k over 0..Steps). When op makes k operations or
// fewer, the image is taken after op returned. It also returns op's error.
func (c *CrashFS) CrashAt(k int, op func() error) (*CrashFS, error) {
	var img *CrashFS
	n := 0
	c.SetHook(func(string, string) error {
		defer func() { n++ }()
		if n == k {
			img = c.Crash()
			return ErrInjected
		}
		return nil
	})
	err := op()
	c.SetHook(nil)
	if img == nil {
		img = c.Crash()
	}
	return img, err
}

// Crash returns the file system as it would be found after a power cut at
// this instant: only synced bytes of files whose directory entries were
// synced. The receiver keeps working (its open files are unaffected), so
// goroutines still writing to it do no harm.
func (c *CrashFS) Crash() *CrashFS { return c.crash(nil) }

// CrashEntriesFirst is Crash on a file system that committed every
// directory change before the data of the files involved: every create,
// rename and remove made so far is durable (as if its journal commit went
// out at this instant), but each file holds only its synced bytes. A real
// file system does this: the journal commit carrying a rename may reach
// the disk before the renamed file's delayed-allocation data (ext4
// without auto_da_alloc, xfs, any file system once the file was not
// fsynced before the rename), so after a power cut the new name holds an
// empty or short file. Crash alone never shows it (its entries wait for
// SyncDir), so a crash test of code that renames a file it did not fsync
// first would pass on Crash and fail here.
func (c *CrashFS) CrashEntriesFirst() *CrashFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.emptyCopyLocked()
	for name, ino := range c.files {
		ino.mu.Lock()
		cp := &inode{data: append([]byte(nil), ino.synced...), mtime: ino.mtime}
		ino.mu.Unlock()
		cp.synced = append([]byte(nil), cp.data...)
		cp.dirtyFrom = len(cp.data)
		n.files[name] = cp
		n.durable[name] = cp
	}
	return n
}

// CrashTorn is Crash where the disk also happened to persist part of the
// unsynced writes: each file keeps its synced bytes overlaid with a prefix
// (of length chosen by keep, 0..len(unsynced)) of what was written since,
// as a torn write at power loss would.
func (c *CrashFS) CrashTorn(keep func(unsynced int) int) *CrashFS { return c.crash(keep) }

// emptyCopyLocked returns a new file system with c's clock, free space
// and directories but no files; c.mu is held.
func (c *CrashFS) emptyCopyLocked() *CrashFS {
	n := NewCrashFS()
	n.now = c.now
	n.free = c.free
	for d := range c.dirs {
		n.dirs[d] = true
	}
	return n
}

func (c *CrashFS) crash(keep func(int) int) *CrashFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.emptyCopyLocked()
	for name, ino := range c.durable {
		ino.mu.Lock()
		data := append([]byte(nil), ino.synced...)
		if keep != nil && ino.dirtyFrom < len(ino.data) {
			from := min(ino.dirtyFrom, len(data))
			k := keep(len(ino.data) - from)
			if k > 0 {
				end := from + min(k, len(ino.data)-from)
				if end > len(data) {
					data = append(data, make([]byte, end-len(data))...)
				}
				copy(data[from:end], ino.data[from:end])
			}
		}
		cp := &inode{data: data, mtime: ino.mtime}
		cp.synced = append([]byte(nil), cp.data...)
		cp.dirtyFrom = len(cp.data)
		ino.mu.Unlock()
		n.files[name] = cp
		n.durable[name] = cp
	}
	return n
}

// Clone returns the file system as a process killed at this instant
// (kill -9) leaves it to its next start: the page cache survives, so every
// byte written and every directory entry made is there, synced or not. In
// the copy they stay unsynced (a later Crash of it still drops them). The
// receiver keeps working, as after Crash.
func (c *CrashFS) Clone() *CrashFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.emptyCopyLocked()
	copies := map[*inode]*inode{} // a file under two names (a rename not yet synced) stays one file
	cp := func(ino *inode) *inode {
		if x, ok := copies[ino]; ok {
			return x
		}
		ino.mu.Lock()
		x := &inode{data: append([]byte(nil), ino.data...), synced: append([]byte(nil), ino.synced...),
			dirtyFrom: ino.dirtyFrom, mtime: ino.mtime}
		ino.mu.Unlock()
		copies[ino] = x
		return x
	}
	for name, ino := range c.files {
		n.files[name] = cp(ino)
	}
	for name, ino := range c.durable {
		n.durable[name] = cp(ino)
	}
	return n
}

func clean(name string) string { return filepath.Clean(name) }

type crashFile struct {
	fs     *CrashFS
	ino    *inode
	name   string
	off    int64
	append bool
	ro     bool
	closed bool
}

// OpenFile implements FS.
func (c *CrashFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	name = clean(name)
	c.mu.Lock()
	ino, ok := c.files[name]
	if !c.dirs[filepath.Dir(name)] {
		c.mu.Unlock()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if c.dirs[name] {
		c.mu.Unlock()
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	c.mu.Unlock()
	if ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	if !ok {
		if flag&os.O_CREATE == 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if err := c.check("create", name); err != nil {
			return nil, err
		}
		ino = &inode{mtime: c.now()}
		c.mu.Lock()
		c.files[name] = ino
		c.mu.Unlock()
	}
	if flag&os.O_TRUNC != 0 {
		ino.mu.Lock()
		ino.data = ino.data[:0]
		ino.dirtyFrom = 0
		ino.mu.Unlock()
	}
	ro := flag&(os.O_WRONLY|os.O_RDWR) == 0
	return &crashFile{fs: c, ino: ino, name: name, append: flag&os.O_APPEND != 0, ro: ro}, nil
}

var errClosed = errors.New("vfs: file already closed")

func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed {
		return 0, errClosed
	}
	if off < 0 {
		return 0, errors.New("vfs: negative offset")
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	if f.closed {
		return 0, errClosed
	}
	if f.ro {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrPermission}
	}
	if err := f.fs.check("write", f.name); err != nil {
		return 0, err
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	end := int(off) + len(p)
	if end > len(f.ino.data) {
		if end > cap(f.ino.data) {
			nd := make([]byte, end, end*2)
			copy(nd, f.ino.data)
			f.ino.data = nd
		} else {
			old := len(f.ino.data)
			f.ino.data = f.ino.data[:end]
			clear(f.ino.data[old:end])
		}
	}
	copy(f.ino.data[off:], p)
	if int(off) < f.ino.dirtyFrom {
		f.ino.dirtyFrom = int(off)
	}
	f.ino.mtime = f.fs.now()
	return len(p), nil
}

func (f *crashFile) Write(p []byte) (int, error) {
	off := f.off
	if f.append {
		f.ino.mu.Lock()
		off = int64(len(f.ino.data))
		f.ino.mu.Unlock()
	}
	n, err := f.WriteAt(p, off)
	f.off = off + int64(n)
	return n, err
}

func (f *crashFile) Close() error {
	if f.closed {
		return errClosed
	}
	f.closed = true
	return nil
}

func (f *crashFile) Sync() error {
	if f.closed {
		return errClosed
	}
	if err := f.fs.check("sync", f.name); err != nil {
		return err
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	ino := f.ino
	if ino.dirtyFrom > len(ino.synced) {
		ino.dirtyFrom = len(ino.synced)
	}
	if len(ino.data) <= cap(ino.synced) {
		ino.synced = ino.synced[:len(ino.data)]
	} else {
		ns := make([]byte, len(ino.data), len(ino.data)*2)
		copy(ns, ino.synced)
		ino.synced = ns
	}
	if ino.dirtyFrom < len(ino.data) {
		copy(ino.synced[ino.dirtyFrom:], ino.data[ino.dirtyFrom:])
	}
	ino.dirtyFrom = len(ino.data)
	return nil
}

func (f *crashFile) Truncate(size int64) error {
	if f.closed {
		return errClosed
	}
	if err := f.fs.check("truncate", f.name); err != nil {
		return err
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	if int(size) <= len(f.ino.data) {
		f.ino.data = f.ino.data[:size]
	} else {
		nd := make([]byte, size)
		copy(nd, f.ino.data)
		f.ino.data = nd
	}
	if int(size) < f.ino.dirtyFrom {
		f.ino.dirtyFrom = int(size)
	}
	return nil
}

func (f *crashFile) Stat() (fs.FileInfo, error) {
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	return fileInfo{name: filepath.Base(f.name), size: int64(len(f.ino.data)), mtime: f.ino.mtime}, nil
}

func (f *crashFile) Name() string { return f.name }

type fileInfo struct {
	name  string
	size  int64
	dir   bool
	mtime time.Time
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return i.size }
func (i fileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i fileInfo) ModTime() time.Time         { return i.mtime }
func (i fileInfo) IsDir() bool                { return i.dir }
func (i fileInfo) Sys() any                   { return nil }
func (i fileInfo) Type() fs.FileMode          { return i.Mode().Type() }
func (i fileInfo) Info() (fs.FileInfo, error) { return i, nil }

// Remove implements FS.
func (c *CrashFS) Remove(name string) error {
	name = clean(name)
	if err := c.check("remove", name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.files[name]; ok {
		delete(c.files, name)
		return nil
	}
	if c.dirs[name] {
		for p := range c.files {
			if filepath.Dir(p) == name {
				return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
			}
		}
		delete(c.dirs, name)
		return nil
	}
	return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
}

// RemoveAll implements FS. Removing a tree is durable at once (tests only
// use it for whole partition deletes).
func (c *CrashFS) RemoveAll(name string) error {
	name = clean(name)
	if err := c.check("remove", name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	prefix := name + string(filepath.Separator)
	for p := range c.files {
		if p == name || strings.HasPrefix(p, prefix) {
			delete(c.files, p)
			delete(c.durable, p)
		}
	}
	for d := range c.dirs {
		if d == name || strings.HasPrefix(d, prefix) {
			delete(c.dirs, d)
		}
	}
	return nil
}

// Rename implements FS.
func (c *CrashFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	if err := c.check("rename", oldname+"->"+newname); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ino, ok := c.files[oldname]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	if !c.dirs[filepath.Dir(newname)] {
		return &fs.PathError{Op: "rename", Path: newname, Err: fs.ErrNotExist}
	}
	delete(c.files, oldname)
	c.files[newname] = ino
	return nil
}

// MkdirAll implements FS.
func (c *CrashFS) MkdirAll(name string, perm fs.FileMode) error {
	name = clean(name)
	if err := c.check("mkdir", name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for d := name; ; d = filepath.Dir(d) {
		if _, ok := c.files[d]; ok {
			return &fs.PathError{Op: "mkdir", Path: d, Err: errors.New("not a directory")}
		}
		c.dirs[d] = true
		if d == filepath.Dir(d) {
			break
		}
	}
	return nil
}

// ReadDir implements FS.
func (c *CrashFS) ReadDir(name string) ([]fs.DirEntry, error) {
	name = clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirs[name] {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	var out []fs.DirEntry
	for p, ino := range c.files {
		if filepath.Dir(p) == name {
			ino.mu.Lock()
			out = append(out, fileInfo{name: filepath.Base(p), size: int64(len(ino.data)), mtime: ino.mtime})
			ino.mu.Unlock()
		}
	}
	for d := range c.dirs {
		if d != name && filepath.Dir(d) == name {
			out = append(out, fileInfo{name: filepath.Base(d), dir: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Stat implements FS.
func (c *CrashFS) Stat(name string) (fs.FileInfo, error) {
	name = clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ino, ok := c.files[name]; ok {
		ino.mu.Lock()
		defer ino.mu.Unlock()
		return fileInfo{name: filepath.Base(name), size: int64(len(ino.data)), mtime: ino.mtime}, nil
	}
	if c.dirs[name] {
		return fileInfo{name: filepath.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

// SyncDir implements FS: the directory's current entries become durable.
func (c *CrashFS) SyncDir(name string) error {
	name = clean(name)
	if err := c.check("syncdir", name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirs[name] {
		return &fs.PathError{Op: "syncdir", Path: name, Err: fs.ErrNotExist}
	}
	for p := range c.durable {
		if filepath.Dir(p) == name {
			delete(c.durable, p)
		}
	}
	for p, ino := range c.files {
		if filepath.Dir(p) == name {
			c.durable[p] = ino
		}
	}
	return nil
}

// OpenSyncFS implements FS: the handle's Sync makes the whole file system
// durable (op "syncfs" for the hook).
func (c *CrashFS) OpenSyncFS(dir string) (SyncFS, error) {
	if !c.isDir(clean(dir)) {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	return crashSyncFS{c, clean(dir)}, nil
}

func (c *CrashFS) isDir(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirs[name]
}

type crashSyncFS struct {
	c   *CrashFS
	dir string
}

func (s crashSyncFS) Close() error { return nil }

// Sync makes every file's bytes and every directory entry durable.
func (s crashSyncFS) Sync() error {
	c := s.c
	if err := c.check("syncfs", s.dir); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.durable)
	for p, ino := range c.files {
		c.durable[p] = ino
		ino.mu.Lock()
		ino.synced = append(ino.synced[:0], ino.data...)
		ino.dirtyFrom = len(ino.data)
		ino.mu.Unlock()
	}
	return nil
}

// Preallocate implements FS (a no-op in memory).
func (c *CrashFS) Preallocate(f File, size int64) error { return nil }

// Lock implements FS: an in-memory lock per name, so two brokers over one
// CrashFS exclude each other as two processes over one disk do. The lock
// file is created (without a hook call) so the directory looks as on disk.
func (c *CrashFS) Lock(name string) (io.Closer, error) {
	name = clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirs[filepath.Dir(name)] {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: fs.ErrNotExist}
	}
	if c.locks[name] {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: errors.New("resource temporarily unavailable (locked)")}
	}
	if c.locks == nil {
		c.locks = map[string]bool{}
	}
	c.locks[name] = true
	if _, ok := c.files[name]; !ok {
		c.files[name] = &inode{mtime: c.now()}
	}
	return lockCloser(func() error {
		c.mu.Lock()
		delete(c.locks, name)
		c.mu.Unlock()
		return nil
	}), nil
}

type lockCloser func() error

func (f lockCloser) Close() error { return f() }

// Files lists every current file path (sorted), for test diagnostics.
func (c *CrashFS) Files() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.files))
	for p := range c.files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// String summarises the namespace, for test failure messages.
func (c *CrashFS) String() string {
	var b strings.Builder
	for _, p := range c.Files() {
		st, _ := c.Stat(p)
		fmt.Fprintf(&b, "%s %d\n", path.Clean(p), st.Size())
	}
	return b.String()
}
