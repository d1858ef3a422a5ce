package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// recover validates what lies past the recovery point rp (Kafka's
// LogLoader.recoverLog; rp is the offset below which everything was
// fsynced). Kafka re-reads the whole segment holding rp
// (LogSegments.values(recoveryPoint, ...) starts at its floor segment).
// Here, below rp only batch headers are read, and only from the last
// entry of the segment's on-disk offset index on (resumeIndexes: the
// index files of the last close, checked against the .log), or from its
// start when they cannot be used; from rp on, and in every later
// segment, batches are checked (framing, CRC, offsets increasing and in
// range), indexes rebuilt, the .log truncated at the first torn or
// corrupt batch and every later segment removed. What was read past rp
// is fsynced so it counts as durable. A log with nothing past rp is
// neither written nor fsynced (changed is false). When the last segment
// is the only one scanned and its scanned part holds no control batch,
// its .txnindex is kept (txnIndexKept) instead of rebuilt by a
// producer-state scan of the whole segment, so an idle partition reads
// its index files and a few batch headers. It returns the log end
// offset, and stale: the last segment's index files lack entries (or the
// final largest timestamp) that its in-memory indexes now hold, so a clean
// close must write them even when nothing lay past rp (else the next clean
// start would load them, and the segment's largest timestamp, stale).
//
// A segment that ends before the next segment's base lost its tail: a
// roll without strata.durable.acks makes the next segment's file durable
// (the producer snapshot's directory fsync) before the rolled segment's
// tail, which the syncer fsyncs later, as Kafka's roll flushes the old
// segment asynchronously (UnifiedLog.roll's "flush-log" task). Kafka ends
// such a log at the empty segment's base, past offsets that hold nothing;
// here the later segments go, as after a torn batch, and the log ends
// after its last record. Only the cleaner leaves gaps between segments on
// purpose, and ReplaceSegments persists a recovery point past its range
// before the swap takes effect, so such gaps lie below rp, where this scan
// never looks. gapsLost false (a compacted log without a recovery point
// entry, whose gaps may be the cleaner's anywhere) keeps them.
func (l *Log) recover(rp int64, gapsLost bool) (leo int64, changed, stale bool, err error) {
	start := 0
	for i, s := range l.segs {
		if s.base <= rp {
			start = i
		}
	}
	leo = l.segs[start].base
	// Every re-scanned segment gets its .txnindex rebuilt with the
	// producer state (loadProducerState).
	l.rebuildTxnFrom = l.segs[start].base
	for i := start; i < len(l.segs); i++ {
		s := l.segs[i]
		if s.base < leo {
			// Overlaps the previous segment's offsets: not a valid successor.
			l.logger.Warn("segment overlaps previous data; removing it and later segments", "base", s.base, "prev_end", leo)
			for _, r := range l.segs[i:] {
				l.removeSegmentFiles(r)
			}
			l.segs = l.segs[:i]
			changed, stale = true, true // the new last segment's indexes are in memory
			break
		}
		trusted := int64(-1)
		if i == start {
			trusted = rp
		}
		r, err := l.recoverSegment(s, i == len(l.segs)-1, trusted)
		if err != nil {
			return 0, false, false, err
		}
		end, truncated, past := r.leo, r.truncated, r.past
		leo = end
		changed = changed || past
		stale = r.stale
		if i == start && i == len(l.segs)-1 && l.txnIndexKept(s, r) {
			// Nothing to rebuild: the producer state is left to its first
			// use (loadProducers), from the newest snapshot.
			l.rebuildTxnFrom = -1
		}
		if truncated && i+1 < len(l.segs) {
			l.logger.Warn("truncated segment; removing later segments", "base", s.base, "removed", len(l.segs)-i-1)
			for _, r := range l.segs[i+1:] {
				l.removeSegmentFiles(r)
			}
			l.segs = l.segs[:i+1]
			stale = true // this segment is the last one now
			break
		}
		if gapsLost && i+1 < len(l.segs) && end < l.segs[i+1].base {
			l.logger.Warn("segment lost its tail (ends before the next segment); removing later segments",
				"base", s.base, "end", end, "next", l.segs[i+1].base, "removed", len(l.segs)-i-1)
			for _, r := range l.segs[i+1:] {
				l.removeSegmentFiles(r)
			}
			l.segs = l.segs[:i+1]
			changed, stale = true, true
			break
		}
	}
	if leo == 0 && len(l.segs) > 0 {
		leo = l.segs[len(l.segs)-1].base
	}
	if last := l.segs[len(l.segs)-1]; last.size.Load() == 0 && last.base > leo {
		leo = last.base
	}
	return leo, changed, stale, nil
}

// segRecovery is what recoverSegment found in one segment.
type segRecovery struct {
	leo       int64
	truncated bool // cut at a torn or corrupt batch
	past      bool // bytes past the trusted offset were read (or cut): the segment was fsynced
	// scanFrom is the base offset of the first batch read (the segment's
	// base when read from its start, later when resumed from its on-disk
	// index); controls tells whether a control batch was read from there.
	scanFrom int64
	controls bool
	// stale: the segment is not empty and its in-memory indexes are not
	// those of its index files (not resumed from them, or the scan past
	// them added entries or a larger timestamp).
	stale bool
}

// recoverSegment scans one segment: batch headers only while their last
// offset is below trusted (fsynced before the crash), whole batches from
// there. Below trusted the scan resumes from the segment's on-disk
// indexes when they check out (resumeIndexes). last tells whether it is
// the newest (its time index gets no closing entry, and its indexes stay
// in memory: the active segment's index files are written when it
// closes).
func (l *Log) recoverSegment(s *segment, last bool, trusted int64) (r segRecovery, err error) {
	cfg := l.cfg.Load()
	f, err := l.fsys.OpenFile(s.path(LogSuffix), os.O_RDWR, 0)
	if err != nil {
		return r, fmt.Errorf("recover segment %d: %w", s.base, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return r, err
	}
	size := st.Size()
	oi := &offsetIndex{maxEntries: int(cfg.SegmentIndexBytes) / offsetEntrySize}
	ti := &timeIndex{maxEntries: int(cfg.SegmentIndexBytes) / timeEntrySize}
	b := newIndexBuilder(s.base, oi, ti, int64(cfg.IndexIntervalBytes))
	leo := s.base
	r.scanFrom = s.base
	var pos int64
	hr := headerReader{f: f, size: size, prev: -1}
	fromFiles := func() bool { return false } // the indexes are still those of the files
	if trusted > s.base {
		if rs, ok := l.resumeIndexes(s, &hr, trusted); ok {
			fromFiles = func() bool {
				return len(oi.buf) == len(rs.oi) && len(ti.buf) == len(rs.ti) && b.maxTs == rs.maxTs
			}
			oi.buf, ti.buf = rs.oi, rs.ti
			b.first, b.since, b.maxTs, b.maxTsOff = false, rs.h.size, rs.maxTs, rs.maxTsOff
			l.noteEpoch(rs.epoch, rs.h.base)
			r.scanFrom, r.controls = rs.h.base, rs.control
			leo, pos = rs.h.last+1, rs.pos+rs.h.size
		}
	}
	// The fsynced prefix: headers only.
	for pos < size && trusted > leo {
		hdr, herr := hr.header(pos)
		if herr != nil {
			break // checked in full below
		}
		h, herr := headerInfo(hdr)
		if herr != nil || pos+h.size > size || h.last >= trusted || h.base < leo || h.last-s.base > math.MaxInt32 || h.base < s.base {
			break // checked in full below
		}
		b.add(h, pos)
		l.noteEpoch(hdr.PartitionLeaderEpoch(), h.base)
		r.controls = r.controls || hdr.IsControl()
		leo = h.last + 1
		pos += h.size
	}
	scanFrom := pos
	var buf []byte
	if pos < size {
		buf = make([]byte, min(1<<20, size-pos))
	}
	var reason string
scan:
	for pos < size {
		n, rerr := f.ReadAt(buf, pos)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return r, fmt.Errorf("recover segment %d: %w", s.base, rerr)
		}
		chunk := buf[:n]
		consumed := 0
		for len(chunk) > 0 {
			bt, rest, nerr := record.Next(chunk)
			if errors.Is(nerr, record.ErrTruncated) {
				if pos+int64(consumed)+int64(len(chunk)) >= size {
					reason = "torn batch at end of file"
					pos += int64(consumed)
					break scan
				}
				if consumed == 0 {
					// One batch larger than the buffer.
					need := record.LogOverhead + int(record.Batch(chunk).BatchLength())
					if need > int(cfg.SegmentBytes)+record.LogOverhead || need > math.MaxInt32 {
						reason = "batch length beyond segment size"
						break scan
					}
					buf = make([]byte, need)
				}
				break
			}
			if nerr != nil {
				reason = nerr.Error()
				pos += int64(consumed)
				break scan
			}
			if verr := record.ValidateStored(bt); verr != nil {
				reason = verr.Error()
				pos += int64(consumed)
				break scan
			}
			h, _ := headerInfo(bt)
			if h.base < leo || h.last-s.base > math.MaxInt32 || h.base < s.base {
				reason = fmt.Sprintf("batch offsets [%d,%d] out of order after %d", h.base, h.last, leo)
				pos += int64(consumed)
				break scan
			}
			b.add(h, pos+int64(consumed))
			l.noteEpoch(bt.PartitionLeaderEpoch(), h.base)
			r.controls = r.controls || bt.IsControl()
			leo = h.last + 1
			consumed += int(h.size)
			chunk = rest
		}
		pos += int64(consumed)
	}
	r.leo = leo
	r.past = scanFrom < size
	past := r.past
	if pos < size {
		r.truncated = true
		l.logger.Warn("truncating segment at invalid batch", "base", s.base, "pos", pos, "size", size, "reason", reason)
		if err := f.Truncate(pos); err != nil {
			return r, fmt.Errorf("truncate segment %d: %w", s.base, err)
		}
	}
	if past && !l.deferSync {
		// Bytes past the recovery point may still be only in the page
		// cache (a process crash): make them durable before serving them
		// (with deferSync: StartJournal's SyncFS of the dir, before the
		// journal is voided and before the broker serves).
		if err := f.Sync(); err != nil {
			return r, fmt.Errorf("fsync segment %d: %w", s.base, err)
		}
	}
	if !last {
		b.finish()
	}
	switch {
	case !last && (past || trusted < 0):
		// A closed segment re-scanned: fresh index files. On a full disk
		// (e.g. after a shutdown that failed for lack of space) the
		// rebuilt indexes stay in memory only, so the log still opens;
		// the on-disk ones are left as they were (tmp + rename). The time
		// index goes first (see writeSegmentIndexes).
		if err := errors.Join(writeSegmentIndexes(l.fsys, s, writeIndexFile, nil, ti.buf, oi.buf)...); err != nil {
			s.persistErr(err)
		}
	case last && r.truncated:
		// The on-disk indexes of the active segment (from its last close)
		// may point past the cut: gone, the segment's close writes new
		// ones.
		if err := removeIndexFiles(l, s); err != nil {
			return r, fmt.Errorf("segment %d: %w", s.base, err)
		}
	}
	r.stale = pos > 0 && !fromFiles()
	s.size.Store(pos)
	s.maxTs.Store(b.maxTs)
	s.maxTsOff.Store(b.maxTsOff)
	s.tsKnown.Store(true)
	s.mu.Lock()
	s.oi, s.ti = oi, ti
	s.mu.Unlock()
	return r, nil
}

// resumed is where recovery picks up a segment from its on-disk indexes.
type resumed struct {
	oi, ti   []byte  // the entries of the .index and .timeindex files
	pos      int64   // position of the batch the last offset index entry names
	h        hdrInfo // that batch's header
	epoch    int32   // its partition leader epoch
	control  bool    // it is a control batch
	maxTs    int64   // largest batch timestamp up to it (the time index's last entry, or its own)
	maxTsOff int64   // offset of the batch carrying maxTs
}

// resumeIndexes loads the .index and .timeindex of s, the segment holding
// the recovery point trusted, and checks them against its .log (size
// bytes, read through hr), so that recovery reads batch headers only from
// the batch named by the last offset index entry instead of from the
// segment's start. Kafka does not check the indexes of segments below the
// recovery point (LogSegment.sanityCheck leaves them to recoverLog, and
// OffsetIndex.sanityCheck only checks the file's length and last offset)
// and re-reads the segment holding it from its start; here the indexes of
// that segment are used when:
//   - both files parse (ParseOffsetIndex: whole entries, offsets strictly
//     and positions weakly increasing, every position inside the .log;
//     ParseTimeIndex), and the offset index has an entry;
//   - the last offset index entry names the start of a whole batch whose
//     last offset is the entry's, below trusted (one read, which also
//     serves the headers that follow it);
//   - the time index's last entry names an offset below trusted and a
//     timestamp at least that batch's.
//
// Why that is enough: index files are only ever replaced whole (tmp +
// rename: closeActiveFiles, recovery, rebuildIndexes; the active
// segment's live in memory), a truncation removes them before the
// segment takes new bytes (TruncateTo, recovery), and the .timeindex is
// written before the .index (writeSegmentIndexes). So the files are those
// of an earlier close of this segment, whose .log has only grown since: a
// prefix of the entries a rebuild would make, the time index at least as
// new as the offset index. Entries that could name bytes a power cut took
// (the files are written before the .log is fsynced at a close) fail the
// checks against trusted and the .log. Resuming at the last entry's batch
// with its bytes counted since that entry and the time index's last
// timestamp as the largest so far, the scan then adds exactly the entries
// a scan from the start would.
func (l *Log) resumeIndexes(s *segment, hr *headerReader, trusted int64) (resumed, bool) {
	oiData, err := vfs.ReadFile(l.fsys, s.path(IndexSuffix))
	if err != nil || len(oiData) < offsetEntrySize {
		return resumed{}, false
	}
	oiBuf, err := ParseOffsetIndex(oiData, hr.size)
	if err != nil {
		return resumed{}, false
	}
	tiData, err := vfs.ReadFile(l.fsys, s.path(TimeIndexSuffix))
	if err != nil {
		return resumed{}, false
	}
	tiBuf, err := ParseTimeIndex(tiData)
	if err != nil || len(tiBuf) < timeEntrySize {
		return resumed{}, false
	}
	e := oiBuf[len(oiBuf)-offsetEntrySize:]
	rel := int64(int32(binary.BigEndian.Uint32(e)))
	pos := int64(int32(binary.BigEndian.Uint32(e[4:])))
	hdr, err := hr.header(pos)
	if err != nil {
		return resumed{}, false
	}
	h, err := headerInfo(hdr)
	if err != nil || h.last != s.base+rel || h.base < s.base || h.base > h.last || pos+h.size > hr.size || h.last >= trusted {
		return resumed{}, false
	}
	te := tiBuf[len(tiBuf)-timeEntrySize:]
	ts := int64(binary.BigEndian.Uint64(te))
	tsOff := s.base + int64(int32(binary.BigEndian.Uint32(te[8:])))
	if tsOff >= trusted || ts < h.maxTs {
		return resumed{}, false
	}
	return resumed{oi: oiBuf, ti: tiBuf, pos: pos, h: h, epoch: hdr.PartitionLeaderEpoch(), control: hdr.IsControl(),
		maxTs: ts, maxTsOff: tsOff}, true
}

// txnIndexKept reports whether recovery may keep the .txnindex of s, the
// last segment and the only one it scanned (r), instead of rebuilding it
// with the producer state (a scan of every batch header of the segment
// from a snapshot at or below its base; Kafka's LogSegment.recover
// rebuilds it with the segment). It may when no control batch was read
// from r.scanFrom on and every entry of the file (loaded here) names a
// marker before r.scanFrom: entries are appended as aborts are written
// and the file is written whole at every close before the indexes
// recovery resumed from (writeSegmentIndexes), so it holds every abort
// before r.scanFrom, and none lies after it. The producer state then
// comes from the newest snapshot at or below the log end.
func (l *Log) txnIndexKept(s *segment, r segRecovery) bool {
	if r.controls {
		return false
	}
	if !l.txnFiles[s.base] {
		s.setAbortedTxns(nil)
		return true
	}
	if !l.loadTxnIndex(s) {
		return false
	}
	for _, e := range s.abortedTxns() {
		if e.LastOffset < s.base || e.LastOffset >= r.scanFrom {
			return false
		}
	}
	delete(l.txnFiles, s.base) // loaded
	return true
}

// headerReader serves the batch headers of one .log from windows of up to
// headerWindow bytes, one read each, instead of one read per header while
// batches are small; past a batch of more than a quarter window it reads
// the header alone (a window would then read the batches' bodies).
type headerReader struct {
	f    vfs.File
	size int64  // file size
	buf  []byte // window
	off  int64  // file position of buf[0]
	n    int    // bytes in the window
	prev int64  // position of the previous header asked for (-1: none yet)
}

const headerWindow = 16 << 10

// header returns the record.HeaderSize bytes at pos (valid until the next
// call).
func (r *headerReader) header(pos int64) (record.Batch, error) {
	big := r.prev >= 0 && pos-r.prev > headerWindow/4
	r.prev = pos
	if pos < r.off || pos+record.HeaderSize > r.off+int64(r.n) {
		if r.buf == nil {
			r.buf = make([]byte, headerWindow)
		}
		want := min(int64(len(r.buf)), r.size-pos)
		if big {
			want = min(record.HeaderSize, want)
		}
		if pos < 0 || want < record.HeaderSize {
			return nil, io.ErrUnexpectedEOF
		}
		n, err := r.f.ReadAt(r.buf[:want], pos)
		r.off, r.n = pos, n
		if n < record.HeaderSize {
			r.n = 0
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	i := pos - r.off
	return record.Batch(r.buf[i : i+record.HeaderSize]), nil
}

// noteEpoch records a batch's leader epoch for the epoch history rebuilt
// by recovery.
func (l *Log) noteEpoch(ep int32, base int64) {
	if ep >= 0 && (len(l.recEpochs) == 0 || ep > l.recEpochs[len(l.recEpochs)-1].Epoch) {
		l.recEpochs = append(l.recEpochs, EpochEntry{Epoch: ep, StartOffset: base})
	}
}

// completeSwaps finishes or rolls back an interrupted segment replacement
// (Kafka's LogLoader.removeTempFilesAndCollectSwapFiles and LocalLog's
// completeSwapOperations): .swap files at or above the lowest .cleaned
// offset are an incomplete replacement and are deleted with every .cleaned
// file; remaining .swap segments replace the originals in their offset
// range.
func completeSwaps(fsys vfs.FS, dir string, logger *slog.Logger) error {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	_, err = completeSwapsIn(fsys, dir, ents, logger)
	return err
}

// completeSwapsIn is completeSwaps over the directory's entries ents; it
// reports whether it changed the directory.
func completeSwapsIn(fsys vfs.FS, dir string, ents []fs.DirEntry, logger *slog.Logger) (bool, error) {
	minCleaned := int64(math.MaxInt64)
	var cleaned, swaps []string
	for _, e := range ents {
		n := e.Name()
		if b, ok := parseBase(n); ok {
			switch {
			case strings.HasSuffix(n, CleanedSuffix):
				cleaned = append(cleaned, n)
				minCleaned = min(minCleaned, b)
			case strings.HasSuffix(n, SwapSuffix):
				swaps = append(swaps, n)
			}
		}
	}
	if len(cleaned) == 0 && len(swaps) == 0 {
		return false, nil
	}
	var keep []string
	for _, n := range swaps {
		if b, _ := parseBase(n); b >= minCleaned {
			logger.Warn("deleting incomplete swap file", "file", n)
			if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
				return true, err
			}
			continue
		}
		keep = append(keep, n)
	}
	for _, n := range cleaned {
		if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
			return true, err
		}
	}
	// Range covered by the swap segments.
	minBase, maxNext := int64(math.MaxInt64), int64(-1)
	for _, n := range keep {
		if !strings.HasSuffix(n, LogSuffix+SwapSuffix) {
			continue
		}
		b, _ := parseBase(n)
		next, err := segmentNextOffset(fsys, filepath.Join(dir, n), b)
		if err != nil {
			return true, fmt.Errorf("swap file %s: %w", n, err)
		}
		minBase = min(minBase, b)
		maxNext = max(maxNext, next)
	}
	if maxNext >= 0 {
		for _, e := range ents {
			n := e.Name()
			b, ok := parseBase(n)
			if !ok || strings.HasSuffix(n, SwapSuffix) || strings.HasSuffix(n, CleanedSuffix) || strings.HasSuffix(n, SnapshotSuffix) {
				continue
			}
			if b >= minBase && b < maxNext {
				logger.Info("removing segment file replaced by swap", "file", n)
				if err := fsys.Remove(filepath.Join(dir, n)); err != nil && !errNotExist(err) {
					return true, err
				}
			}
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(keep)))
	for _, n := range keep {
		if err := fsys.Rename(filepath.Join(dir, n), filepath.Join(dir, strings.TrimSuffix(n, SwapSuffix))); err != nil {
			return true, err
		}
	}
	return true, fsys.SyncDir(dir)
}

// segmentNextOffset returns lastOffset+1 of the last whole batch of a .log
// file (base when empty).
func segmentNextOffset(fsys vfs.FS, name string, base int64) (int64, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	next := base
	var hdr [record.HeaderSize]byte
	for pos := int64(0); pos < st.Size(); {
		h, err := readHeader(f, pos, hdr[:])
		if err != nil || pos+h.size > st.Size() {
			break
		}
		next = h.last + 1
		pos += h.size
	}
	return next, nil
}

// loadTxnIndexes loads the .txnindex entries of the segments that
// recovery does not rebuild; a corrupt file makes its segment (and every
// later one) rebuilt too.
func (l *Log) loadTxnIndexes() {
	for _, s := range l.segs {
		if l.rebuildTxnFrom >= 0 && s.base >= l.rebuildTxnFrom {
			break
		}
		if !l.txnFiles[s.base] {
			continue
		}
		if !l.loadTxnIndex(s) {
			l.rebuildTxnFrom = s.base
			break
		}
	}
	l.txnFiles = nil
}

// loadProducerState restores the idempotent-producer table from the
// newest valid snapshot at or below leo plus a scan of later batches; the
// earlier batches of the snapshot's producers (up to five each) are read
// back from the log before the snapshot (backfillProducerBatches). When
// l.rebuildTxnFrom is set (recovery) the snapshot is taken at or below it
// and the scan also rebuilds the .txnindex of every segment from there on.
func (l *Log) loadProducerState(snaps []int64, leo int64) error {
	rebuild := l.rebuildTxnFrom
	l.rebuildTxnFrom = -1
	from := l.segs[0].base
	l.ps = newProducerState()
	l.psExpireMs = 0 // an expiry pass of a state not loaded yet: this load replaces it
	l.completing = nil
	for i := len(snaps) - 1; i >= 0; i-- {
		off := snaps[i]
		name := filepath.Join(l.dir, FileName(off, SnapshotSuffix))
		if off > leo {
			l.fsys.Remove(name)
			continue
		}
		if rebuild >= 0 && off > rebuild {
			continue
		}
		data, err := vfs.ReadFile(l.fsys, name)
		if err != nil {
			l.logger.Warn("unreadable producer snapshot", "file", name, "err", err)
			continue
		}
		ps, err := parseSnapshot(data)
		if err != nil {
			l.logger.Warn("corrupt producer snapshot; rebuilding by scan", "file", name, "err", err)
			continue
		}
		if off >= from {
			l.ps = ps
			from = off
			if err := l.backfillProducerBatches(off); err != nil {
				return fmt.Errorf("rebuild producer state: %w", err)
			}
		}
		break
	}
	// Rebuilt .txnindex entries by segment index.
	var rebuilt map[int][]AbortedTxn
	if rebuild >= 0 {
		rebuilt = map[int][]AbortedTxn{}
		for i, s := range l.segs {
			if s.base >= rebuild {
				rebuilt[i] = nil
			}
		}
	}
	if from < leo {
		t := l.ps.begin()
		err := l.scanBatches(from, leo, func(b record.Batch) error {
			pid := b.ProducerID()
			if pid < 0 {
				return nil
			}
			defer t.commit()
			if b.IsControl() {
				m, ok, err := parseMarker(b)
				if err != nil || !ok {
					return nil
				}
				first := t.applyMarker(pid, b.ProducerEpoch(), m, b.MaxTimestamp())
				if first < 0 || m.commit || rebuild < 0 || b.BaseOffset() < rebuild {
					return nil
				}
				t.commit()
				lso := l.ps.firstOpen()
				if lso < 0 {
					lso = b.BaseOffset() + 1
				}
				i := floorSegment(l.segs, b.BaseOffset())
				rebuilt[i] = append(rebuilt[i], AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: b.BaseOffset(), LastStableOffset: lso})
				return nil
			}
			first := b.BaseSequence()
			last := seqAdd(first, int64(b.LastOffsetDelta()))
			t.record(pid, b.ProducerEpoch(), batchMeta{firstSeq: first, lastSeq: last, firstOffset: b.BaseOffset(), lastOffset: b.LastOffset()}, b.MaxTimestamp())
			if b.IsTransactional() {
				t.openTxn(pid, b.BaseOffset())
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("rebuild producer state: %w", err)
		}
	}
	if len(rebuilt) == 0 {
		return nil
	}
	wrote := false
	for i, ents := range rebuilt {
		s := l.segs[i]
		s.setAbortedTxns(ents)
		if len(ents) == 0 {
			if _, err := l.fsys.Stat(s.path(TxnIndexSuffix)); errNotExist(err) {
				continue // nothing to write or remove
			}
		}
		// On a full disk the rebuilt entries stay in memory only.
		wrote = true
		if err := writeTxnIndex(l.fsys, s.path(TxnIndexSuffix), ents); err != nil {
			s.persistErr(err)
		}
	}
	if !wrote {
		return nil
	}
	return l.fsys.SyncDir(l.dir)
}

// scanBatches calls fn with the 61-byte header of every batch whose last
// offset is in [from, to), in order (writer side, under l.mu or at load).
// Control batches (transaction markers, small) are passed whole.
func (l *Log) scanBatches(from, to int64, fn func(record.Batch) error) error {
	hdr := make([]byte, record.HeaderSize)
	for i, s := range l.segs {
		next := to
		if i+1 < len(l.segs) {
			next = l.segs[i+1].base
		}
		if next <= from {
			continue
		}
		if s.base >= to {
			break
		}
		oi, _, err := s.indexes()
		if err != nil {
			return err
		}
		f, err := s.acquire()
		if err != nil {
			return err
		}
		var pos int64
		if from > s.base {
			_, p := lookupOffsetIndex(oi.snapshot(), from-s.base)
			pos = int64(p)
		}
		size := s.size.Load()
		for pos < size {
			h, err := readHeader(f.f, pos, hdr)
			if err != nil {
				f.Release()
				return err
			}
			if h.base >= to {
				break
			}
			if h.last >= from {
				b := record.Batch(hdr)
				if b.IsControl() && h.size <= maxControlBatch {
					full, err := readBatch(f, pos, h.size)
					if err != nil {
						f.Release()
						return fmt.Errorf("read control batch at %d of segment %d: %w", pos, s.base, err)
					}
					b = full
				}
				if err := fn(b); err != nil {
					f.Release()
					return err
				}
			}
			pos += h.size
		}
		f.Release()
	}
	return nil
}

// maxControlBatch bounds the control batches scanBatches reads whole (a
// marker is about 80 bytes).
const maxControlBatch = 64 << 10

// writeSnapshot persists the producer table as "<off>.snapshot".
func (l *Log) writeSnapshot(off int64) error { return l.writeSnapshotSync(off, true) }

// writeSnapshotSync writes the snapshot durably (tmp, fsync, rename,
// directory fsync) or, without sync, straight to its name for a later
// SyncFS to make durable: a crash before that leaves at worst a torn
// snapshot, which fails its CRC and gives way to an older one.
func (l *Log) writeSnapshotSync(off int64, sync bool) error {
	if err := l.loadProducers(); err != nil {
		return err
	}
	name := filepath.Join(l.dir, FileName(off, SnapshotSuffix))
	if !sync {
		return writeFileNoSync(l.fsys, name, l.ps.encodeSnapshot())
	}
	return vfs.WriteFileAtomic(l.fsys, name, l.ps.encodeSnapshot(), 0o644)
}
