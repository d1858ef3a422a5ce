package storage

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strata-io/strata/internal/vfs"
)

// File names inside a partition directory.
const (
	RecoveryPointFile  = "recovery-point-offset-checkpoint"
	LogStartOffsetFile = "log-start-offset-checkpoint"
	PartitionMetaFile  = "partition.metadata"
	// ReplicationOffsetFile holds the high watermark of every replicated
	// partition of a log dir (Kafka's ReplicaManager
	// HighWatermarkFilename; see Log.StartReplication).
	ReplicationOffsetFile = "replication-offset-checkpoint"
)

// CheckpointEntry is one line of an offset checkpoint file:
// "<topic> <partition> <offset>".
type CheckpointEntry struct {
	Topic     string
	Partition int32
	Offset    int64
}

// ErrBadCheckpoint is wrapped by every checkpoint parse error.
var ErrBadCheckpoint = errors.New("malformed checkpoint file")

// ParseCheckpoint parses Kafka's text offset checkpoint format:
// "0\n<count>\n" then count lines "<topic> <partition> <offset>".
func ParseCheckpoint(data []byte) ([]CheckpointEntry, error) {
	lines := strings.Split(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) < 2 {
		return nil, fmt.Errorf("%w: missing header", ErrBadCheckpoint)
	}
	if v := strings.TrimSpace(lines[0]); v != "0" {
		return nil, fmt.Errorf("%w: unsupported version %q", ErrBadCheckpoint, v)
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("%w: entry count %q does not match %d lines", ErrBadCheckpoint, lines[1], len(lines)-2)
	}
	out := make([]CheckpointEntry, 0, n)
	for _, ln := range lines[2:] {
		f := strings.Fields(ln)
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: line %q", ErrBadCheckpoint, ln)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("%w: line %q", ErrBadCheckpoint, ln)
		}
		out = append(out, CheckpointEntry{Topic: f[0], Partition: int32(p), Offset: o})
	}
	return out, nil
}

// FormatCheckpoint renders entries in Kafka's text checkpoint format.
func FormatCheckpoint(entries []CheckpointEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%s %d %d\n", e.Topic, e.Partition, e.Offset)
	}
	return b.Bytes()
}

// WriteCheckpoint writes an offset checkpoint file atomically.
func WriteCheckpoint(fsys vfs.FS, name string, entries []CheckpointEntry) error {
	return vfs.WriteFileAtomic(fsys, name, FormatCheckpoint(entries), 0o644)
}

// ReadCheckpoint reads an offset checkpoint; a missing file is no entries.
func ReadCheckpoint(fsys vfs.FS, name string) ([]CheckpointEntry, error) {
	data, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	e, err := ParseCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return e, nil
}

// ParsePartitionDir splits "<topic>-<partition>" into its parts.
func ParsePartitionDir(dir string) (topic string, partition int32, err error) {
	base := filepath.Base(dir)
	i := strings.LastIndexByte(base, '-')
	if i <= 0 {
		return "", 0, fmt.Errorf("partition dir %q: want <topic>-<partition>", base)
	}
	p, err := strconv.ParseInt(base[i+1:], 10, 32)
	if err != nil || p < 0 {
		return "", 0, fmt.Errorf("partition dir %q: bad partition number", base)
	}
	return base[:i], int32(p), nil
}

// FormatPartitionMetadata renders partition.metadata ("version: 0" and the
// topic id in Kafka's base64 URL-safe unpadded Uuid form).
func FormatPartitionMetadata(topicID [16]byte) []byte {
	return []byte("version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(topicID[:]) + "\n")
}

// ParsePartitionMetadata parses partition.metadata.
func ParsePartitionMetadata(data []byte) ([16]byte, error) {
	var id [16]byte
	var version, topic string
	for _, ln := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(ln, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "version":
			version = strings.TrimSpace(v)
		case "topic_id":
			topic = strings.TrimSpace(v)
		}
	}
	if version != "0" {
		return id, fmt.Errorf("%w: partition.metadata version %q", ErrBadCheckpoint, version)
	}
	raw, err := base64.RawURLEncoding.DecodeString(topic)
	if err != nil || len(raw) != 16 {
		return id, fmt.Errorf("%w: partition.metadata topic_id %q", ErrBadCheckpoint, topic)
	}
	copy(id[:], raw)
	return id, nil
}
