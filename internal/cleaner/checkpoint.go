package cleaner

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
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

// readCheckpoint parses a cleaner-offset-checkpoint file:
// "0\n<count>\n<topic> <partition> <offset>\n...". A missing file is an
// empty checkpoint.
func readCheckpoint(path string) (map[tp]int64, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[tp]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return parseCheckpoint(data)
}

func parseCheckpoint(data []byte) (map[tp]int64, error) {
	out := map[tp]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	next := func() ([]string, bool) {
		for sc.Scan() {
			line++
			return strings.Fields(sc.Text()), true
		}
		return nil, false
	}
	f, ok := next()
	if !ok || len(f) != 1 || f[0] != "0" {
		return nil, fmt.Errorf("checkpoint: line %d: want version 0, got %q", line, strings.Join(f, " "))
	}
	f, ok = next()
	if !ok || len(f) != 1 {
		return nil, fmt.Errorf("checkpoint: line %d: missing entry count", line)
	}
	count, err := strconv.Atoi(f[0])
	if err != nil || count < 0 {
		return nil, fmt.Errorf("checkpoint: line %d: bad entry count %q", line, f[0])
	}
	for i := 0; i < count; i++ {
		f, ok = next()
		if !ok {
			return nil, fmt.Errorf("checkpoint: %d entries announced, %d found", count, i)
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("checkpoint: line %d: want \"topic partition offset\"", line)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("checkpoint: line %d: bad partition or offset", line)
		}
		out[tp{f[0], int32(p)}] = o
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return out, nil
}

func formatCheckpoint(m map[tp]int64) []byte {
	keys := make([]tp, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d %d\n", k.Topic, k.Partition, m[k])
	}
	return b.Bytes()
}

// writeCheckpoint atomically replaces the file: write <path>.tmp, fsync,
// rename over path, fsync the directory.
func writeCheckpoint(path string, m map[tp]int64) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if _, err := f.Write(formatCheckpoint(m)); err != nil {
		f.Close()
		return fmt.Errorf("write checkpoint %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync checkpoint %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close checkpoint %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename checkpoint: %w", err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("sync checkpoint dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync checkpoint dir: %w", err)
	}
	return nil
}

// checkpoints holds the cleaner-offset-checkpoint of every log dir the
// cleaner has met (one file per log dir, like Kafka), each loaded on first
// use.
type checkpoints struct {
	def    string     // the log dir given to New
	fileMu sync.Mutex // serialises file writes; taken before mu
	mu     sync.Mutex
	dirs   map[string]map[tp]int64
}

func newCheckpoints(def string) (*checkpoints, error) {
	c := &checkpoints{def: def, dirs: map[string]map[tp]int64{}}
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
	m, err := readCheckpoint(filepath.Join(dir, CheckpointFile))
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
	return writeCheckpoint(filepath.Join(dir, CheckpointFile), snap)
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
		if err := writeCheckpoint(filepath.Join(dir, CheckpointFile), snap); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
