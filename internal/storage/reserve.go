package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/vfs"
)

// Reserve keeps free space on a log dir's file system for writers that
// must never meet a full disk: the metadata store (embedded etcd, whose
// failed WAL or backend write stops the process) shares the first log dir.
// The data plane — appends as leader and follower, cleaner output,
// segment preallocation — stops writing once the free space would fall
// below Min and answers KAFKA_STORAGE_ERROR, as a Kafka log dir that
// failed does (reads go on); it writes again once space is freed. This is
// Redpanda's storage_min_free_bytes and CockroachDB's ballast; Kafka has no
// such floor (a metadata log dir that fails stops the broker, KIP-858).
//
// Free space is measured with statfs(2) on a timer (Measure, the broker's
// loop), after a write failed for lack of space, and when a write is
// refused (at most every remeasureEvery), never per append: between
// measures each write takes its size from the room the last measure left,
// an atomic subtraction.
type Reserve struct {
	dir    string
	fsys   vfs.SpaceFS
	min    int64
	logger *slog.Logger

	// room is the free space at the last measure minus Min minus the bytes
	// taken since: what the data plane may still write.
	room atomic.Int64
	// last is when room was last measured (unix nanoseconds).
	last atomic.Int64
	mu   sync.Mutex // one measure at a time
	low  bool       // under mu: the last measure found room < 0 (logged once per episode)
}

// remeasureEvery bounds the statfs calls a refused write may trigger.
const remeasureEvery = 100 * time.Millisecond

// NewReserve keeps min bytes free on the file system holding dir. It
// returns nil (no reserve: every write allowed) when min <= 0 or fsys
// cannot tell its free space.
func NewReserve(fsys vfs.FS, dir string, min int64, logger *slog.Logger) *Reserve {
	sfs, ok := fsys.(vfs.SpaceFS)
	if min <= 0 || !ok {
		return nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	r := &Reserve{dir: dir, fsys: sfs, min: min, logger: logger}
	if err := r.Measure(); err != nil {
		// Not measurable (an unsupported platform): no reserve.
		if errors.Is(err, errors.ErrUnsupported) {
			return nil
		}
		// Not measured now: writes are allowed until a measure succeeds.
		r.room.Store(1 << 62)
		logger.Warn("log dir free space not measured", "dir", dir, "err", err)
	}
	return r
}

// Min is the reserved byte count (0 for a nil Reserve).
func (r *Reserve) Min() int64 {
	if r == nil {
		return 0
	}
	return r.min
}

// Room is what the data plane may still write before reaching the
// reserve (negative: it is inside it), as of the last measure.
func (r *Reserve) Room() int64 {
	if r == nil {
		return 1<<63 - 1
	}
	return r.room.Load()
}

// Measure reads the file system's free space (statfs) and resets the room
// to it minus Min. A failed statfs keeps the previous room.
func (r *Reserve) Measure() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	free, err := r.fsys.FreeSpace(r.dir)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", r.dir, err)
	}
	room := free - r.min
	r.room.Store(room)
	r.last.Store(time.Now().UnixNano())
	switch {
	case room < 0 && !r.low:
		r.low = true
		r.logger.Error("log dir is below its free-space reserve: appends, compaction and new segments are refused (KAFKA_STORAGE_ERROR) until space is freed; reads go on",
			"dir", r.dir, "free_bytes", free, "strata.log.min.free.bytes", r.min)
	case room >= 0 && r.low:
		r.low = false
		r.logger.Info("log dir has room above its free-space reserve again: writes resume", "dir", r.dir, "free_bytes", free)
	}
	return nil
}

// take claims n bytes of room for a write. When the room would go below
// zero it measures again (space may have been freed since; at most every
// remeasureEvery) and, if there is still no room, refuses with
// KAFKA_STORAGE_ERROR. A nil Reserve allows everything.
func (r *Reserve) take(n int64) error {
	if r == nil || n <= 0 {
		return nil
	}
	if r.room.Add(-n) >= 0 {
		return nil
	}
	r.room.Add(n)
	if time.Now().UnixNano()-r.last.Load() >= int64(remeasureEvery) {
		_ = r.Measure()
		if r.room.Add(-n) >= 0 {
			return nil
		}
		r.room.Add(n)
	}
	return fmt.Errorf("log dir %s has %d bytes free: writing %d more would leave less than strata.log.min.free.bytes (%d), the free space kept for the metadata store; free space on its disk (or lower strata.log.min.free.bytes): %w",
		r.dir, max(r.room.Load()+r.min, 0), n, r.min, kerr.KafkaStorageError)
}

// noteWriteError measures again after a write that failed for lack of
// space (ENOSPC or EDQUOT): something else filled the disk.
func (r *Reserve) noteWriteError(err error) {
	if r == nil || err == nil {
		return
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		_ = r.Measure()
	}
}
