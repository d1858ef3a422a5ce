package cleaner

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// CheckpointFile is the name of the per-log-dir file holding each
// compacted partition's first dirty offset, in Kafka's text format.
const CheckpointFile = "cleaner-offset-checkpoint"

// tp names a topic partition.
type tp struct {
	Topic     string
	Partition int32
}

func (t tp) String() string { return fmt.Sprintf("%s-%d", t.Topic, t.Partition) }

// readCheckpoint reads a cleaner-offset-checkpoint file (Kafka's offset
// checkpoint text format, storage.ParseCheckpoint); a missing file is an
// empty checkpoint.
func readCheckpoint(fsys vfs.FS, path string) (map[tp]int64, error) {
	entries, err := storage.ReadCheckpoint(fsys, path)
	if err != nil {
		return nil, err
	}
	out := make(map[tp]int64, len(entries))
	for _, e := range entries {
		out[tp{e.Topic, e.Partition}] = e.Offset
	}
	return out, nil
}

// writeCheckpoint atomically replaces the file (vfs.WriteFileAtomic) with
// m's entries sorted by topic and partition.
func writeCheckpoint(fsys vfs.FS, path string, m map[tp]int64) error {
	entries := make([]storage.CheckpointEntry, 0, len(m))
	for k, off := range m {
		entries = append(entries, storage.CheckpointEntry{Topic: k.Topic, Partition: k.Partition, Offset: off})
	}
	slices.SortFunc(entries, func(a, b storage.CheckpointEntry) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return storage.WriteCheckpoint(fsys, path, entries)
}

// checkpoints holds the cleaner-offset-checkpoint of every log dir the
// cleaner has met (one file per log dir, like Kafka), each loaded on first
// use.
type checkpoints struct {
	fsys   vfs.FS
	def    string     // the log dir given to New
	fileMu sync.Mutex // serialises file writes; taken before mu
	mu     sync.Mutex
	dirs   map[string]map[tp]int64
}

func newCheckpoints(fsys vfs.FS, def string) (*checkpoints, error) {
	c := &checkpoints{fsys: fsys, def: def, dirs: map[string]map[tp]int64{}}
	if _, err := c.loaded(def); err != nil {
		return nil, err
	}
	return c, nil
}

// loaded returns dir's entries, reading the file the first time.
func (c *checkpoints) loaded(dir string) (map[tp]int64, error) {
	if dir == "" {
		dir = c.def
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.dirs[dir]; ok {
		return m, nil
	}
	m, err := readCheckpoint(c.fsys, filepath.Join(dir, CheckpointFile))
	if err != nil {
		return nil, err
	}
	c.dirs[dir] = m
	return m, nil
}

// get returns k's first dirty offset in dir, -1 when absent.
func (c *checkpoints) get(dir string, k tp) (int64, error) {
	m, err := c.loaded(dir)
	if err != nil {
		return -1, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := m[k]; ok {
		return o, nil
	}
	return -1, nil
}

// set records k's new first dirty offset and rewrites dir's file.
func (c *checkpoints) set(dir string, k tp, off int64) error {
	if dir == "" {
		dir = c.def
	}
	m, err := c.loaded(dir)
	if err != nil {
		return err
	}
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	c.mu.Lock()
	m[k] = off
	snap := maps.Clone(m)
	c.mu.Unlock()
	return writeCheckpoint(c.fsys, filepath.Join(dir, CheckpointFile), snap)
}

// forget removes k from every loaded dir, rewriting the files it was in.
func (c *checkpoints) forget(k tp) error {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	var errs []error
	c.mu.Lock()
	todo := map[string]map[tp]int64{}
	for dir, m := range c.dirs {
		if _, ok := m[k]; ok {
			delete(m, k)
			todo[dir] = maps.Clone(m)
		}
	}
	c.mu.Unlock()
	for dir, snap := range todo {
		if err := writeCheckpoint(c.fsys, filepath.Join(dir, CheckpointFile), snap); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
