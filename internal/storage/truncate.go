package storage

import (
	"fmt"
	"os"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
)

// TruncateTo removes every batch at or after offset, as a replica does when
// it truncates to its leader's epoch end offset. The cut is at the start of
// the batch holding offset, so the new log end offset (returned) may be
// below offset when offset is inside a batch. Later segments are deleted
// (renamed .deleted), the segment holding the cut becomes the active one,
// producer state, the leader epoch history and the .txnindex entries are
// rolled back with it.
func (l *Log) TruncateTo(offset int64) (newEnd int64, err error) {
	defer l.syncer.beginCut(l)()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil {
		return l.mark.leo, fmt.Errorf("truncate %s: log closed or failed: %w", l.dir, kerr.KafkaStorageError)
	}
	if offset >= l.mark.leo {
		// Nothing to cut, but an epoch that starts at the log end and
		// holds no record goes (Kafka's UnifiedLog.truncateTo "always
		// truncate epoch cache"): this replica led that epoch without
		// appending before another leader was elected. Kept, it is the
		// follower's last fetched epoch, the leader answers the same
		// diverging epoch at every fetch, and the follower never
		// catches up.
		if l.epochs.truncateFromEnd(l.mark.leo) {
			if err := l.writeEpochCheckpoint(); err != nil {
				return l.mark.leo, l.fail(err)
			}
		}
		return l.mark.leo, nil
	}
	if offset < l.logStart {
		return l.mark.leo, fmt.Errorf("truncate %s to %d below log start %d: %w", l.dir, offset, l.logStart, kerr.OffsetOutOfRange)
	}
	l.changed = true
	// Pending syncs first, so no closed segment is left half-durable.
	if err := l.flushLocked(); err != nil {
		return l.mark.leo, err
	}
	// The journal learns of the cut before the cut is durable: records of
	// bytes about to be cut are never replayed.
	if err := l.syncer.journalCut(l, offset); err != nil {
		return l.mark.leo, l.fail(err)
	}
	l.cuts++
	i := floorSegment(l.segs, offset)
	target := l.segs[i]
	pos, end, err := l.cutPoint(target, offset)
	if err != nil {
		return l.mark.leo, l.fail(err)
	}
	// A batch straddling the log start goes whole; the log then restarts
	// empty at the log start.
	end = max(end, l.logStart)
	// The recovery point goes below the cut, durably, before anything is
	// cut or removed: the cut of the target is fsynced before the removal
	// of the later segments is, and a crash in between with the old
	// recovery point kept the later segments past a hole below the
	// recovery point, where recovery does not look. From a recovery point
	// at or below the cut, recovery reads the target's end and removes the
	// segments past the gap (Kafka's LogManager.truncateTo checkpoints the
	// recovery points after truncating).
	l.recoveryPoint.Store(min(l.recoveryPoint.Load(), end))
	if err := l.setRecoveryPoint(min(l.ckptRecovery, end), true); err != nil {
		return l.mark.leo, l.fail(err)
	}
	// The current active segment stops being written.
	if l.active != target {
		if err := l.closeActiveFiles(l.active, true, false); err != nil {
			return l.mark.leo, l.fail(err)
		}
	}
	dead := append([]*segment(nil), l.segs[i+1:]...)
	l.segs = append([]*segment(nil), l.segs[:i+1]...)
	var files []string
	for _, s := range dead {
		s.markDeleted()
		for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
			from := s.path(suf)
			if err := l.fsys.Rename(from, from+DeletedSuffix); err == nil {
				files = append(files, from+DeletedSuffix)
			}
		}
	}
	// Cut the target segment and make it the active one again.
	// Its own read-write descriptor: the cached one of a closed segment
	// is read-only.
	f, err := l.fsys.OpenFile(target.path(LogSuffix), os.O_RDWR, 0)
	if err != nil {
		return l.mark.leo, l.fail(err)
	}
	err = f.Truncate(pos)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return l.mark.leo, l.fail(fmt.Errorf("truncate segment %d: %w", target.base, err))
	}
	target.size.Store(pos)
	target.tsKnown.Store(false)
	target.firstKnown.Store(false)
	target.mu.Lock()
	target.oi, target.ti = nil, nil // rebuilt from the cut .log below
	target.mu.Unlock()
	if err := removeIndexFiles(l, target); err != nil {
		return l.mark.leo, l.fail(err)
	}
	// Aborted transactions whose marker is cut go too.
	if ents := target.abortedTxns(); len(ents) > 0 {
		k := sort.Search(len(ents), func(i int) bool { return ents[i].LastOffset >= end })
		kept := append([]AbortedTxn(nil), ents[:k]...)
		if err := writeTxnIndex(l.fsys, target.path(TxnIndexSuffix), kept); err != nil {
			return l.mark.leo, l.fail(err)
		}
		target.setAbortedTxns(kept)
	}
	if err := l.openActive(0); err != nil {
		return l.mark.leo, l.fail(err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return l.mark.leo, l.fail(err)
	}
	l.mark = writeMark{leo: end, base: target.base, pos: pos}
	l.forgetBatchEnds(end)
	if l.synced.leo > end {
		l.synced = l.mark
	}
	if l.flushed.leo > end {
		l.flushed = l.mark
	}
	if l.epochs.truncateFromEnd(end) {
		if err := l.writeEpochCheckpoint(); err != nil {
			return l.mark.leo, l.fail(err)
		}
	}
	snaps, err := l.listSnapshots()
	if err != nil {
		return l.mark.leo, l.fail(err)
	}
	if err := l.loadProducerState(snaps, end); err != nil {
		return l.mark.leo, l.fail(err)
	}
	l.lsoPos.Store(nil) // offsets past the cut may be rewritten elsewhere
	l.publishView(true)
	l.checkInvariants(true)
	l.deleteLater(files, l.cfg.Load().FileDeleteDelay)
	return end, nil
}

// cutPoint returns the byte position of the batch holding offset in s (or
// of the first batch after it) and that batch's base offset.
func (l *Log) cutPoint(s *segment, offset int64) (pos, base int64, err error) {
	oi, _, err := s.indexes()
	if err != nil {
		return 0, 0, err
	}
	f, err := s.acquire()
	if err != nil {
		return 0, 0, err
	}
	defer f.Release()
	if offset > s.base {
		_, p := lookupOffsetIndex(oi.snapshot(), offset-s.base)
		pos = int64(p)
	}
	size := s.size.Load()
	hdr := make([]byte, record.HeaderSize)
	for pos < size {
		h, err := readHeader(f.f, pos, hdr)
		if err != nil {
			return 0, 0, fmt.Errorf("truncate: segment %d at %d: %w", s.base, pos, err)
		}
		if h.last >= offset {
			return pos, min(h.base, offset), nil
		}
		pos += h.size
	}
	return size, offset, nil
}

func removeIndexFiles(l *Log, s *segment) error {
	for _, suf := range []string{IndexSuffix, TimeIndexSuffix} {
		if err := l.fsys.Remove(s.path(suf)); err != nil && !errNotExist(err) {
			return err
		}
	}
	return nil
}
