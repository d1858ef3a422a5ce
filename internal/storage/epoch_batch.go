package storage

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/strata-io/strata/internal/parallel"
	"github.com/twmb/franz-go/pkg/kerr"
)

// epochBatchWorkers bounds the goroutines writing or renaming one batch's
// checkpoint files (small files; the SyncFS calls dominate).
const epochBatchWorkers = 8

// epochWrite is one log's part of an AssignEpochs batch.
type epochWrite struct {
	i       int          // index into the caller's slices
	next    []EpochEntry // the history with the new epoch
	data    []byte       // its file content
	ver     uint64       // l.epochVer when the tmp file was written
	leo     int64        // the log end the new epoch starts at
	renamed bool
}

// AssignEpochs is AssignEpoch for many logs at once (the leader epochs of
// a restart's or an election's many partitions): epochs[i] starts at the
// log end of logs[i]. The leader epoch checkpoint writes of each log dir
// share two SyncFS calls instead of two fsyncs per log:
//
//  1. every changed log's history goes to "leader-epoch-checkpoint.tmp"
//     without fsync (Kafka's CheckpointFile.write: temp file, then an
//     atomic move over the checkpoint);
//  2. one SyncFS of the log dir makes every tmp's data durable;
//  3. every tmp is renamed over its checkpoint;
//  4. a second SyncFS makes the renames durable;
//  5. only then each log's history holds the new epoch (LatestEpoch,
//     OffsetForLeaderEpoch, appends at it).
//
// The order matters on a real file system: renamed before step 2, the
// rename's journal commit may reach the disk before the file's data, and a
// power cut leaves an empty checkpoint (vfs.CrashFS.CrashEntriesFirst
// models it; TestAssignEpochsCrashAtEveryStep cuts the power at every
// step). A caller publishes the leadership that makes records of the new
// epoch acceptable only after AssignEpochs returned, so no record of the
// epoch is acknowledged before the entry that names it is durable
// (Kafka's makeLeader assigns the epoch before the partition takes
// appends). A history that would not change (an epoch not newer than the
// latest) or that equals what the file holds already costs no write.
//
// It returns one error per log (nil: assigned and durable, or nothing to
// do). A log whose history or file changed between the steps (a
// concurrent append or truncation) falls back to AssignEpoch.
func AssignEpochs(logs []*Log, epochs []int32) []error {
	errs := make([]error, len(logs))
	groups := map[*dirCheckpoints][]int{}
	var order []*dirCheckpoints
	for i, l := range logs {
		if l.ck == nil {
			errs[i] = l.AssignEpoch(epochs[i])
			continue
		}
		if _, ok := groups[l.ck]; !ok {
			order = append(order, l.ck)
		}
		groups[l.ck] = append(groups[l.ck], i)
	}
	for _, c := range order {
		assignEpochsIn(c, logs, epochs, groups[c], errs)
	}
	return errs
}

// assignEpochsIn runs AssignEpochs' steps for the logs idx of log dir c.
func assignEpochsIn(c *dirCheckpoints, logs []*Log, epochs []int32, idx []int, errs []error) {
	writes := make([]*epochWrite, len(idx))
	parallel.ForEach(len(idx), epochBatchWorkers, func(k int) error {
		i := idx[k]
		w, err := logs[i].prepareEpoch(epochs[i])
		if err != nil {
			errs[i] = err
			return nil
		}
		if w != nil {
			w.i = i
			writes[k] = w
		}
		return nil
	})
	writes = slices.DeleteFunc(writes, func(w *epochWrite) bool { return w == nil })
	if len(writes) == 0 {
		return
	}
	failAll := func(err error) {
		for _, w := range writes {
			errs[w.i] = fmt.Errorf("assign epoch %d to %s: %v: %w", epochs[w.i], logs[w.i].dir, err, kerr.KafkaStorageError)
		}
	}
	if err := c.syncAll(); err != nil {
		failAll(err)
		return
	}
	parallel.ForEach(len(writes), epochBatchWorkers, func(k int) error {
		w := writes[k]
		if err := logs[w.i].renameEpoch(w); err != nil {
			errs[w.i] = fmt.Errorf("assign epoch %d to %s: %v: %w", epochs[w.i], logs[w.i].dir, err, kerr.KafkaStorageError)
		}
		return nil
	})
	if err := c.syncAll(); err != nil {
		failAll(err)
		for _, w := range writes {
			if w.renamed {
				logs[w.i].lockedEpochUnknown()
			}
		}
		return
	}
	parallel.ForEach(len(writes), epochBatchWorkers, func(k int) error {
		w := writes[k]
		if errs[w.i] == nil {
			errs[w.i] = logs[w.i].commitEpoch(w, epochs[w.i])
		}
		return nil
	})
}

// prepareEpoch is AssignEpochs' step 1 for l: nil when nothing is to be
// written (the epoch is not newer, or the file holds the new history
// already, which then is the history at once).
func (l *Log) prepareEpoch(epoch int32) (*epochWrite, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil {
		return nil, fmt.Errorf("assign epoch %d to %s: log closed or failed: %w", epoch, l.dir, kerr.KafkaStorageError)
	}
	next := epochCache{entries: slices.Clone(l.epochs.entries)}
	if !next.assign(epoch, l.mark.leo) {
		return nil, nil
	}
	// No record of an older epoch may land past l.mark.leo from here on
	// (epochFence): the new entry names it as the epoch's start.
	l.epochFence = max(l.epochFence, epoch)
	data := FormatEpochCheckpoint(next.entries)
	if l.epochDisk != nil && bytes.Equal(data, l.epochDisk) {
		l.epochs = next
		l.epochStale = false
		l.epochVer++
		return nil, nil
	}
	if l.mark.leo == l.logStart && l.epochFileAtOrPast(l.mark.leo) {
		// An empty log whose file names no epoch below its end: every
		// load drops what the file and the new history hold (all at or
		// past the end), so the file is left stale and writeLocked
		// writes it before the first record, the only thing an epoch
		// entry has to be durable for. No record of the epoch can be
		// acknowledged before that write.
		l.epochs = next
		l.epochStale = true
		l.epochVer++
		return nil, nil
	}
	name := filepath.Join(l.dir, LeaderEpochFile)
	if err := writeFileNoSync(l.fsys, name+".tmp", data); err != nil {
		return nil, fmt.Errorf("assign epoch %d to %s: %v: %w", epoch, l.dir, err, kerr.KafkaStorageError)
	}
	return &epochWrite{next: next.entries, data: data, ver: l.epochVer, leo: l.mark.leo}, nil
}

// epochFileAtOrPast reports whether every entry the file holds starts at
// or past off (false when the file's content is not known).
func (l *Log) epochFileAtOrPast(off int64) bool {
	if l.epochDisk == nil {
		return false
	}
	ents, err := ParseEpochCheckpoint(l.epochDisk)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.StartOffset < off {
			return false
		}
	}
	return true
}

// renameEpoch is step 3: the durable tmp replaces the checkpoint, unless
// the history or file changed since step 1 (commitEpoch then falls back).
func (l *Log) renameEpoch(w *epochWrite) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.epochVer != w.ver || l.mark.leo != w.leo {
		return nil
	}
	name := filepath.Join(l.dir, LeaderEpochFile)
	// Until step 5 the file holds what memory does not: no write may be
	// skipped as equal to it.
	l.epochDisk = nil
	if err := l.fsys.Rename(name+".tmp", name); err != nil {
		l.epochUnknown()
		return err
	}
	w.renamed = true
	return nil
}

// lockedEpochUnknown is epochUnknown taking l.mu: the renamed file may
// not be durable and memory does not hold its epoch.
func (l *Log) lockedEpochUnknown() {
	l.mu.Lock()
	l.epochUnknown()
	l.epochVer++
	l.mu.Unlock()
}

// commitEpoch is step 5: the history takes the new epoch, now durable.
// When something changed the history or the file between the steps, the
// epoch is assigned again the usual way (fsync'd).
func (l *Log) commitEpoch(w *epochWrite, epoch int32) error {
	l.mu.Lock()
	if w.renamed && l.epochVer == w.ver && l.mark.leo == w.leo && !l.closed {
		l.epochs.entries = w.next
		l.epochDisk, l.epochStale = w.data, false
		l.epochVer++
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	return l.AssignEpoch(epoch)
}
