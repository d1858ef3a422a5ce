package storage

// SyncNewDirs makes the directories of new, still empty logs durable ahead
// of their first record, so that record's group-commit round fsyncs its
// bytes only. A new partition's directory is otherwise made durable by
// the first sync of its log (load): partition.metadata, the leader epoch
// checkpoint and the directory fsynced one after the other, and the log
// dir fsynced, all in the round that acknowledges the first records. A
// produce spread over a thousand new partitions paid that on every first
// write (on a journaled ext4 each fsync is a journal commit: a first
// durable append took 4-5x a later one).
//
// It takes the logs that are eligible: empty, directory not yet synced,
// that sync not begun, and a leader epoch assigned but not yet written
// (AssignEpochs on an empty log leaves its file stale; Kafka's
// Partition.makeLeader assigns the epoch when the partition becomes
// leader, before any append). Their epoch checkpoints are written in place
// without fsync, as a first append would (writeEpochCheckpointForAppend);
// then one SyncFS per log dir makes every directory entry, partition.metadata
// and epoch file written before it durable; then each log whose epoch
// history did not change meanwhile counts its directory as synced. A log
// that got its first append meanwhile is synced by its round as before
// (the flags are cleared only when nothing they cover changed), so
// nothing is acknowledged before it is durable either way. A failed
// SyncFS changes nothing. Returns how many logs' directories it made
// durable.
func SyncNewDirs(logs []*Log) int {
	groups := map[*dirCheckpoints][]*Log{}
	var order []*dirCheckpoints
	for _, l := range logs {
		if l.ck == nil {
			continue
		}
		if _, ok := groups[l.ck]; !ok {
			order = append(order, l.ck)
		}
		groups[l.ck] = append(groups[l.ck], l)
	}
	n := 0
	for _, c := range order {
		n += syncNewDirsIn(c, groups[c])
	}
	return n
}

// syncNewDirsIn is SyncNewDirs for the logs of log dir c.
func syncNewDirsIn(c *dirCheckpoints, logs []*Log) int {
	vers := make([]newDirState, len(logs))
	ok := make([]bool, len(logs))
	any := false
	for i, l := range logs {
		vers[i], ok[i] = l.prepareNewDir()
		any = any || ok[i]
	}
	if !any {
		return 0
	}
	if err := c.syncAll(); err != nil {
		return 0
	}
	n := 0
	for i, l := range logs {
		if ok[i] && l.commitNewDir(vers[i]) {
			n++
		}
	}
	return n
}

// newDirState is what prepareNewDir saw: commitNewDir requires the same.
type newDirState struct {
	epochVer uint64
	cuts     uint64
	segs     int
}

// prepareNewDir writes the stale epoch checkpoint of an eligible log (see
// SyncNewDirs) in place and returns its state; false when the log is not
// eligible.
func (l *Log) prepareNewDir() (newDirState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.newDirEligible() || !l.epochStale || len(l.epochs.entries) == 0 {
		return newDirState{}, false
	}
	if err := l.writeEpochCheckpointForAppend(); err != nil {
		return newDirState{}, false // stays stale: the first append writes it
	}
	return l.newDirState(), true
}

// newDirEligible: l is open, empty and its new directory's first sync has
// not begun (l.mu held).
func (l *Log) newDirEligible() bool {
	return !l.closed && l.failed == nil && l.dirsUnsynced && l.epochNoSync && l.metaPending == nil &&
		l.mark.leo == l.logStart
}

func (l *Log) newDirState() newDirState {
	return newDirState{epochVer: l.epochVer, cuts: l.cuts, segs: len(l.segs)}
}

// commitNewDir counts l's directory as synced after a SyncFS that began
// after prepareNewDir, unless anything the SyncFS may have missed
// happened since: an append, a sync of its own begun, an epoch history,
// file, cut or segment change (st).
func (l *Log) commitNewDir(st newDirState) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.newDirEligible() || l.newDirState() != st {
		return false
	}
	l.dirsUnsynced, l.epochUnsynced, l.epochNoSync = false, false, false
	return true
}
