package storage

import (
	"errors"
	"log/slog"
	"sync"

	"github.com/strata-io/strata/internal/vfs"
)

// Syncer batches fdatasync calls: one fsync round covers every write
// appended to any log of the dir meanwhile (group commit). Owned by the log
// manager of a dir; Close stops its goroutine.
type Syncer struct {
	logger  *slog.Logger
	mu      sync.Mutex
	pending map[*Log]struct{}
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	closed  bool
	rounds  uint64
	files   *FileCache // shared by the logs of the dir unless Options.Files is set

	ckMu  sync.Mutex
	ckpts map[ckKey]*dirCheckpoints // root checkpoint files per log dir
}

// DefaultDirFileCache is how many closed segments (open descriptor plus
// loaded indexes) the logs sharing a Syncer keep open together.
const DefaultDirFileCache = 1024

// NewSyncer starts a group-commit syncer.
func NewSyncer(logger *slog.Logger) *Syncer {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Syncer{
		logger:  logger,
		pending: map[*Log]struct{}{},
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		files:   NewFileCache(DefaultDirFileCache),
		ckpts:   map[ckKey]*dirCheckpoints{},
	}
	go s.run()
	return s
}

// Close stops the syncer after a final round and writes the log dir's
// recovery-point and log-start-offset checkpoints (call it after closing
// the logs, so they hold the clean-shutdown recovery points). When logs
// were closed with CloseDeferSync it first makes each log dir durable with
// one SyncFS, then moves their recovery points to their log ends.
func (s *Syncer) Close() error {
	if !s.shutdown() {
		return nil
	}
	var errs []error
	for _, c := range s.registries() {
		if err := c.applyDeferred(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.closeSyncFS()
		return err
	}
	for _, c := range s.registries() {
		errs = append(errs, c.persistAll(true))
	}
	s.closeSyncFS()
	return errors.Join(errs...)
}

// closeSyncFS releases the log dirs' SyncFS handles.
func (s *Syncer) closeSyncFS() {
	for _, c := range s.registries() {
		c.closeSyncFS()
	}
}

// deferRecoveryPoint records that a log closed with CloseDeferSync ends at
// off: its recovery point moves there once Close has made the dir durable.
func (s *Syncer) deferRecoveryPoint(c *dirCheckpoints, key tp, off int64) {
	c.mu.Lock()
	c.deferred = append(c.deferred, deferredPoint{key, off})
	c.mu.Unlock()
}

// shutdown stops the goroutine after a final round; false when already
// closed.
func (s *Syncer) shutdown() bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	return true
}

// isClosed reports whether Close was called.
func (s *Syncer) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// checkpoints returns the root checkpoint registry of log dir dir, loading
// its files on first use. merge is set for a log's private syncer.
func (s *Syncer) checkpoints(fsys vfs.FS, dir string, logger *slog.Logger, merge bool) (*dirCheckpoints, error) {
	k := makeCkKey(fsys, dir)
	s.ckMu.Lock()
	c := s.ckpts[k]
	if c == nil {
		c = newDirCheckpoints(fsys, dir, logger, merge)
		s.ckpts[k] = c
	}
	s.ckMu.Unlock()
	return c, c.load()
}

func (s *Syncer) registries() []*dirCheckpoints {
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	out := make([]*dirCheckpoints, 0, len(s.ckpts))
	for _, c := range s.ckpts {
		if c.isReady() {
			out = append(out, c)
		}
	}
	return out
}

// WriteCheckpoints rewrites the recovery-point-offset-checkpoint and
// log-start-offset-checkpoint files at the root of every log dir whose
// logs use this syncer when their entries changed (the broker calls it
// every log.flush.offset.checkpoint.interval.ms; Close writes them last).
func (s *Syncer) WriteCheckpoints() error {
	var errs []error
	for _, c := range s.registries() {
		errs = append(errs, c.persistAll(false))
	}
	return errors.Join(errs...)
}

// persistRecoveryPoints writes the recovery point files that changed
// during a round (a rolled segment became durable).
func (s *Syncer) persistRecoveryPoints() {
	for _, c := range s.registries() {
		if c.dirty(ckRecovery, true) {
			if err := c.persist(ckRecovery, false); err != nil {
				s.logger.Warn("write recovery point checkpoint", "dir", c.dir, "err", err)
			}
		}
	}
}

// Rounds returns how many fsync rounds ran (for tests and metrics).
func (s *Syncer) Rounds() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rounds
}

// request asks for l's written bytes to be synced in the next round. It
// reports false when the syncer is closed.
func (s *Syncer) request(l *Log) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.pending[l] = struct{}{}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// forget drops l from the pending set (the log is closing).
func (s *Syncer) forget(l *Log) {
	s.mu.Lock()
	delete(s.pending, l)
	s.mu.Unlock()
}

func (s *Syncer) run() {
	defer close(s.done)
	for {
		select {
		case <-s.wake:
			s.round()
		case <-s.stop:
			s.round()
			return
		}
	}
}

// fsys returns the file system of the logs of preps named by who.
func (s *Syncer) fsys(preps []syncPrep, who []int) vfs.FS { return preps[who[0]].fsys }

// maxParallelSyncs bounds concurrent fdatasync calls within one round.
const maxParallelSyncs = 16

func (s *Syncer) round() {
	s.mu.Lock()
	if len(s.pending) == 0 {
		s.mu.Unlock()
		return
	}
	logs := make([]*Log, 0, len(s.pending))
	for l := range s.pending {
		logs = append(logs, l)
	}
	clear(s.pending)
	s.rounds++
	s.mu.Unlock()

	preps := make([]syncPrep, len(logs))
	for i, l := range logs {
		preps[i] = l.prepareSync()
	}
	errs := make([]error, len(logs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallelSyncs)
	// New partition directories (each once per round) with the files: a
	// log's bytes count as durable only once both are synced.
	dirs := map[string][]int{}
	for i := range preps {
		for _, d := range preps[i].dirs {
			dirs[d] = append(dirs[d], i)
		}
	}
	for d, who := range dirs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			fsys := s.fsys(preps, who)
			sync := fsys.SyncDir
			if len(who) == 1 && preps[who[0]].dirs[0] == d {
				sync = func(d string) error { return syncNewDir(fsys, d) }
			}
			if err := sync(d); err != nil {
				mu.Lock()
				for _, i := range who {
					errs[i] = err
				}
				mu.Unlock()
			}
			<-sem
		}()
	}
	for i := range preps {
		for _, f := range preps[i].files {
			wg.Add(1)
			sem <- struct{}{}
			go func(i int, f *SegmentFile) {
				defer wg.Done()
				err := f.f.Sync()
				f.Release()
				if err != nil {
					mu.Lock()
					errs[i] = err
					mu.Unlock()
				}
				<-sem
			}(i, f)
		}
	}
	wg.Wait()
	for i, l := range logs {
		l.finishSync(preps[i], errs[i])
	}
	s.persistRecoveryPoints()
}
