package broker

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/strata-io/strata/internal/vfs"
)

// File names at the root of each log directory (Kafka's names).
const (
	lockFileName           = ".lock"
	metaPropertiesName     = "meta.properties"
	cleanShutdownName      = ".kafka_cleanshutdown"
	recoveryCheckpointName = "recovery-point-offset-checkpoint"
	startCheckpointName    = "log-start-offset-checkpoint"
	metadataFileName       = "__strata_metadata.json"
	scramFileName          = "__strata_scram_credentials.json"
)

// logDir is one entry of log.dirs, locked for this process.
type logDir struct {
	path string
	lock io.Closer
}

// lockDir creates dir if needed and takes the exclusive .lock file lock.
func lockDir(fsys vfs.FS, dir string) (*logDir, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir %s: %w", dir, err)
	}
	l, err := fsys.Lock(filepath.Join(dir, lockFileName))
	if err != nil {
		return nil, fmt.Errorf("lock log dir %s (is another broker using it?): %w", dir, err)
	}
	return &logDir{path: dir, lock: l}, nil
}

// unlock releases the directory lock.
func (d *logDir) unlock() error {
	if d.lock == nil {
		return nil
	}
	err := d.lock.Close()
	d.lock = nil
	return err
}

// newClusterID returns a Kafka-style cluster id: a random UUID in
// unpadded URL-safe base64 (22 characters).
func newClusterID() string {
	u := uuid.New()
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// readMetaProperties parses a meta.properties file; missing file returns
// (nil, nil).
func readMetaProperties(fsys vfs.FS, dir string) (map[string]string, error) {
	data, err := vfs.ReadFile(fsys, filepath.Join(dir, metaPropertiesName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read meta.properties in %s: %w", dir, err)
	}
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("meta.properties in %s: malformed line %q", dir, line)
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read meta.properties in %s: %w", dir, err)
	}
	return props, nil
}

// writeMetaProperties writes meta.properties atomically (version 1, the
// KRaft layout: version, cluster.id, node.id).
func writeMetaProperties(fsys vfs.FS, dir, clusterID string, nodeID int32) error {
	body := fmt.Sprintf("#\n#Written by Strata\nversion=1\ncluster.id=%s\nnode.id=%d\n", clusterID, nodeID)
	return vfs.WriteFileAtomic(fsys, filepath.Join(dir, metaPropertiesName), []byte(body), 0o644)
}

// checkMeta loads or creates meta.properties in every dir and returns the
// cluster id (and whether it was made up now: no dir had one), failing
// when dirs disagree or belong to another node.
func checkMeta(fsys vfs.FS, dirs []string, nodeID int32) (string, bool, error) {
	clusterID := ""
	props := make([]map[string]string, len(dirs))
	for i, d := range dirs {
		p, err := readMetaProperties(fsys, d)
		if err != nil {
			return "", false, err
		}
		props[i] = p
		if p == nil {
			continue
		}
		if n, ok := p["node.id"]; ok && n != strconv.Itoa(int(nodeID)) {
			return "", false, fmt.Errorf("log dir %s belongs to node.id %s, but this broker is node.id %d", d, n, nodeID)
		}
		if c := p["cluster.id"]; c != "" {
			if clusterID != "" && c != clusterID {
				return "", false, fmt.Errorf("log dir %s has cluster.id %s, another dir has %s", d, c, clusterID)
			}
			clusterID = c
		}
	}
	fresh := clusterID == ""
	if fresh {
		clusterID = newClusterID()
	}
	for i, d := range dirs {
		if props[i] != nil && props[i]["cluster.id"] == clusterID {
			continue
		}
		if err := writeMetaProperties(fsys, d, clusterID, nodeID); err != nil {
			return "", false, err
		}
	}
	return clusterID, fresh, nil
}

// takeCleanShutdownMarker reports whether dir holds the clean-shutdown
// marker; the caller deletes it (removeCleanShutdownMarker) once logs are
// open.
func takeCleanShutdownMarker(fsys vfs.FS, dir string) bool {
	_, err := fsys.Stat(filepath.Join(dir, cleanShutdownName))
	return err == nil
}

// removeCleanShutdownMarker deletes the marker durably, so that a crash
// from now on triggers recovery at the next start.
func removeCleanShutdownMarker(fsys vfs.FS, dir string) error {
	if err := vfs.RemoveDurably(fsys, filepath.Join(dir, cleanShutdownName)); err != nil {
		return fmt.Errorf("clean shutdown marker: %w", err)
	}
	return nil
}

// writeCleanShutdownMarker writes Kafka's marker after every log is flushed.
func writeCleanShutdownMarker(fsys vfs.FS, dir string) error {
	body, _ := json.Marshal(map[string]int64{"version": 0, "brokerEpoch": 0})
	return vfs.WriteFileAtomic(fsys, filepath.Join(dir, cleanShutdownName), body, 0o644)
}

// FormatTopicID prints a topic id as Kafka does (Uuid.toString: URL-safe
// base64 without padding, 22 characters), the form kafka-topics, kcat and
// `strata topic describe` show.
func FormatTopicID(id uuid.UUID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
