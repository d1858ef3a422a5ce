package broker

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"
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
	lock *os.File
}

// lockDir creates dir if needed and takes the exclusive .lock file lock.
func lockDir(dir string) (*logDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file in %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock log dir %s (is another broker using it?): %w", dir, err)
	}
	return &logDir{path: dir, lock: f}, nil
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
func readMetaProperties(dir string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(dir, metaPropertiesName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read meta.properties in %s: %w", dir, err)
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
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
func writeMetaProperties(dir, clusterID string, nodeID int32) error {
	body := fmt.Sprintf("#\n#Written by Strata\nversion=1\ncluster.id=%s\nnode.id=%d\n", clusterID, nodeID)
	return writeFileAtomic(filepath.Join(dir, metaPropertiesName), []byte(body))
}

// checkMeta loads or creates meta.properties in every dir and returns the
// cluster id, failing when dirs disagree or belong to another node.
func checkMeta(dirs []string, nodeID int32) (string, error) {
	clusterID := ""
	props := make([]map[string]string, len(dirs))
	for i, d := range dirs {
		p, err := readMetaProperties(d)
		if err != nil {
			return "", err
		}
		props[i] = p
		if p == nil {
			continue
		}
		if n, ok := p["node.id"]; ok && n != strconv.Itoa(int(nodeID)) {
			return "", fmt.Errorf("log dir %s belongs to node.id %s, but this broker is node.id %d", d, n, nodeID)
		}
		if c := p["cluster.id"]; c != "" {
			if clusterID != "" && c != clusterID {
				return "", fmt.Errorf("log dir %s has cluster.id %s, another dir has %s", d, c, clusterID)
			}
			clusterID = c
		}
	}
	if clusterID == "" {
		clusterID = newClusterID()
	}
	for i, d := range dirs {
		if props[i] != nil && props[i]["cluster.id"] == clusterID {
			continue
		}
		if err := writeMetaProperties(d, clusterID, nodeID); err != nil {
			return "", err
		}
	}
	return clusterID, nil
}

// takeCleanShutdownMarker reports whether dir holds the clean-shutdown
// marker; the caller deletes it (removeCleanShutdownMarker) once logs are
// open.
func takeCleanShutdownMarker(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, cleanShutdownName))
	return err == nil
}

// removeCleanShutdownMarker deletes the marker so that a crash from now
// on triggers recovery at the next start.
func removeCleanShutdownMarker(dir string) error {
	err := os.Remove(filepath.Join(dir, cleanShutdownName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove clean shutdown marker in %s: %w", dir, err)
	}
	return syncDir(dir)
}

// writeCleanShutdownMarker writes Kafka's marker after every log is flushed.
func writeCleanShutdownMarker(dir string) error {
	body, _ := json.Marshal(map[string]int64{"version": 0, "brokerEpoch": 0})
	return writeFileAtomic(filepath.Join(dir, cleanShutdownName), body)
}

// writeFileAtomic writes path via path.tmp: write, fsync, rename, fsync dir.
func writeFileAtomic(path string, data []byte) error {
	return writeFileAtomicPerm(path, data, 0o644)
}

// writeFileAtomicPerm is writeFileAtomic with the file's permissions
// (0600 for secrets).
func writeFileAtomicPerm(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp) // a stale tmp file would keep its old permissions
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory so renames and removes in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
