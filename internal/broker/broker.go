// Package broker holds a node's topics and partitions over the storage
// logs: topic metadata and its persistence, config resolution, produce and
// fetch semantics, producer ids and the background loops (retention, idle
// roll, flush, checkpoints). It knows nothing about the network.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/parallel"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// Broker is one node's partitions and topic metadata.
type Broker struct {
	// cfg is the current configuration: the static one with the dynamic
	// broker configs laid over it (SetConfig).
	cfg         atomic.Pointer[config.Broker]
	logger      *slog.Logger
	nodeID      int32
	clusterID   string
	durableAcks bool
	// uncleanShutdown: the previous run did not shut down cleanly, held
	// logs, and acknowledged without fsyncing (strata.durable.acks=false),
	// so its logs may miss acknowledged records (UncleanShutdown).
	uncleanShutdown bool
	dirs            []*logDir
	syncers         map[string]*storage.Syncer
	reserves        map[string]*storage.Reserve // per log dir; nil entries: none
	files           *storage.FileCache          // open segment files of every log (strata.log.max.open.files)
	fs              vfs.FS

	// adminMu serialises metadata changes and writes; it is never held
	// over slow disk work (opening or deleting partition logs), which runs
	// under the topic's own lock in topicLocks. adminOps counts those
	// operations so Close waits for them.
	adminMu    sync.Mutex
	topicLocks topicLocks
	adminOps   sync.WaitGroup
	mu         sync.RWMutex // guards topics, byID
	topics     map[string]*Topic
	byID       map[uuid.UUID]*Topic

	pidMu      sync.Mutex
	nextPID    int64
	pidLimit   int64 // ids below it are persisted as used and may be handed out
	pidPersist int64 // NextProducerID written to the metadata store
	// pidAlloc, when set, reserves producer id blocks in the cluster.
	pidAlloc atomic.Pointer[ProducerIDAllocator]

	// managed: the local topics follow the cluster metadata (ApplyTopics);
	// freshDirs: this start created the log directories' meta.properties.
	managed   bool
	freshDirs bool

	hooksMu  sync.Mutex
	onDelete []func(topic string, partition int32)

	// scram holds the SCRAM credentials (AlterUserScramCredentials).
	scram *scramStore

	stop   context.CancelFunc
	loops  sync.WaitGroup
	closed bool
}

// Open locks the log dirs, checks meta.properties, loads topic metadata
// and opens every partition log, running recovery for dirs that were not
// shut down cleanly.
func Open(cfg *config.Broker, logger *slog.Logger) (*Broker, error) {
	return OpenFS(cfg, logger, vfs.Default())
}

// OpenFS is Open over the file system fsys (tests: a vfs.CrashFS, whose
// power cuts then cover every file the broker and its logs write).
func OpenFS(cfg *config.Broker, logger *slog.Logger, fsys vfs.FS) (*Broker, error) {
	return OpenWithProgress(cfg, logger, fsys, nil)
}

// OpenWithProgress is OpenFS (nil fsys: the real one) reporting how many
// partitions are loaded in progress (nil: not reported) while it runs, for
// /readyz.
func OpenWithProgress(cfg *config.Broker, logger *slog.Logger, fsys vfs.FS, progress *LoadProgress) (*Broker, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if fsys == nil {
		fsys = vfs.Default()
	}
	if progress == nil {
		progress = &LoadProgress{}
	}
	b := &Broker{
		logger:      logger,
		nodeID:      int32(cfg.Int64("node.id")),
		durableAcks: cfg.Bool("strata.durable.acks"),
		syncers:     map[string]*storage.Syncer{},
		reserves:    map[string]*storage.Reserve{},
		files:       storage.NewFileCache(cfg.Int("strata.log.max.open.files")),
		fs:          fsys,
		topics:      map[string]*Topic{},
		byID:        map[uuid.UUID]*Topic{},
	}
	b.cfg.Store(cfg)
	var paths []string
	for _, d := range strings.Split(cfg.Get("log.dirs"), ",") {
		if d = strings.TrimSpace(d); d != "" {
			abs, err := filepath.Abs(d)
			if err != nil {
				return nil, fmt.Errorf("log dir %s: %w", d, err)
			}
			paths = append(paths, abs)
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("log.dirs is empty")
	}
	for _, p := range paths {
		d, err := lockDir(b.fs, p)
		if err != nil {
			b.unlockAll()
			return nil, err
		}
		b.dirs = append(b.dirs, d)
	}
	clusterID, fresh, err := checkMeta(b.fs, paths, b.nodeID)
	if err != nil {
		b.unlockAll()
		return nil, err
	}
	b.clusterID, b.freshDirs = clusterID, fresh
	progress.setLocked()
	if err := b.load(progress); err != nil {
		b.closeLogs(false)
		b.unlockAll()
		return nil, err
	}
	return b, nil
}

// LoadProgress counts the partitions a broker has opened while it loads
// its logs at start (recovering them after a crash), for /readyz and the
// progress log lines.
type LoadProgress struct {
	total, loaded atomic.Int64
	recovering    atomic.Bool
	lockedInit    sync.Once
	lockedOnce    sync.Once
	locked        chan struct{}
}

// Locked is closed once the broker holds the lock of every log directory
// and has checked their meta.properties, before it loads the logs: from
// then on the server may start work that must not run beside another
// broker on the same directories (the metadata store member) while the
// logs load. It stays open when the open fails first.
func (p *LoadProgress) Locked() <-chan struct{} { return p.lockedChan() }

func (p *LoadProgress) lockedChan() chan struct{} {
	p.lockedInit.Do(func() { p.locked = make(chan struct{}) })
	return p.locked
}

// setLocked closes Locked.
func (p *LoadProgress) setLocked() { p.lockedOnce.Do(func() { close(p.lockedChan()) }) }

// Counts returns how many partitions are loaded, of how many.
func (p *LoadProgress) Counts() (loaded, total int64) { return p.loaded.Load(), p.total.Load() }

// String describes the progress, e.g. "recovering logs: 2500 of 10100
// partitions loaded".
func (p *LoadProgress) String() string {
	what := "loading logs"
	if p.recovering.Load() {
		what = "recovering logs"
	}
	return fmt.Sprintf("%s: %d of %d partitions loaded", what, p.loaded.Load(), p.total.Load())
}

// progressLogInterval is how often a long load logs its progress.
const progressLogInterval = 5 * time.Second

// load reads the metadata store and opens all partition logs.
func (b *Broker) load(progress *LoadProgress) error {
	clean := map[string]bool{}
	for _, d := range b.dirs {
		clean[d.path] = takeCleanShutdownMarker(b.fs, d.path)
		s := storage.NewSyncer(b.logger)
		b.syncers[d.path] = s
		// The free-space reserve (strata.log.min.free.bytes) the metadata
		// store writes into; measured now and by the reserve loop.
		b.reserves[d.path] = storage.NewReserve(b.fs, d.path, b.Config().Int64("strata.log.min.free.bytes"), b.logger)
		s.SetReserve(b.reserves[d.path])
		// The write-ahead journal that makes acks=all over many partitions
		// one fsync per round (strata.log.journal.bytes; docs/storage.md).
		if size := b.Config().Int64("strata.log.journal.bytes"); size > 0 && b.durableAcks {
			if err := s.OpenJournal(b.fs, d.path, size); err != nil {
				return fmt.Errorf("log dir %s: %w", d.path, err)
			}
		}
	}
	m, err := loadMeta(b.fs, b.dirs[0].path)
	if err != nil {
		return err
	}
	if b.scram, err = loadScram(b.fs, b.dirs[0].path); err != nil {
		return err
	}
	b.nextPID, b.pidLimit, b.pidPersist = m.NextProducerID, m.NextProducerID, m.NextProducerID
	b.managed = m.Cluster
	type job struct {
		t *Topic
		p *Partition
	}
	var jobs []job
	for _, mt := range m.Topics {
		id, err := uuid.Parse(mt.ID)
		if err != nil {
			return fmt.Errorf("topic %s: bad id %q: %w", mt.Name, mt.ID, err)
		}
		t := &Topic{Name: mt.Name, ID: id, Internal: mt.Internal, Configs: mt.Configs}
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		for _, mp := range mt.Partitions {
			p := &Partition{Topic: mt.Name, Index: mp.Partition, baseDir: mp.Dir, broker: b}
			p.lead.Store(b.alone(mp.LeaderEpoch))
			if m.Cluster {
				// Not leading until the cluster metadata says so.
				p.lead.Store(&Leadership{Leader: -1, LeaderEpoch: mp.LeaderEpoch, Replicas: mp.Replicas})
			}
			if b.syncers[mp.Dir] == nil {
				return fmt.Errorf("topic %s partition %d lives in %s, which is not in log.dirs", mt.Name, mp.Partition, mp.Dir)
			}
			t.Partitions = append(t.Partitions, p)
			jobs = append(jobs, job{t, p})
		}
		b.topics[t.Name] = t
		b.byID[t.ID] = t
	}
	perDir := map[string]int{}
	for _, j := range jobs {
		perDir[j.p.baseDir]++
	}
	b.logRecoveryPlan(clean, perDir)
	for _, d := range b.dirs {
		if !clean[d.path] && perDir[d.path] > 0 && !b.durableAcks {
			b.uncleanShutdown = true
		}
	}
	for _, d := range b.dirs {
		if perDir[d.path] == 0 {
			clean[d.path] = true // nothing in it to recover
		}
	}
	known := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		known[j.p.Dir()] = true
	}
	b.removeStrayPartitions(known)
	start := time.Now()
	progress.total.Store(int64(len(jobs)))
	progress.recovering.Store(!allClean(clean))
	stop := make(chan struct{})
	var logged sync.WaitGroup
	logged.Add(1)
	go func() { // owner: load; stopped when every partition is open
		defer logged.Done()
		t := time.NewTicker(progressLogInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				n, total := progress.Counts()
				b.logger.Info("loading logs", "loaded", n, "partitions", total, "recovery", !allClean(clean), "elapsed", time.Since(start))
			}
		}
	}()
	err = parallel.Each(jobs, b.ioThreads(), func(j job) error {
		defer progress.loaded.Add(1)
		return b.openPartition(j.t, j.p, clean[j.p.baseDir], true)
	})
	close(stop)
	logged.Wait()
	if err != nil {
		return err
	}
	// Every log replayed what the journal held for it: StartJournal makes
	// what the opens recovered durable with one SyncFS per log dir (they
	// were opened with DeferSync), then voids the journal.
	for _, d := range b.dirs {
		if err := b.syncers[d.path].StartJournal(); err != nil {
			return fmt.Errorf("log dir %s: %w", d.path, err)
		}
	}
	for _, d := range b.dirs {
		if err := removeCleanShutdownMarker(b.fs, d.path); err != nil {
			return err
		}
	}
	b.logger.Info("logs loaded", "topics", len(b.topics), "partitions", len(jobs),
		"clean_shutdown", allClean(clean), "elapsed", time.Since(start))
	return nil
}

// removeStrayPartitions deletes partition directories that no topic in the
// metadata owns: what a crash left of a topic being created (never
// acknowledged) or deleted (already acknowledged), as Kafka deletes stray
// logs. Only directories named like a partition ("<topic>-<n>" with a
// legal topic name) are touched, and each is logged.
func (b *Broker) removeStrayPartitions(known map[string]bool) {
	for _, d := range b.dirs {
		ents, err := b.fs.ReadDir(d.path)
		if err != nil {
			b.logger.Warn("list log dir for stray partitions", "dir", d.path, "err", err)
			continue
		}
		for _, e := range ents {
			full := filepath.Join(d.path, e.Name())
			if !e.IsDir() || known[full] || !looksLikePartitionDir(e.Name()) {
				continue
			}
			b.logger.Warn("removing stray partition directory (its topic is not in the metadata: a creation or deletion interrupted by a crash)", "dir", full)
			if err := b.fs.RemoveAll(full); err != nil {
				b.logger.Warn("remove stray partition directory", "dir", full, "err", err)
			}
		}
	}
}

// looksLikePartitionDir reports whether name is "<topic>-<partition>".
func looksLikePartitionDir(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return false
	}
	n, err := strconv.Atoi(name[i+1:])
	return err == nil && n >= 0 && strconv.Itoa(n) == name[i+1:] && ValidateTopicName(name[:i]) == nil
}

// allClean reports whether every log dir had its clean-shutdown marker.
func allClean(clean map[string]bool) bool {
	for _, c := range clean {
		if !c {
			return false
		}
	}
	return true
}

// logRecoveryPlan says per log dir, as Kafka does, whether its partitions
// are opened after a clean shutdown (recovery skipped) or recovered.
func (b *Broker) logRecoveryPlan(clean map[string]bool, perDir map[string]int) {
	for _, d := range b.dirs {
		switch {
		case perDir[d.path] == 0:
			// A new log dir (or one without partitions): no marker is
			// expected and there is nothing to recover.
			b.logger.Info("log dir has no partitions: nothing to recover", "dir", d.path)
		case clean[d.path]:
			b.logger.Info("skipping recovery: clean shutdown marker found", "dir", d.path, "partitions", perDir[d.path])
		default:
			b.logger.Info("recovering partitions: no clean shutdown marker", "dir", d.path, "partitions", perDir[d.path],
				"threads", b.Config().Int("num.recovery.threads.per.data.dir"))
		}
	}
}

// openPartition opens one partition's log with its resolved config.
// startup is set only by the broker's start (loadLogs), whose
// StartJournal follows every open: the log's recovery fsyncs are then
// deferred to one SyncFS of the log dir (storage.Options.DeferSync).
// Logs opened at runtime keep their own fsyncs.
func (b *Broker) openPartition(t *Topic, p *Partition, cleanShutdown, startup bool) error {
	cfg, ts, err := resolveConfig(b.Config(), t.Configs, b.durableAcks)
	if err != nil {
		return fmt.Errorf("topic %s: %w", t.Name, err)
	}
	opts := b.storageOptions(p.baseDir)
	opts.DeferSync = startup
	l, err := storage.Open(p.Dir(), t.ID, cfg, cleanShutdown, opts)
	if err != nil {
		return fmt.Errorf("open partition %s-%d: %w", t.Name, p.Index, err)
	}
	p.Log = l
	p.settings.Store(&ts)
	return nil
}

// storageOptions are the per-log dependencies for a log in dir.
func (b *Broker) storageOptions(dir string) storage.Options {
	return storage.Options{
		FS:                   b.fs,
		Syncer:               b.syncers[dir],
		Files:                b.files,
		Reserve:              b.reserves[dir],
		Logger:               b.logger,
		ProducerIDExpiration: time.Duration(b.Config().Int64("producer.id.expiration.ms")) * time.Millisecond,
	}
}

// UncleanShutdown reports whether this run started from logs that a
// previous run left without a clean shutdown while it acknowledged
// records it had not fsynced (strata.durable.acks=false): they may miss
// acknowledged records. The broker registers with it, and the controller
// keeps such a broker out of the eligible leader replicas (KIP-966's
// handleBrokerUncleanShutdown). With fsynced acks it is always false:
// recovery keeps everything acknowledged.
func (b *Broker) UncleanShutdown() bool { return b.uncleanShutdown }

// NodeID is this broker's node id.
func (b *Broker) NodeID() int32 { return b.nodeID }

// ClusterID is the cluster id from meta.properties.
func (b *Broker) ClusterID() string { return b.clusterID }

// FS is the file system every file of the broker lives on.
func (b *Broker) FS() vfs.FS { return b.fs }

// Config returns the broker settings.
func (b *Broker) Config() *config.Broker { return b.cfg.Load() }

// LogDirs returns the absolute log directory paths.
func (b *Broker) LogDirs() []string {
	out := make([]string, len(b.dirs))
	for i, d := range b.dirs {
		out[i] = d.path
	}
	return out
}

// OnDelete registers a hook called for every partition of a deleted topic
// (the cleaner's Forget).
func (b *Broker) OnDelete(fn func(topic string, partition int32)) {
	b.hooksMu.Lock()
	b.onDelete = append(b.onDelete, fn)
	b.hooksMu.Unlock()
}

// Close is Shutdown without a deadline.
func (b *Broker) Close() error { return b.Shutdown(context.Background()) }

// Shutdown stops the background loops and closes every log, then makes
// each log dir durable at once and writes its checkpoints and (when every
// step succeeded before ctx ended) the clean-shutdown marker, and releases
// the dir locks. Only logs written since they were opened write anything
// (their producer snapshot and active indexes), and nothing is fsynced per
// log: one SyncFS per log dir covers them all (storage.Log.CloseDeferSync,
// storage.Syncer.Close), so the time is bounded by the bytes to flush,
// not by the partition count. Past ctx the marker is not written, so the
// next start recovers.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.StopLoops()
	b.adminMu.Lock()
	if b.closed {
		b.adminMu.Unlock()
		return nil
	}
	b.closed = true
	b.adminMu.Unlock()
	b.adminOps.Wait() // topics being created see closed and remove their logs
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	start := time.Now()
	var errs []error
	if err := b.closeLogs(true); err != nil {
		errs = append(errs, err)
	}
	closed := time.Since(start)
	for _, s := range b.syncers {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("shutdown deadline passed: no clean-shutdown marker, the next start recovers: %w", err))
	}
	if len(errs) == 0 {
		for _, d := range b.dirs {
			if err := writeCleanShutdownMarker(b.fs, d.path); err != nil {
				errs = append(errs, err)
			}
		}
	}
	b.logger.Info("logs closed", "elapsed", time.Since(start), "close", closed, "flush", time.Since(start)-closed, "clean", len(errs) == 0)
	b.unlockAll()
	return errors.Join(errs...)
}

// closeLogs closes every open partition log, as many at once as
// num.recovery.threads.per.data.dir allows per log dir (Kafka uses the same
// threads for recovery at startup and flushing at shutdown); deferSync
// leaves the fsync to the log dir's Syncer.Close.
func (b *Broker) closeLogs(deferSync bool) error {
	b.mu.RLock()
	var parts []*Partition
	for _, t := range b.topics {
		for _, p := range t.Partitions {
			if p.Log != nil {
				parts = append(parts, p)
			}
		}
	}
	b.mu.RUnlock()
	return parallel.Each(parts, b.ioThreads(), func(p *Partition) error {
		closeLog := p.Log.Close
		if deferSync {
			closeLog = p.Log.CloseDeferSync
		}
		if err := closeLog(); err != nil {
			return fmt.Errorf("close %s-%d: %w", p.Topic, p.Index, err)
		}
		return nil
	})
}

func (b *Broker) unlockAll() {
	for _, d := range b.dirs {
		_ = d.unlock()
	}
}

// JournalStats sums the counters of the write-ahead journals of every
// log dir (zero when the journal is off).
func (b *Broker) JournalStats() storage.JournalStats {
	var sum storage.JournalStats
	for _, s := range b.syncers {
		st := s.JournalStats()
		sum.Rounds += st.Rounds
		sum.Records += st.Records
		sum.Bytes += st.Bytes
		sum.Checkpoints += st.Checkpoints
		sum.Fallbacks += st.Fallbacks
		sum.Replayed += st.Replayed
		sum.Created += st.Created
		sum.Released += st.Released
		sum.FileBytes += st.FileBytes
	}
	return sum
}

// writeCheckpoints writes the recovery-point and log-start-offset
// checkpoint files at the root of every log dir (storage owns them).
func (b *Broker) writeCheckpoints() error {
	var errs []error
	for _, s := range b.syncers {
		errs = append(errs, s.WriteCheckpoints())
	}
	return errors.Join(errs...)
}

// persistLocked writes the metadata store; adminMu must be held.
func (b *Broker) persistLocked() error {
	m := &metaFile{Version: metaVersion, Cluster: b.managed}
	b.pidMu.Lock()
	m.NextProducerID = b.pidPersist
	b.pidMu.Unlock()
	for _, t := range b.Topics() {
		mt := metaTopic{Name: t.Name, ID: t.ID.String(), Internal: t.Internal, Configs: t.Configs}
		for _, p := range t.Partitions {
			l := p.Leadership()
			mt.Partitions = append(mt.Partitions, metaPartition{
				Partition: p.Index, Dir: p.baseDir, Leader: l.Leader, LeaderEpoch: l.LeaderEpoch, Replicas: l.Replicas,
			})
		}
		m.Topics = append(m.Topics, mt)
	}
	return saveMeta(b.fs, b.dirs[0].path, m)
}

// commitLocked persists a topic change already made in memory; when that
// fails it runs undo and writes the metadata again, because a failed write
// may have replaced the file all the same (the rename done, the directory
// fsync failed) and the file must not keep a change the caller is told
// failed. adminMu must be held.
func (b *Broker) commitLocked(undo func()) error {
	err := b.persistLocked()
	if err == nil {
		return nil
	}
	undo()
	if rerr := b.persistLocked(); rerr != nil {
		b.logger.Error("restore topic metadata after a failed write", "err", rerr, "write_err", err)
	}
	return err
}

// partitionDirName is Kafka's "<topic>-<partition>" directory name.
func partitionDirName(topic string, p int32) string {
	return topic + "-" + strconv.Itoa(int(p))
}

// removeStale deletes a leftover partition directory (from a topic whose
// deletion was interrupted) before a new partition takes its name.
func (b *Broker) removeStale(dir string) error {
	if _, err := b.fs.Stat(dir); err != nil {
		return nil
	}
	if err := b.fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove stale partition dir %s: %w", dir, err)
	}
	return nil
}
