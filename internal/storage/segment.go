package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// File suffixes of a partition directory (Kafka's names).
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
	TxnIndexSuffix  = ".txnindex"
	SnapshotSuffix  = ".snapshot"
	DeletedSuffix   = ".deleted"
	CleanedSuffix   = ".cleaned"
	SwapSuffix      = ".swap"
	TmpSuffix       = ".tmp"
)

// FileName returns "<base:020d><suffix>".
func FileName(base int64, suffix string) string {
	return fmt.Sprintf("%020d%s", base, suffix)
}

// parseBase returns the offset of a segment/snapshot file name (the part
// before the first dot).
func parseBase(name string) (int64, bool) {
	i := strings.IndexByte(name, '.')
	if i != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(name[:i], 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// SegmentFile is a reference-counted open segment .log file.
type SegmentFile struct {
	f    vfs.File
	refs atomic.Int32
}

func newSegmentFile(f vfs.File) *SegmentFile {
	sf := &SegmentFile{f: f}
	sf.refs.Store(1)
	return sf
}

// File returns the open file (implements vfs.FDFile on the real disk).
func (f *SegmentFile) File() vfs.File { return f.f }

// Release drops one reference; the last one closes the file.
func (f *SegmentFile) Release() {
	if f.refs.Add(-1) == 0 {
		f.f.Close()
	}
}

// tryAcquire adds a reference unless the file is already closed.
func (f *SegmentFile) tryAcquire() bool {
	for {
		r := f.refs.Load()
		if r <= 0 {
			return false
		}
		if f.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

var errSegmentGone = errors.New("segment deleted")

// segment is one segment of a log. Fields marked (w) belong to the single
// writer (under Log.mu); the lazily loaded file and indexes are guarded by
// mu; size and timestamps are atomics readers use without locks.
//
// A log holds one per segment, so the struct is kept small (issue 18):
// what every segment of a log shares (file system, directory, file cache,
// logger) is read through log, and the flags share a word.
type segment struct {
	base int64
	log  *Log // owner: its fsys, dir, files and logger; closing an active segment's file needs its lock

	size       atomic.Int64                 // bytes of whole batches in .log
	maxTs      atomic.Int64                 // largest batch maxTimestamp; valid when tsKnown
	maxTsOff   atomic.Int64                 // last offset of the batch carrying maxTs
	firstTs    atomic.Int64                 // maxTimestamp of the first batch, valid when firstKnown
	txns       atomic.Pointer[[]AbortedTxn] // .txnindex entries (nil = none)
	tsKnown    atomic.Bool
	firstKnown atomic.Bool

	mu     sync.Mutex
	loadMu sync.Mutex   // one loader of the file / indexes at a time (held across disk I/O; s.mu never is)
	file   *SegmentFile // owner reference while loaded
	oi     *offsetIndex
	ti     *timeIndex
	elem   *cacheElem // LRU position, guarded by cache.mu

	// writer state, only for the active segment (w)
	firstBatchTs  int64 // maxTimestamp of the first batch, -1 = none
	createdMs     int64
	jitterMs      int64
	bld           *indexBuilder // (w) active segment's index state
	maxIndexBytes int32
	indexInterval int32
	pinned        int32 // >0 while a segment swap needs the files kept open (guarded by mu)

	fileRW  bool // file is open read-write (the active segment's writer may use it)
	deleted bool
	active  bool // (w)
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.log.dir, FileName(s.base, suffix))
}

// acquire returns the .log file with an extra reference, opening it if
// needed (read-write for the active segment, which its writer uses). It
// fails with errSegmentGone once the segment is deleted.
func (s *segment) acquire() (*SegmentFile, error) {
	for {
		s.mu.Lock()
		if s.deleted {
			s.mu.Unlock()
			return nil, errSegmentGone
		}
		if s.file != nil {
			over := s.touchLocked()
			s.file.refs.Add(1)
			f := s.file
			s.mu.Unlock()
			if over {
				s.log.files.shrink(s)
			}
			return f, nil
		}
		s.mu.Unlock()
		// Open without holding s.mu (readers of a loaded segment never wait
		// on disk I/O); loadMu keeps one opener per segment.
		s.loadMu.Lock()
		s.mu.Lock()
		loaded := s.file != nil || s.deleted
		rw := s.active
		s.mu.Unlock()
		if !loaded {
			flag := os.O_RDONLY
			if rw {
				flag = os.O_RDWR
			}
			f, err := s.log.fsys.OpenFile(s.path(LogSuffix), flag, 0)
			if err != nil {
				s.loadMu.Unlock()
				return nil, fmt.Errorf("open segment %s: %w", s.path(LogSuffix), err)
			}
			s.mu.Lock()
			if s.deleted {
				f.Close()
			} else {
				s.file, s.fileRW = newSegmentFile(f), rw
			}
			s.mu.Unlock()
		}
		s.loadMu.Unlock()
	}
}

// writeFile returns the active segment's read-write file, reopening it if
// the cache closed it. The caller holds the log's mu, which the cache
// needs to close an active segment's file, so the file stays open until
// it is released.
func (s *segment) writeFile() (vfs.File, error) {
	for {
		f, err := s.acquire()
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		ok := s.file == f && s.fileRW
		if !ok && s.file == f {
			// Opened read-only while it was a closed segment (TruncateTo
			// made it active again): reopen it read-write.
			s.file = nil
			f.Release()
		}
		s.mu.Unlock()
		f.Release()
		if ok {
			return f.f, nil
		}
	}
}

// fileRef returns the open .log file with a reference, or nil when it is
// not open (the cache closed it).
func (s *segment) fileRef() *SegmentFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file != nil && s.file.tryAcquire() {
		return s.file
	}
	return nil
}

// touchLocked marks s recently used in the cache (s.mu held) and reports
// whether the cache must shrink.
func (s *segment) touchLocked() bool {
	return s.log.files.touch(s)
}

// indexes returns the offset and time indexes, loading them if needed
// (outside s.mu: only the first user of a cold segment waits for the
// disk).
func (s *segment) indexes() (*offsetIndex, *timeIndex, error) {
	for {
		s.mu.Lock()
		if s.deleted {
			s.mu.Unlock()
			return nil, nil, errSegmentGone
		}
		if s.oi != nil && s.ti != nil {
			oi, ti := s.oi, s.ti
			over := s.touchLocked()
			s.mu.Unlock()
			if over {
				s.log.files.shrink(s)
			}
			return oi, ti, nil
		}
		s.mu.Unlock()
		s.loadMu.Lock()
		s.mu.Lock()
		loaded := (s.oi != nil && s.ti != nil) || s.deleted
		s.mu.Unlock()
		if !loaded {
			oi, ti, err := s.loadIndexes()
			if err != nil {
				s.loadMu.Unlock()
				return nil, nil, err
			}
			s.mu.Lock()
			if !s.deleted {
				s.oi, s.ti = oi, ti
			}
			s.mu.Unlock()
		}
		s.loadMu.Unlock()
	}
}

// loadIndexes reads the index files; a missing or inconsistent index is
// rebuilt from the .log (headers only) and rewritten trimmed.
func (s *segment) loadIndexes() (*offsetIndex, *timeIndex, error) {
	maxOI := int(s.maxIndexBytes) / offsetEntrySize
	maxTI := int(s.maxIndexBytes) / timeEntrySize
	oiData, err1 := vfs.ReadFile(s.log.fsys, s.path(IndexSuffix))
	tiData, err2 := vfs.ReadFile(s.log.fsys, s.path(TimeIndexSuffix))
	size := s.size.Load()
	var oiBuf, tiBuf []byte
	var err error
	if err1 == nil {
		oiBuf, err = ParseOffsetIndex(oiData, size)
		if err != nil {
			err1 = err
		}
	}
	if err2 == nil {
		tiBuf, err = ParseTimeIndex(tiData)
		if err != nil {
			err2 = err
		}
	}
	if size == 0 && errNotExist(err1) && errNotExist(err2) {
		// An empty segment whose index files were never written (they
		// appear when it closes: createSegmentFiles): empty indexes,
		// nothing to rebuild or create.
		return &offsetIndex{maxEntries: maxOI}, &timeIndex{maxEntries: maxTI}, nil
	}
	// An empty .log has no entries: index files holding some name bytes
	// a crash took (recovery left the active segment empty), as Kafka's
	// LogSegment.recover resets the indexes it recovers.
	if err1 != nil || err2 != nil || (size == 0 && len(oiBuf)+len(tiBuf) > 0) {
		return s.rebuildIndexes(size)
	}
	oi := &offsetIndex{buf: oiBuf, maxEntries: maxOI}
	ti := &timeIndex{buf: tiBuf, maxEntries: maxTI}
	if ts, rel, ok := ti.last(); ok && !s.tsKnown.Load() {
		s.maxTs.Store(ts)
		s.maxTsOff.Store(s.base + int64(rel))
		s.tsKnown.Store(true)
	}
	return oi, ti, nil
}

// rebuildIndexes scans batch headers of [0,size) and writes fresh trimmed
// index files for a closed segment.
func (s *segment) rebuildIndexes(size int64) (*offsetIndex, *timeIndex, error) {
	f, err := s.log.fsys.OpenFile(s.path(LogSuffix), os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("rebuild index of %s: %w", s.path(LogSuffix), err)
	}
	defer f.Close()
	oi := &offsetIndex{maxEntries: int(s.maxIndexBytes) / offsetEntrySize}
	ti := &timeIndex{maxEntries: int(s.maxIndexBytes) / timeEntrySize}
	b := newIndexBuilder(s.base, oi, ti, int64(s.indexInterval))
	var hdr [record.HeaderSize]byte
	for pos := int64(0); pos < size; {
		h, err := readHeader(f, pos, hdr[:])
		if err != nil {
			return nil, nil, fmt.Errorf("rebuild index of %s at %d: %w", s.path(LogSuffix), pos, err)
		}
		b.add(h, pos)
		pos += h.size
	}
	b.finish()
	// A failure to persist (a full disk) keeps the rebuilt indexes in
	// memory only: they are rebuilt again on the next load.
	if err := errors.Join(writeSegmentIndexes(s.log.fsys, s, writeIndexFile, nil, ti.buf, oi.buf)...); err != nil {
		s.persistErr(err)
	}
	s.maxTs.Store(b.maxTs)
	s.maxTsOff.Store(b.maxTsOff)
	s.tsKnown.Store(true)
	return oi, ti, nil
}

// writeIndexFile replaces the index file name with data via name.tmp
// (write, fsync, rename): a failed write (a full disk) leaves the previous
// file untouched. The caller fsyncs the directory when the rename must be
// durable.
func writeIndexFile(fsys vfs.FS, name string, data []byte) error {
	tmp := name + TmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write index %s: %w", name, err)
	}
	fail := func(err error) error {
		f.Close()
		fsys.Remove(tmp)
		return err
	}
	if len(data) > 0 {
		if _, err := f.WriteAt(data, 0); err != nil {
			return fail(fmt.Errorf("write index %s: %w", name, err))
		}
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("fsync index %s: %w", name, err))
	}
	if err := f.Close(); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("close index %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("rename index %s: %w", tmp, err)
	}
	return nil
}

// writeFileNoSync replaces name's content in place, without fsync (see
// Log.CloseDeferSync: a SyncFS of the log dir follows).
func writeFileNoSync(fsys vfs.FS, name string, data []byte) error {
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if len(data) > 0 {
		if _, err := f.WriteAt(data, 0); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	return nil
}

// persistErr logs an index that could not be written (kept in memory).
func (s *segment) persistErr(err error) {
	s.log.logger.Warn("keeping rebuilt index in memory only: cannot write it", "base", s.base, "err", err)
}

// unload drops the open file and the in-memory indexes (cache eviction).
// An active segment keeps its indexes (their only copy) and closes its
// file only once its bytes are fsynced (Log.evictActive). It reports
// false when the segment must stay loaded for now.
func (s *segment) unload() bool {
	if s.isActive() && s.log != nil {
		return s.log.evictActive(s)
	}
	return s.unloadClosed()
}

func (s *segment) isActive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// unloadClosed unloads a segment that is not active.
func (s *segment) unloadClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active || s.pinned > 0 {
		return false
	}
	if s.file != nil {
		s.file.Release()
		s.file = nil
	}
	s.oi, s.ti = nil, nil
	return true
}

// closeFile drops the owner reference on the file (an active segment's,
// under the log's mu, once its bytes are durable).
func (s *segment) closeFile() {
	s.mu.Lock()
	if s.file != nil {
		s.file.Release()
		s.file = nil
	}
	s.mu.Unlock()
}

// markDeleted makes later acquires fail and drops the owner reference;
// readers holding the file keep reading it.
func (s *segment) markDeleted() {
	s.mu.Lock()
	s.deleted = true
	if s.file != nil {
		s.file.Release()
		s.file = nil
	}
	s.oi, s.ti = nil, nil
	s.mu.Unlock()
	if s.log.files != nil {
		s.log.files.remove(s)
	}
}

// maxTimestamp returns the largest batch timestamp and its offset, loading
// the time index if needed; (-1, -1) for an empty segment.
func (s *segment) maxTimestamp() (int64, int64, error) {
	if s.tsKnown.Load() {
		return s.maxTs.Load(), s.maxTsOff.Load(), nil
	}
	if _, _, err := s.indexes(); err != nil {
		return -1, -1, err
	}
	if !s.tsKnown.Load() {
		if s.size.Load() == 0 {
			return -1, -1, nil
		}
		// Index had no time entry (all timestamps -1).
		s.maxTs.Store(-1)
		s.maxTsOff.Store(-1)
		s.tsKnown.Store(true)
	}
	return s.maxTs.Load(), s.maxTsOff.Load(), nil
}

// hdrInfo is what storage needs from a batch header.
type hdrInfo struct {
	base  int64
	last  int64
	size  int64
	maxTs int64
}

// readHeader reads and frames the batch header at pos.
func readHeader(f vfs.File, pos int64, buf []byte) (hdrInfo, error) {
	n, err := f.ReadAt(buf[:record.HeaderSize], pos)
	if n < record.HeaderSize {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return hdrInfo{}, err
	}
	return headerInfo(record.Batch(buf[:record.HeaderSize]))
}

func headerInfo(b record.Batch) (hdrInfo, error) {
	l := int64(b.BatchLength())
	if l < record.HeaderSize-record.LogOverhead {
		return hdrInfo{}, fmt.Errorf("batch length %d below minimum: %w", l, errCorruptLog)
	}
	return hdrInfo{base: b.BaseOffset(), last: b.LastOffset(), size: l + record.LogOverhead, maxTs: b.MaxTimestamp()}, nil
}

var errCorruptLog = errors.New("corrupt log")

// indexBuilder adds sparse index entries as batches go by.
type indexBuilder struct {
	base     int64
	oi       *offsetIndex
	ti       *timeIndex
	interval int64
	since    int64
	maxTs    int64
	maxTsOff int64
	first    bool
	firstTs  int64
}

func newIndexBuilder(base int64, oi *offsetIndex, ti *timeIndex, interval int64) *indexBuilder {
	return &indexBuilder{base: base, oi: oi, ti: ti, interval: interval, maxTs: -1, maxTsOff: -1, first: true, firstTs: -1}
}

// add accounts one batch at pos; it returns the encoded entries written to
// each index (nil when none).
func (b *indexBuilder) add(h hdrInfo, pos int64) (oiEntry, tiEntry []byte) {
	if b.first {
		b.firstTs = h.maxTs
		b.first = false
	}
	if h.maxTs > b.maxTs {
		b.maxTs, b.maxTsOff = h.maxTs, h.last
	}
	if b.since > b.interval {
		oiEntry = b.oi.add(int32(h.last-b.base), int32(pos))
		if b.maxTs >= 0 {
			tiEntry = b.ti.add(b.maxTs, int32(b.maxTsOff-b.base))
		}
		b.since = 0
	}
	b.since += h.size
	return oiEntry, tiEntry
}

// finish adds the final time-index entry of a closing segment.
func (b *indexBuilder) finish() []byte {
	if b.maxTs < 0 {
		return nil
	}
	return b.ti.add(b.maxTs, int32(b.maxTsOff-b.base))
}

// errNotExist reports whether err is a missing file.
func errNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// writeSegmentIndexes writes a segment's index files with write in the
// order recovery relies on: the .txnindex (when txn is not nil), then the
// .timeindex, then the .index, stopping at the first failure. Each write
// replaces its file whole (tmp + rename), and renames become durable in
// their order, so whenever a crash leaves the .index of some close, the
// other two are of that close or a later one: the .timeindex's last entry
// is then at least the largest timestamp up to the .index's last entry,
// and the .txnindex holds every abort whose marker lies before it
// (resumeIndexes, txnIndexKept).
func writeSegmentIndexes(fsys vfs.FS, s *segment, write func(vfs.FS, string, []byte) error, txn, ti, oi []byte) []error {
	if txn != nil {
		if err := write(fsys, s.path(TxnIndexSuffix), txn); err != nil {
			return []error{err}
		}
	}
	if err := write(fsys, s.path(TimeIndexSuffix), ti); err != nil {
		return []error{err}
	}
	return []error{write(fsys, s.path(IndexSuffix), oi)}
}
