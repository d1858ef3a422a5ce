package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"sort"
	"sync"

	"github.com/strata-io/strata/internal/vfs"
)

// Kafka keeps one recovery-point-offset-checkpoint and one
// log-start-offset-checkpoint at the root of each log dir, listing every
// partition of the dir. dirCheckpoints is that pair for one log dir: the
// logs of the dir (which share a Syncer) set their entries in memory and
// the files are rewritten whole (tmp + fsync + rename + dir fsync)
// whenever a value must be durable: the log start offset at once when it
// advances, the recovery point after rolls and group-commit rounds that
// completed a rolled segment, and both at Syncer.WriteCheckpoints (the
// broker's log.flush.offset.checkpoint.interval.ms loop) and Syncer.Close.
//
// The third file, replication-offset-checkpoint, is Kafka's high watermark
// checkpoint (ReplicaManager.checkpointHighWatermarks): the high watermark
// of every replicated log of the dir, written every
// replica.high.watermark.checkpoint.interval.ms (Syncer.WriteHighWatermarks)
// and at shutdown, in the same format. Its values are read from the logs
// when it is written (repl), not set at every change of a high watermark.
// A replicated log reopens at the value found there (Open), so that a
// restarted replica never takes its own log end for committed.

// Checkpoint kinds.
const (
	ckRecovery = iota
	ckLogStart
	ckReplication
	ckKinds
)

var ckNames = [ckKinds]string{RecoveryPointFile, LogStartOffsetFile, ReplicationOffsetFile}

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

type dirCheckpoints struct {
	fsys   vfs.FS
	dir    string
	logger *slog.Logger
	// merge: the registry belongs to a single log's private Syncer, so
	// other logs of the dir may write the files too: a write keeps the
	// file's entries of partitions this registry never touched.
	merge bool

	loadOnce sync.Once
	loadErr  error

	mu    sync.Mutex
	ready bool // files loaded without error
	ents  [ckKinds]map[tp]int64
	owned map[tp]bool // partitions set or removed through this registry (merge only)
	// repl are the logs whose high watermark replication decides: their
	// ckReplication entries are refreshed from them at each write.
	repl      map[tp]*Log
	version   [ckKinds]uint64
	urgent    [ckKinds]uint64 // version of the last change to write soon
	persisted [ckKinds]uint64
	writeMu   [ckKinds]sync.Mutex
	// deferred are the recovery points of logs closed without fsync
	// (Log.CloseDeferSync), applied after one SyncFS of the dir.
	deferred []deferredPoint
	// renames are files written to "<name>.tmp" without fsync: leader
	// epoch checkpoints of logs opened with DeferSync (loadEpochs) and
	// index files of logs closed with CloseDeferSync (closeActiveFiles).
	// applyDeferred renames them, in order, between two SyncFS of the dir.
	renames []string
	// syncFS flushes the whole file system of the dir; opened when the
	// files are loaded, so it reports write-back errors since then.
	syncFS vfs.SyncFS
}

type deferredPoint struct {
	key tp
	off int64
}

func newDirCheckpoints(fsys vfs.FS, dir string, logger *slog.Logger, merge bool) *dirCheckpoints {
	c := &dirCheckpoints{fsys: fsys, dir: dir, logger: logger, merge: merge, repl: map[tp]*Log{}}
	if merge {
		c.owned = map[tp]bool{}
	}
	for k := range c.ents {
		c.ents[k] = map[tp]int64{}
	}
	return c
}

// load reads both files once. Entries of partitions without a directory
// (a topic deleted before the files were rewritten) are dropped.
func (c *dirCheckpoints) load() error {
	c.loadOnce.Do(func() {
		ents, err := c.fsys.ReadDir(c.dir)
		if err != nil && !errNotExist(err) {
			c.loadErr = fmt.Errorf("read log dir %s: %w", c.dir, err)
			return
		}
		present := map[tp]bool{}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			if t, p, err := ParsePartitionDir(e.Name()); err == nil {
				present[tp{t, p}] = true
			}
		}
		for k, name := range ckNames {
			es, err := ReadCheckpoint(c.fsys, filepath.Join(c.dir, name))
			if err != nil {
				c.loadErr = err
				return
			}
			c.mu.Lock()
			for _, e := range es {
				if key := (tp{e.Topic, e.Partition}); present[key] {
					c.ents[k][key] = e.Offset
				}
			}
			c.mu.Unlock()
		}
		sfs, err := c.fsys.OpenSyncFS(c.dir)
		if err != nil && !errNotExist(err) {
			c.loadErr = fmt.Errorf("open log dir %s: %w", c.dir, err)
			return
		}
		c.mu.Lock()
		c.syncFS = sfs
		c.ready = true
		c.mu.Unlock()
	})
	return c.loadErr
}

// deferRename records that name+".tmp" holds the content (a leader
// epoch checkpoint, an index file) that replaces name once applyDeferred
// made it durable.
func (c *dirCheckpoints) deferRename(name string) {
	c.mu.Lock()
	c.renames = append(c.renames, name)
	c.mu.Unlock()
}

// applyDeferred makes the dir durable with one SyncFS when logs were
// opened or closed without fsync, then sets their recovery points.
//
// Leader epoch checkpoints written at open and index files written at
// close (renames) take two-phase steps, as Kafka's CheckpointFile.write
// (tmp, fsync, atomic move, fsync of the directory) does for one file:
// the first SyncFS makes every tmp's
// data durable, then they are renamed, and a second SyncFS makes the
// renames durable, all before the recovery points move past the batches
// whose epochs they record. Renamed before the first SyncFS, a file
// system that commits the rename ahead of the data (ext4 without
// auto_da_alloc, xfs) could leave an empty checkpoint after a power cut.
func (c *dirCheckpoints) applyDeferred() error {
	c.mu.Lock()
	d := c.deferred
	c.deferred = nil
	renames := c.renames
	c.renames = nil
	sfs := c.syncFS
	c.mu.Unlock()
	if len(d) == 0 && len(renames) == 0 {
		return nil
	}
	if sfs == nil {
		// The dir did not exist when the files were loaded.
		var err error
		if sfs, err = c.fsys.OpenSyncFS(c.dir); err != nil {
			return fmt.Errorf("log dir %s: make %d closed logs durable: %w", c.dir, len(d), err)
		}
		c.mu.Lock()
		c.syncFS = sfs
		c.mu.Unlock()
	}
	if err := sfs.Sync(); err != nil {
		return fmt.Errorf("syncfs of log dir %s: %w", c.dir, err)
	}
	if len(renames) > 0 {
		for _, name := range renames {
			if err := c.fsys.Rename(name+".tmp", name); err != nil {
				return fmt.Errorf("log dir %s: deferred rename: %w", c.dir, err)
			}
		}
		if err := sfs.Sync(); err != nil {
			return fmt.Errorf("syncfs of log dir %s: %w", c.dir, err)
		}
	}
	for _, p := range d {
		c.set(ckRecovery, p.key, p.off, false)
	}
	return nil
}

// syncAll makes every file and directory of the log dir's file system
// durable with one SyncFS.
func (c *dirCheckpoints) syncAll() error {
	c.mu.Lock()
	sfs := c.syncFS
	c.mu.Unlock()
	if sfs == nil {
		var err error
		if sfs, err = c.fsys.OpenSyncFS(c.dir); err != nil {
			return fmt.Errorf("log dir %s: %w", c.dir, err)
		}
		c.mu.Lock()
		if c.syncFS == nil {
			c.syncFS = sfs
		} else {
			sfs.Close()
			sfs = c.syncFS
		}
		c.mu.Unlock()
	}
	if err := sfs.Sync(); err != nil {
		return fmt.Errorf("syncfs of log dir %s: %w", c.dir, err)
	}
	return nil
}

func (c *dirCheckpoints) closeSyncFS() {
	c.mu.Lock()
	sfs := c.syncFS
	c.syncFS = nil
	c.mu.Unlock()
	if sfs != nil {
		sfs.Close()
	}
}

func (c *dirCheckpoints) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// get returns the entry of key, -1 when absent.
func (c *dirCheckpoints) get(kind int, key tp) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.ents[kind][key]; ok {
		return v
	}
	return -1
}

// own records (c.mu held) that key's entries are this registry's to
// write. Only a merging registry needs to know (persist keeps the file's
// other entries); a dir's shared registry writes all entries, so it keeps
// no set of ten thousand partitions.
func (c *dirCheckpoints) own(key tp) {
	if c.merge {
		c.owned[key] = true
	}
}

// set changes an entry in memory (persist makes it durable); urgent asks
// the end of the next group-commit round to write the file.
func (c *dirCheckpoints) set(kind int, key tp, off int64, urgent bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.own(key)
	if v, ok := c.ents[kind][key]; ok && v == off {
		return
	}
	c.ents[kind][key] = off
	c.version[kind]++
	if urgent {
		c.urgent[kind] = c.version[kind]
	}
}

// remove drops the entries of key (deleted partition or new directory).
func (c *dirCheckpoints) remove(key tp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.own(key)
	delete(c.repl, key)
	for k := range c.ents {
		if _, ok := c.ents[k][key]; ok {
			delete(c.ents[k], key)
			c.version[k]++
		}
	}
}

// dirty reports whether a file lags behind memory (urgentOnly: behind an
// urgent change).
func (c *dirCheckpoints) dirty(kind int, urgentOnly bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if urgentOnly {
		return c.persisted[kind] < c.urgent[kind]
	}
	return c.persisted[kind] < c.version[kind]
}

// persist rewrites the file of kind if memory changed since the last
// write (or always when force). Concurrent callers share one write.
func (c *dirCheckpoints) persist(kind int, force bool) error {
	c.writeMu[kind].Lock()
	defer c.writeMu[kind].Unlock()
	c.mu.Lock()
	if kind == ckReplication {
		c.refreshLocked()
		if c.version[kind] == 0 && len(c.ents[kind]) == 0 {
			// No replicated log here, ever: no file (a single node's log
			// dirs stay as they were).
			c.mu.Unlock()
			return nil
		}
	}
	v := c.version[kind]
	if !force && c.persisted[kind] >= v {
		c.mu.Unlock()
		return nil
	}
	mine := make(map[tp]int64, len(c.ents[kind]))
	for key, off := range c.ents[kind] {
		mine[key] = off
	}
	var owned map[tp]bool
	if c.merge {
		owned = make(map[tp]bool, len(c.owned))
		for key := range c.owned {
			owned[key] = true
		}
	}
	c.mu.Unlock()
	name := filepath.Join(c.dir, ckNames[kind])
	if c.merge {
		old, err := ReadCheckpoint(c.fsys, name)
		if err != nil {
			return err
		}
		for _, e := range old {
			if key := (tp{e.Topic, e.Partition}); !owned[key] {
				mine[key] = e.Offset
			}
		}
	}
	out := make([]CheckpointEntry, 0, len(mine))
	for key, off := range mine {
		out = append(out, CheckpointEntry{Topic: key.topic, Partition: key.partition, Offset: off})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	if err := WriteCheckpoint(c.fsys, name, out); err != nil {
		return err
	}
	c.mu.Lock()
	c.persisted[kind] = max(c.persisted[kind], v)
	c.mu.Unlock()
	return nil
}

// track makes l's high watermark the ckReplication entry of key from the
// next write on (l's replication decides it).
func (c *dirCheckpoints) track(key tp, l *Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.own(key)
	c.repl[key] = l
}

// untrack stops reading l's high watermark: its entry becomes hw (a log
// closing), or goes (hw < 0: the log is no longer replicated).
func (c *dirCheckpoints) untrack(key tp, l *Log, hw int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.repl[key] != l {
		return
	}
	delete(c.repl, key)
	c.own(key)
	if cur, ok := c.ents[ckReplication][key]; hw < 0 && ok {
		delete(c.ents[ckReplication], key)
		c.version[ckReplication]++
	} else if hw >= 0 && (!ok || cur != hw) {
		c.ents[ckReplication][key] = hw
		c.version[ckReplication]++
	}
}

// refreshLocked copies the tracked logs' high watermarks into the
// ckReplication entries (under c.mu; a view load each, no log lock).
func (c *dirCheckpoints) refreshLocked() {
	for key, l := range c.repl {
		hw := l.HighWatermark()
		if cur, ok := c.ents[ckReplication][key]; !ok || cur != hw {
			c.ents[ckReplication][key] = hw
			c.version[ckReplication]++
		}
	}
}

// WriteHighWatermarks rewrites the replication-offset-checkpoint of every
// log dir whose logs use this syncer when a replicated log's high
// watermark changed since the last write (the broker calls it every
// replica.high.watermark.checkpoint.interval.ms, as Kafka's ReplicaManager
// schedules checkpointHighWatermarks; WriteCheckpoints and Close write it
// too).
func (s *Syncer) WriteHighWatermarks() error {
	var errs []error
	for _, c := range s.registries() {
		errs = append(errs, c.persist(ckReplication, false))
	}
	return errors.Join(errs...)
}

// persistAll writes every file (force: even when unchanged).
func (c *dirCheckpoints) persistAll(force bool) error {
	var errs []error
	for k := range ckNames {
		errs = append(errs, c.persist(k, force))
	}
	return errors.Join(errs...)
}

// ckKey identifies a log dir's registry: the dir and, when comparable, the
// file system (tests run several in-memory file systems side by side).
type ckKey struct {
	fs  any
	dir string
}

func makeCkKey(fsys vfs.FS, dir string) ckKey {
	k := ckKey{dir: dir}
	if t := reflect.TypeOf(fsys); t != nil && t.Comparable() {
		k.fs = fsys
	}
	return k
}
