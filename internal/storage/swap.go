package storage

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/strata-io/strata/internal/parallel"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// OpenSegment returns a reader over a closed or active segment's .log bytes
// [0, size) as of now; release the file when done.
func (l *Log) OpenSegment(baseOffset int64) (f *SegmentFile, size int64, err error) {
	for try := 0; try < maxViewRetries; try++ {
		v := l.v.Load()
		i := sort.Search(len(v.segs), func(i int) bool { return v.segs[i].base >= baseOffset })
		if i == len(v.segs) || v.segs[i].base != baseOffset {
			return nil, 0, fmt.Errorf("open segment %d of %s: no such segment", baseOffset, l.dir)
		}
		s := v.segs[i]
		size := s.size.Load()
		f, err := s.acquire()
		if errors.Is(err, errSegmentGone) {
			continue
		}
		return f, size, err
	}
	return nil, 0, fmt.Errorf("open segment %d of %s: %w", baseOffset, l.dir, errSegmentGone)
}

// SegmentWriter writes a new segment (the cleaner's output) as .cleaned
// files with offset and time indexes built as batches are appended.
type SegmentWriter struct {
	l       *Log
	seg     *segment
	f       vfs.File
	bld     *indexBuilder
	size    int64
	next    int64
	done    bool
	aborted bool
	swapped bool         // renamed to .swap and the directory synced: the swap is decided
	txns    []AbortedTxn // carried from the replaced segments' .txnindex
	ownTxns bool         // txns set by SetAbortedTxns: nothing is carried
}

// SetAbortedTxns gives the segment exactly these .txnindex entries (the
// aborted transactions whose data or ABORT marker the cleaner kept, as
// Kafka's cleaner rewrites the index). When any replacement of a
// ReplaceSegments call has its entries set, no entry of the replaced
// segments is carried over to any of them.
func (w *SegmentWriter) SetAbortedTxns(entries []AbortedTxn) {
	e := append([]AbortedTxn(nil), entries...)
	sort.SliceStable(e, func(i, j int) bool { return e[i].LastOffset < e[j].LastOffset })
	w.txns, w.ownTxns = e, true
}

// NewCleanedSegment starts a cleaner output segment with the given base.
func (l *Log) NewCleanedSegment(baseOffset int64) (*SegmentWriter, error) {
	cfg := l.cfg.Load()
	s := l.newSegment(baseOffset)
	name := s.path(LogSuffix + CleanedSuffix)
	f, err := l.fsys.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	oi := &offsetIndex{maxEntries: int(cfg.SegmentIndexBytes) / offsetEntrySize}
	ti := &timeIndex{maxEntries: int(cfg.SegmentIndexBytes) / timeEntrySize}
	s.oi, s.ti = oi, ti
	return &SegmentWriter{l: l, seg: s, f: f, bld: newIndexBuilder(baseOffset, oi, ti, int64(cfg.IndexIntervalBytes)), next: baseOffset}, nil
}

// Append writes one already-final batch (offsets assigned) to the segment.
func (w *SegmentWriter) Append(batch []byte) error {
	if w.done || w.aborted {
		return errors.New("segment writer finished")
	}
	if err := record.ValidateStored(batch); err != nil {
		return fmt.Errorf("cleaned segment %d: %w", w.seg.base, err)
	}
	h, _ := headerInfo(record.Batch(batch))
	if h.base < w.next {
		return fmt.Errorf("cleaned segment %d: batch at %d not after %d", w.seg.base, h.base, w.next)
	}
	if h.last-w.seg.base > 1<<31-1 {
		return fmt.Errorf("cleaned segment %d: offset %d overflows relative offsets", w.seg.base, h.last)
	}
	// Cleaner output stops at the free-space reserve too (the cleaning
	// fails; the log keeps its old segments).
	if err := w.l.reserve.take(int64(len(batch))); err != nil {
		return fmt.Errorf("write cleaned segment %d: %w", w.seg.base, err)
	}
	if _, err := w.f.WriteAt(batch, w.size); err != nil {
		w.l.reserve.noteWriteError(err)
		return fmt.Errorf("write cleaned segment %d: %w", w.seg.base, err)
	}
	w.bld.add(h, w.size)
	w.size += h.size
	w.next = h.last + 1
	return nil
}

// Size returns the bytes written so far.
func (w *SegmentWriter) Size() int64 { return w.size }

// Abort deletes the .cleaned files (and .swap files of a replacement
// that failed before it was decided). After ReplaceSegments decided the
// swap it is a no-op: Open finishes an interrupted swap.
func (w *SegmentWriter) Abort() error {
	if w.aborted || w.swapped {
		return nil
	}
	w.aborted = true
	w.f.Close()
	var errs []error
	for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
		for _, state := range []string{CleanedSuffix, SwapSuffix} {
			if err := w.l.fsys.Remove(w.seg.path(suf + state)); err != nil && !errNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// finishFiles writes the index files of the segment next to its .log as
// .cleaned files and returns every file the segment needs fsynced (its
// .log, indexes and a .txnindex when it has entries), still open. The
// .cleaned names need no temporary file and rename: Open deletes .cleaned
// files, so one half written by a crash is never read.
func (w *SegmentWriter) finishFiles() ([]vfs.File, error) {
	w.bld.finish()
	files := []vfs.File{w.f}
	fail := func(err error) ([]vfs.File, error) {
		for _, f := range files[1:] {
			f.Close()
		}
		return nil, err
	}
	write := func(suffix string, data []byte) error {
		name := w.seg.path(suffix + CleanedSuffix)
		f, err := w.l.fsys.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		files = append(files, f)
		if len(data) > 0 {
			if _, err := f.WriteAt(data, 0); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		}
		return nil
	}
	if len(w.txns) > 0 {
		if err := write(TxnIndexSuffix, EncodeTxnIndex(w.txns)); err != nil {
			return fail(err)
		}
	} else if err := w.l.fsys.Remove(w.seg.path(TxnIndexSuffix + CleanedSuffix)); err != nil && !errNotExist(err) {
		return fail(fmt.Errorf("remove %s: %w", w.seg.path(TxnIndexSuffix+CleanedSuffix), err))
	}
	if err := write(IndexSuffix, w.seg.oi.buf); err != nil {
		return fail(err)
	}
	if err := write(TimeIndexSuffix, w.seg.ti.buf); err != nil {
		return fail(err)
	}
	return files, nil
}

// finished records what the fsynced segment holds.
func (w *SegmentWriter) finished() {
	w.seg.setAbortedTxns(w.txns)
	w.done = true
	w.seg.size.Store(w.size)
	w.seg.maxTs.Store(w.bld.maxTs)
	w.seg.maxTsOff.Store(w.bld.maxTsOff)
	w.seg.tsKnown.Store(true)
}

// maxSwapSyncs bounds the fsyncs ReplaceSegments issues at once. The
// file system commits concurrent fsyncs of small files in one journal
// transaction, so a swap of many tiny cleaned segments (segment.bytes of
// a few hundred bytes) costs about as much as one of a single segment
// (BenchmarkCleanTinySegments in internal/cleaner).
const maxSwapSyncs = 32

// finishAll writes the index files of every unfinished writer and fsyncs
// all their files, maxSwapSyncs at a time.
func finishAll(ws []*SegmentWriter) error {
	var files []vfs.File
	var todo []*SegmentWriter
	var errs []error
	for _, w := range ws {
		if w.done {
			continue
		}
		fs, err := w.finishFiles()
		if err != nil {
			errs = append(errs, err)
			break
		}
		files = append(files, fs...)
		todo = append(todo, w)
	}
	if len(errs) == 0 {
		errs = append(errs, syncFiles(files))
	}
	for _, f := range files {
		f.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, w := range todo {
		w.finished()
	}
	return nil
}

// syncFiles fsyncs files, maxSwapSyncs at a time, and joins the errors.
func syncFiles(files []vfs.File) error {
	return parallel.Each(files, maxSwapSyncs, func(f vfs.File) error {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", f.Name(), err)
		}
		return nil
	})
}

// ReplaceSegments atomically (crash-safe: .cleaned fsynced -> .swap ->
// originals .deleted -> strip .swap) replaces the closed segments whose
// base offsets are in old with the finished writers' segments. The
// replaced segments' .txnindex entries are carried over: each goes to the
// last replacement whose base is <= its LastOffset (the first replacement
// when none is), so READ_COMMITTED readers keep filtering aborted data the
// cleaner left (SegmentWriter.SetAbortedTxns overrides this). Readers
// holding old files keep reading them until released.
func (l *Log) ReplaceSegments(old []int64, replacements []*SegmentWriter) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil {
		return fmt.Errorf("replace segments of %s: log closed or failed", l.dir)
	}
	if err := l.loadProducers(); err != nil {
		return fmt.Errorf("replace segments of %s: %w", l.dir, err)
	}
	if len(old) == 0 {
		return fmt.Errorf("replace segments of %s: nothing to replace", l.dir)
	}
	old = append([]int64(nil), old...)
	sort.Slice(old, func(i, j int) bool { return old[i] < old[j] })
	first := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base >= old[0] })
	if first+len(old) > len(l.segs)-1 {
		return fmt.Errorf("replace segments of %s: %v include the active segment or unknown segments", l.dir, old)
	}
	for i, b := range old {
		if l.segs[first+i].base != b {
			return fmt.Errorf("replace segments of %s: %v are not consecutive existing segments", l.dir, old)
		}
	}
	rangeEnd := l.segs[first+len(old)].base
	reps := append([]*SegmentWriter(nil), replacements...)
	sort.Slice(reps, func(i, j int) bool { return reps[i].seg.base < reps[j].seg.base })
	for i, w := range reps {
		if w.aborted || w.l != l {
			return fmt.Errorf("replace segments of %s: replacement %d unusable", l.dir, w.seg.base)
		}
		if w.seg.base < old[0] || w.next > rangeEnd || (i > 0 && w.seg.base < reps[i-1].next) {
			return fmt.Errorf("replace segments of %s: replacement [%d,%d) outside [%d,%d) or overlapping", l.dir, w.seg.base, w.next, old[0], rangeEnd)
		}
	}
	dead := l.segs[first : first+len(old)]
	// The replaced segments' aborted transactions move to the replacements
	// (unless the cleaner chose them itself).
	explicit := false
	for _, w := range reps {
		explicit = explicit || w.ownTxns
	}
	if !explicit {
		var carried []AbortedTxn
		for _, s := range dead {
			carried = append(carried, s.abortedTxns()...)
		}
		for i, ents := range distributeTxns(carried, reps) {
			if !reps[i].done {
				reps[i].txns = ents
			}
		}
	}
	// 1. Cleaned files complete and durable.
	if err := finishAll(reps); err != nil {
		return fmt.Errorf("replace segments of %s: %w", l.dir, err)
	}
	// 1b. Everything below the replaced range fsynced and a recovery point
	// past it persisted before the swap can take effect: the gaps the
	// cleaner leaves between segments then always lie below the recovery
	// point, and recovery reads a gap above it as a lost tail (recover).
	if err := l.flushLocked(); err != nil {
		return fmt.Errorf("replace segments of %s: %w", l.dir, err)
	}
	if err := l.setRecoveryPoint(l.mark.leo, true); err != nil {
		return fmt.Errorf("replace segments of %s: recovery point: %w", l.dir, err)
	}
	// Keep the old segments readable through the renames.
	for _, s := range dead {
		if err := s.pin(); err != nil {
			return fmt.Errorf("replace segments of %s: %w", l.dir, err)
		}
	}
	unpin := func() {
		for _, s := range dead {
			s.unpin()
		}
	}
	// 2. .cleaned -> .swap in descending offset order, then fsync the dir.
	for i := len(reps) - 1; i >= 0; i-- {
		for _, suf := range []string{TxnIndexSuffix, TimeIndexSuffix, IndexSuffix, LogSuffix} {
			p := reps[i].seg.path(suf)
			if suf == TxnIndexSuffix && len(reps[i].txns) == 0 {
				continue
			}
			if err := l.fsys.Rename(p+CleanedSuffix, p+SwapSuffix); err != nil {
				unpin()
				return fmt.Errorf("replace segments of %s: %w", l.dir, err)
			}
		}
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		unpin()
		return fmt.Errorf("replace segments of %s: %w", l.dir, err)
	}
	for _, w := range reps {
		w.swapped = true
	}
	// From here the swap is decided: a crash completes it at Open. Any
	// failure leaves the directory for Open to finish, so the log stops.
	// 3. Originals -> .deleted.
	var deleted []string
	for _, s := range dead {
		for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
			p := s.path(suf)
			if err := l.fsys.Rename(p, p+DeletedSuffix); err != nil {
				if errNotExist(err) {
					continue
				}
				unpin()
				return l.fail(fmt.Errorf("replace segments: %w", err))
			}
			deleted = append(deleted, p+DeletedSuffix)
		}
	}
	// 4. Strip .swap and fsync the directory.
	for _, w := range reps {
		for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
			p := w.seg.path(suf)
			if suf == TxnIndexSuffix && len(w.txns) == 0 {
				continue
			}
			if err := l.fsys.Rename(p+SwapSuffix, p); err != nil {
				unpin()
				return l.fail(fmt.Errorf("replace segments: %w", err))
			}
		}
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		unpin()
		return l.fail(fmt.Errorf("replace segments: %w", err))
	}
	// Publish the new segment list.
	segs := make([]*segment, 0, len(l.segs)-len(old)+len(reps))
	segs = append(segs, l.segs[:first]...)
	for _, w := range reps {
		segs = append(segs, w.seg)
	}
	segs = append(segs, l.segs[first+len(old):]...)
	l.segs = segs
	if len(reps) > 0 && first == 0 && reps[0].seg.base > l.logStart {
		l.logStart = reps[0].seg.base
	}
	l.publish()
	l.checkInvariants(true)
	unpin()
	for _, s := range dead {
		s.markDeleted()
	}
	l.deleteLater(deleted, l.cfg.Load().FileDeleteDelay)
	return nil
}

// pin loads the file and indexes and keeps them loaded (no eviction) so
// readers keep working while the files are renamed.
func (s *segment) pin() error {
	if _, _, err := s.indexes(); err != nil {
		return err
	}
	f, err := s.acquire()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pinned++
	s.mu.Unlock()
	f.Release()
	return nil
}

func (s *segment) unpin() {
	s.mu.Lock()
	s.pinned--
	s.mu.Unlock()
}
