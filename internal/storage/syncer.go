package storage

import (
	"log/slog"
	"sync"
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
	}
	go s.run()
	return s
}

// Close stops the syncer after a final round.
func (s *Syncer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	return nil
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
}
