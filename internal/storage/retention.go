package storage

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DeleteRecords advances the log start offset to before (-1 = high
// watermark); whole segments below it are removed by retention. before >
// high watermark wraps kerr.OffsetOutOfRange.
func (l *Log) DeleteRecords(before int64) (newLogStart int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.v.Load()
	if before == -1 {
		before = v.hw
	}
	if before < 0 || before > v.hw {
		return l.logStart, fmt.Errorf("delete records of %s before %d: high watermark %d: %w", l.dir, before, v.hw, kerr.OffsetOutOfRange)
	}
	if before <= l.logStart {
		return l.logStart, nil
	}
	if err := l.writeLogStartCheckpoint(before); err != nil {
		return l.logStart, fmt.Errorf("delete records of %s: %v: %w", l.dir, err, kerr.KafkaStorageError)
	}
	l.logStart = before
	l.publish()
	l.checkInvariants(true)
	if l.epochs.truncateFromStart(before) {
		if err := l.writeEpochCheckpoint(); err != nil {
			l.logger.Warn("leader epoch checkpoint", "err", err)
		}
	}
	return before, nil
}

// ApplyRetention deletes whole closed segments, oldest first, breaching
// retention.ms / retention.bytes (when cfg.Delete) or the log start offset;
// they are renamed .deleted and unlinked after file.delete.delay.ms.
func (l *Log) ApplyRetention(now time.Time) (deleted int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil {
		return 0, nil
	}
	cfg := l.cfg.Load()
	v := l.v.Load()
	var total int64
	for _, s := range l.segs {
		total += s.size.Load()
	}
	sizeExcess := int64(-1)
	if cfg.Delete && cfg.RetentionBytes >= 0 {
		sizeExcess = total - cfg.RetentionBytes
	}
	nowMs := now.UnixMilli()
	n := 0
	for i, s := range l.segs {
		next := v.leo
		if i+1 < len(l.segs) {
			next = l.segs[i+1].base
		}
		if v.hw < next || (s.size.Load() == 0 && i == len(l.segs)-1) {
			break
		}
		ok := next <= l.logStart
		if !ok && cfg.Delete && cfg.RetentionMs >= 0 {
			ts, _, err := s.maxTimestamp()
			if err != nil {
				return 0, err
			}
			if ts < 0 {
				ts = l.segmentMtime(s)
			}
			ok = nowMs-ts > cfg.RetentionMs
		}
		if !ok && sizeExcess > 0 && s.size.Load() <= sizeExcess {
			ok = true
		}
		if !ok {
			break
		}
		if sizeExcess > 0 {
			sizeExcess -= s.size.Load()
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if n == len(l.segs) {
		// Everything is deletable: roll so the active data can go too.
		if err := l.rollLocked(); err != nil {
			return 0, err
		}
	}
	return n, l.deleteSegmentsLocked(l.segs[:n], l.segs[n].base)
}

func (l *Log) segmentMtime(s *segment) int64 {
	st, err := l.fsys.Stat(s.path(LogSuffix))
	if err != nil {
		return 0
	}
	return st.ModTime().UnixMilli()
}

// deleteSegmentsLocked removes a prefix of segments: the log start moves
// to newStart, readers stop seeing them, the files are renamed .deleted
// and unlinked after file.delete.delay.ms (open readers keep reading).
func (l *Log) deleteSegmentsLocked(dead []*segment, newStart int64) error {
	cfg := l.cfg.Load()
	if err := l.loadProducers(); err != nil {
		return err // from the batches of the segments as the open found them
	}
	if newStart > l.logStart {
		l.logStart = newStart
		if err := l.writeLogStartCheckpoint(newStart); err != nil {
			return l.fail(err)
		}
	}
	l.segs = append([]*segment(nil), l.segs[len(dead):]...)
	l.publish()
	l.checkInvariants(true)
	if l.epochs.truncateFromStart(l.logStart) {
		if err := l.writeEpochCheckpoint(); err != nil {
			l.logger.Warn("leader epoch checkpoint", "err", err)
		}
	}
	var files []string
	for _, s := range dead {
		s.markDeleted()
		for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
			from := s.path(suf)
			if err := l.fsys.Rename(from, from+DeletedSuffix); err != nil {
				if !errNotExist(err) {
					l.logger.Warn("rename segment file for deletion", "file", from, "err", err)
				}
				continue
			}
			files = append(files, from+DeletedSuffix)
		}
	}
	// Producer snapshots below the new first segment are no longer needed
	// (the newest one is always kept).
	l.pruneSnapshots(l.segs[0].base)
	l.deleteLater(files, cfg.FileDeleteDelay)
	return nil
}

// listSnapshots returns the offsets of the producer snapshots, sorted.
func (l *Log) listSnapshots() ([]int64, error) {
	ents, err := l.fsys.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var snaps []int64
	for _, e := range ents {
		if hasSuffix(e.Name(), SnapshotSuffix) {
			if b, ok := parseBase(e.Name()); ok {
				snaps = append(snaps, b)
			}
		}
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i] < snaps[j] })
	return snaps, nil
}

func (l *Log) pruneSnapshots(below int64) {
	snaps, err := l.listSnapshots()
	if err != nil {
		return
	}
	for i, b := range snaps {
		if b < below && i < len(snaps)-1 {
			l.fsys.Remove(filepath.Join(l.dir, FileName(b, SnapshotSuffix)))
		}
	}
}

// MaybeRoll rolls the active segment if it is non-empty and older than
// segment.ms (Strata rolls idle segments; Kafka only rolls on append). It
// also runs the flush.ms policy (non-durable mode) and expires idle
// producer ids; the broker calls it from its periodic background check.
func (l *Log) MaybeRoll(now time.Time) (rolled bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil {
		return false, nil
	}
	cfg := l.cfg.Load()
	nowMs := now.UnixMilli()
	if l.ps != nil {
		l.ps.expire(nowMs, l.pidExpiration.Milliseconds())
	} else {
		l.psExpireMs = nowMs // not loaded yet: its load expires as of now
	}
	if !cfg.Durable && l.dirty && cfg.FlushMs != 1<<63-1 && sinceMs(now, l.lastFlush) >= cfg.FlushMs {
		if err := l.flushLocked(); err != nil {
			return false, err
		}
	}
	s := l.active
	if s.size.Load() == 0 {
		return false, nil
	}
	// Wall-clock age (since the segment was created, or last written before
	// a restart): record timestamps may be arbitrarily old or in the future.
	age := nowMs - s.createdMs
	if age <= cfg.maxSegmentMs()-s.jitterMs {
		return false, nil
	}
	if err := l.rollLocked(); err != nil {
		return false, err
	}
	return true, nil
}

// Segments lists the segments in offset order.
func (l *Log) Segments() []SegmentInfo {
	v := l.v.Load()
	out := make([]SegmentInfo, 0, len(v.segs))
	for i, s := range v.segs {
		next := v.leo
		if i+1 < len(v.segs) {
			next = v.segs[i+1].base
		}
		ts, _, err := s.maxTimestamp()
		if err != nil || ts < 0 {
			ts = l.segmentMtime(s)
		}
		first := int64(-1)
		if s.firstKnown.Load() {
			first = s.firstTs.Load()
		} else if s.size.Load() > 0 {
			if f, err := s.acquire(); err == nil {
				var hdr [61]byte
				if h, err := readHeader(f.f, 0, hdr[:]); err == nil {
					first = h.maxTs
					s.firstTs.Store(first)
					s.firstKnown.Store(true)
				}
				f.Release()
			}
		}
		out = append(out, SegmentInfo{
			BaseOffset: s.base, NextOffset: next, Size: s.size.Load(),
			LargestTimestamp: ts, FirstTimestamp: first, Active: i == len(v.segs)-1,
		})
	}
	return out
}

// ActiveProducerLastBatches returns, per producer id with live state, the
// last offset of its last data batch: the cleaner keeps those batches.
func (l *Log) ActiveProducerLastBatches() map[int64]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadProducers(); err != nil {
		return nil
	}
	return l.ps.lastBatches()
}

// LastStableOffset is the offset READ_COMMITTED consumers may read up to:
// the first offset of the oldest transaction that is open or whose marker
// is not yet below the high watermark, or the high watermark when there is
// none.
func (l *Log) LastStableOffset() int64 { return l.readerView().lso() }
