package storage

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strata-io/strata/internal/vfs"
)

// LeaderEpochFile is Kafka's per-partition leader epoch checkpoint:
// "0\n<n>\n" then n lines "<epoch> <startOffset>".
const LeaderEpochFile = "leader-epoch-checkpoint"

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// ParseEpochCheckpoint parses a leader-epoch-checkpoint file. Entries must
// have strictly increasing epochs and non-decreasing start offsets.
func ParseEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return nil, fmt.Errorf("%w: leader epoch checkpoint header", ErrBadCheckpoint)
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("%w: leader epoch checkpoint count %q for %d lines", ErrBadCheckpoint, lines[1], len(lines)-2)
	}
	out := make([]EpochEntry, 0, n)
	for _, ln := range lines[2:] {
		f := strings.Fields(ln)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: leader epoch line %q", ErrBadCheckpoint, ln)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, fmt.Errorf("%w: leader epoch line %q", ErrBadCheckpoint, ln)
		}
		if k := len(out); k > 0 && (int32(e) <= out[k-1].Epoch || o < out[k-1].StartOffset) {
			return nil, fmt.Errorf("%w: leader epoch line %q out of order", ErrBadCheckpoint, ln)
		}
		out = append(out, EpochEntry{Epoch: int32(e), StartOffset: o})
	}
	return out, nil
}

// FormatEpochCheckpoint renders entries in Kafka's format.
func FormatEpochCheckpoint(entries []EpochEntry) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return []byte(b.String())
}

// epochCache is the leader epoch history of a log (Kafka's
// LeaderEpochFileCache); guarded by Log.mu.
type epochCache struct {
	entries []EpochEntry
}

// assign records that epoch starts at off; only newer epochs are added.
// Entries starting at or past off go (they held no record), as Kafka's
// LeaderEpochFileCache.assign drops non-monotonic entries
// (maybeTruncateNonMonotonicEntries): a leader elected twice before
// anything was written leaves one entry, not two at the same offset.
func (c *epochCache) assign(epoch int32, off int64) bool {
	if epoch < 0 {
		return false
	}
	n := len(c.entries)
	if n > 0 && epoch <= c.entries[n-1].Epoch {
		return false
	}
	for n > 0 && c.entries[n-1].StartOffset >= off {
		n--
	}
	c.entries = append(c.entries[:n], EpochEntry{Epoch: epoch, StartOffset: off})
	return true
}

// truncateFromEnd drops epochs starting at or after leo.
func (c *epochCache) truncateFromEnd(leo int64) bool {
	i := len(c.entries)
	for i > 0 && c.entries[i-1].StartOffset >= leo {
		i--
	}
	changed := i != len(c.entries)
	c.entries = c.entries[:i]
	return changed
}

// truncateFromStart drops epochs wholly below logStart; the epoch holding
// logStart then starts there.
func (c *epochCache) truncateFromStart(logStart int64) bool {
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= logStart {
		i++
	}
	changed := i > 0
	c.entries = c.entries[i:]
	if len(c.entries) > 0 && c.entries[0].StartOffset < logStart {
		c.entries[0].StartOffset = logStart
		changed = true
	}
	return changed
}

// endOffsetFor follows Kafka's LeaderEpochFileCache.endOffsetFor.
func (c *epochCache) endOffsetFor(epoch int32, leo int64) (int32, int64) {
	return EndOffsetFor(c.entries, epoch, leo)
}

// EndOffsetFor is Kafka's LeaderEpochFileCache.endOffsetFor over a leader
// epoch history (entries in increasing epoch order) of a log ending at leo:
// the largest known epoch <= epoch and the start offset of the epoch after
// it (leo for the latest epoch; the first known start offset, with epoch
// itself, when epoch is older than every entry), or (-1, -1) when epoch is
// undefined, newer than every entry, or the history is empty.
func EndOffsetFor(entries []EpochEntry, epoch int32, leo int64) (int32, int64) {
	n := len(entries)
	if epoch < 0 || n == 0 {
		return -1, -1
	}
	if epoch == entries[n-1].Epoch {
		return epoch, leo
	}
	hi := -1
	for i, e := range entries {
		if e.Epoch > epoch {
			hi = i
			break
		}
	}
	if hi < 0 {
		return -1, -1
	}
	if hi == 0 {
		return epoch, entries[0].StartOffset
	}
	return entries[hi-1].Epoch, entries[hi].StartOffset
}

// writeEpochCheckpoint makes the file hold the history (l.mu held or the
// log not yet shared): tmp + fsync + rename + directory fsync, as Kafka's
// CheckpointFile.write with sync (LeaderEpochFileCache.assign writes so).
// A history equal to what the file holds (epochDisk) costs nothing.
func (l *Log) writeEpochCheckpoint() error {
	data := FormatEpochCheckpoint(l.epochs.entries)
	if l.epochDisk != nil && bytes.Equal(data, l.epochDisk) {
		l.epochStale = false
		return nil
	}
	l.epochVer++
	if err := vfs.WriteFileAtomic(l.fsys, filepath.Join(l.dir, LeaderEpochFile), data, 0o644); err != nil {
		l.epochUnknown()
		return err
	}
	l.epochDisk, l.epochStale = data, false
	return nil
}

// epochUnknown records that a failed write left the file's content
// unknown (the old history, the new one, or none durable): nothing is
// skipped as equal to it, and it is rewritten before the log end moves
// (a caller that rolls its change back in memory may leave the file
// naming an epoch at the log end).
func (l *Log) epochUnknown() {
	l.epochDisk, l.epochStale = nil, true
}

// writeEpochCheckpointForAppend persists the history after an append
// assigned a new epoch (l.mu held). In a new partition directory whose
// first sync has not begun (epochNoSync) the file is written in place
// without fsync, and that sync fsyncs it before the append's bytes count
// as durable; otherwise tmp + fsync + rename + directory fsync.
func (l *Log) writeEpochCheckpointForAppend() error {
	if !l.epochNoSync {
		return l.writeEpochCheckpoint()
	}
	data := FormatEpochCheckpoint(l.epochs.entries)
	l.epochVer++
	if err := writeFileNoSync(l.fsys, filepath.Join(l.dir, LeaderEpochFile), data); err != nil {
		l.epochUnknown()
		return err
	}
	l.epochDisk, l.epochStale = data, false
	l.epochUnsynced = true
	return nil
}

// loadEpochs reads the checkpoint, drops entries past leo and below the
// log start, and adds epochs seen in recovered batches (recovered).
//
// A log opened at startup (deferSync) writes nothing durable here:
//   - When only trailing epochs were dropped (an epoch started at the log
//     end and no record was written in it: every restart of an empty
//     partition), the file is left as it is (epochStale). Any load drops
//     those entries again, as long as the log end does not move past their
//     start, and writeLocked rewrites the file before it does. Kafka too
//     flushes truncateFromEnd lazily and relies on the next load's
//     truncateFromEnd for entries a crash kept (LeaderEpochFileCache.
//     truncateFromEndAsyncFlush). When the controller then gives the
//     partition back its epoch at the same offset, the history equals the
//     file again and nothing is written at all.
//   - Any other change (epochs recovered from batches, a new log start, a
//     rebuilt file) goes to leader-epoch-checkpoint.tmp without fsync; the
//     Syncer's StartJournal makes every such tmp durable with one SyncFS
//     of the log dir, renames them and runs a second SyncFS, before the
//     recovery points move and before anything is served (dirCheckpoints.
//     applyDeferred): a rename never reaches the disk ahead of its data.
func (l *Log) loadEpochs(leo int64, recovered []EpochEntry, fresh bool) error {
	var data []byte
	err := fs.ErrNotExist // a directory made by this open has no file
	if !fresh {
		data, err = vfs.ReadFile(l.fsys, filepath.Join(l.dir, LeaderEpochFile))
	}
	rewrite := false
	switch {
	case err == nil:
		ents, perr := ParseEpochCheckpoint(data)
		switch {
		case perr == nil:
			l.epochs.entries = ents
			l.epochDisk = data
		case l.recFull:
			// Torn or empty: written without fsync in a new directory
			// (writeEpochCheckpointForAppend) when the power was cut before
			// its first sync. Recovery read every batch of the log, so
			// recovered holds the whole history.
			l.logger.Warn("rebuilding an unreadable leader epoch checkpoint from the log", "err", perr)
			rewrite = true
		default:
			return perr
		}
	case !errNotExist(err):
		return err
	default:
		// No file is an empty history (a partition that never had a
		// record: its first append writes the file).
		l.epochDisk = FormatEpochCheckpoint(nil)
	}
	dropped := l.epochs.truncateFromEnd(leo)
	changed := rewrite
	for _, e := range recovered {
		if e.StartOffset < leo && l.epochs.assign(e.Epoch, e.StartOffset) {
			changed = true
		}
	}
	if l.epochs.truncateFromStart(l.logStart) {
		changed = true
	}
	l.epochVer++
	switch {
	case !changed && !dropped:
		return nil
	case !changed && l.deferSync:
		l.epochStale = true
		return nil
	case l.deferSync:
		data := FormatEpochCheckpoint(l.epochs.entries)
		if err := writeFileNoSync(l.fsys, filepath.Join(l.dir, LeaderEpochFile+".tmp"), data); err != nil {
			l.logger.Warn("cannot write leader epoch checkpoint at load; rewritten before the first append", "err", err)
			l.epochDisk, l.epochStale = nil, true
			return nil
		}
		l.epochDisk = data
		l.ck.deferRename(filepath.Join(l.dir, LeaderEpochFile))
		return nil
	}
	if err := l.writeEpochCheckpoint(); err != nil {
		// The history is rebuilt by the next recovery; a full disk must
		// not keep the log from opening.
		l.logger.Warn("cannot persist leader epoch checkpoint at load; kept in memory", "err", err)
	}
	return nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch from the log's leader
// epoch history: the largest known epoch <= epoch and the offset where the
// next epoch starts (the log end offset for the latest epoch); (-1, -1)
// when epoch is newer than every known epoch or nothing is known.
func (l *Log) EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epochs.endOffsetFor(epoch, l.mark.leo)
}

// LeaderEpochs returns a copy of the leader epoch history.
func (l *Log) LeaderEpochs() []EpochEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]EpochEntry(nil), l.epochs.entries...)
}
