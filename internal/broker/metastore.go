package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/strata-io/strata/internal/vfs"
)

// metaVersion is the version of the topic metadata file format.
const metaVersion = 1

// metaFile is the JSON topic metadata store (<first log dir>/__strata_metadata.json).
type metaFile struct {
	Version int `json:"version"`
	// NextProducerID is the first producer id not yet handed out.
	NextProducerID int64 `json:"next_producer_id"`
	// Cluster is set once the topics follow the cluster metadata
	// (docs/cluster.md): they are then the local replicas of topics kept
	// in the metadata store, not the topics themselves. A file without it
	// was written by the single-node release; its topics are adopted into
	// the metadata on first start.
	Cluster bool        `json:"cluster,omitempty"`
	Topics  []metaTopic `json:"topics"`
}

// metaTopic is one persisted topic.
type metaTopic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Internal   bool              `json:"internal,omitempty"`
	Configs    map[string]string `json:"configs,omitempty"`
	Partitions []metaPartition   `json:"partitions"`
}

// metaPartition is one persisted partition: where it lives and its
// leadership (single node: leader is this node, replicas = [self]; in a
// cluster the last leadership applied, for the record).
type metaPartition struct {
	Partition   int32   `json:"partition"`
	Dir         string  `json:"dir"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
}

// loadMeta reads the metadata file; a missing file is an empty store.
func loadMeta(fsys vfs.FS, dir string) (*metaFile, error) {
	path := filepath.Join(dir, metadataFileName)
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return &metaFile{Version: metaVersion, NextProducerID: 1000}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read topic metadata: %w", err)
	}
	var m metaFile
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse topic metadata %s: %w", path, err)
	}
	if m.Version != metaVersion {
		return nil, fmt.Errorf("topic metadata %s: unsupported version %d", path, m.Version)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("topic metadata %s: %w", path, err)
	}
	return &m, nil
}

// validate refuses a metadata file Strata could not have written (a
// damaged or hand-edited one) before anything is opened from it: a topic
// name that is not a legal Kafka topic name would name a directory
// outside the log dir ("../x"), two topics with one name or id would open
// one partition directory twice, and partitions must be listed as Strata
// keeps them (sorted by a unique, non-negative index). Found by
// FuzzMetadataFile.
func (m *metaFile) validate() error {
	names, ids := map[string]bool{}, map[string]bool{}
	for _, t := range m.Topics {
		if err := ValidateTopicName(t.Name); err != nil {
			return fmt.Errorf("topic %q: %v", t.Name, err)
		}
		if names[t.Name] || ids[t.ID] {
			return fmt.Errorf("topic %q (id %s) is listed twice", t.Name, t.ID)
		}
		names[t.Name], ids[t.ID] = true, true
		prev := int32(-1)
		for _, p := range t.Partitions {
			if p.Partition <= prev {
				return fmt.Errorf("topic %q: partition %d listed after %d (partitions must be unique, non-negative and sorted)", t.Name, p.Partition, prev)
			}
			prev = p.Partition
		}
	}
	return nil
}

// saveMeta writes the metadata file atomically.
func saveMeta(fsys vfs.FS, dir string, m *metaFile) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode topic metadata: %w", err)
	}
	return vfs.WriteFileAtomic(fsys, filepath.Join(dir, metadataFileName), b, 0o644)
}
