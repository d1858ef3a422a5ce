package storage

import (
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/parallel"
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

	// cfgs shares one immutable *Config among the logs of the dir with
	// the same settings (most partitions of a topic, most topics): a
	// partition holds a pointer, not its own copy (config).
	cfgMu sync.Mutex
	cfgs  map[Config]*Config

	// roundMu: one group-commit round (or journal barrier) at a time.
	roundMu sync.Mutex
	// jrnl is the log dir's write-ahead journal (OpenJournal), nil when
	// every round fsyncs the segment files directly.
	jrnl *journal
	// reserve is the log dir's free-space reserve (SetReserve), which the
	// journal's files stay out of.
	reserve *Reserve
}

// SetReserve gives the syncer the log dir's free-space reserve; call it
// before OpenJournal.
func (s *Syncer) SetReserve(r *Reserve) { s.reserve = r }

// OpenJournal gives the syncer the write-ahead journal of log dir dir
// (files of at most fileBytes each, created when a round first spans many
// partitions and sized to the disk's free space; see journal.go): rounds
// that would fsync many segment files then write and fsync the journal
// once instead. Call it before opening the dir's logs, which replay what
// a previous run's journal holds for them when they recover, and
// StartJournal once they are all open.
func (s *Syncer) OpenJournal(fsys vfs.FS, dir string, fileBytes int64) error {
	if s.jrnl != nil {
		return errors.New("journal already open")
	}
	j, err := openJournal(fsys, filepath.Clean(dir), fileBytes, s.logger)
	if err != nil {
		return err
	}
	j.space = s.reserve
	j.checkpointed = s.persistCheckpointedRecoveryPoints
	s.mu.Lock()
	s.jrnl = j
	s.mu.Unlock()
	if n := len(j.recs); n > 0 {
		s.logger.Info("journal holds records to replay", "dir", dir, "partitions", n)
	}
	return nil
}

// StartJournal ends the recovery of the journal's log dir (every log is
// open): what the journal held is voided and rounds may use it. Logs
// opened with Options.DeferSync fsynced nothing of their recovery; first
// one SyncFS per log dir makes it all durable and moves their recovery
// points to their ends (Syncer.Close's trick at shutdown), and the
// recovery-point checkpoint file is written with them.
//
// Order (durability): every recovered segment byte, cut tail, rebuilt
// index and journal replay written into a segment must be durable BEFORE
// the journal that could replay it is voided; voided first, a power cut
// would lose acknowledged records that only the journal still held. A
// failed SyncFS therefore leaves the journal whole and fails the start.
func (s *Syncer) StartJournal() error {
	for _, c := range s.registries() {
		if err := c.applyDeferred(); err != nil {
			return err
		}
		// The recovery points recovery moved (now durable) go to the
		// file at once rather than at the first periodic checkpoint (as
		// Kafka's, log.flush.offset.checkpoint.interval.ms after the
		// start): a crash soon after this start (a crash loop) then
		// scans nothing this one already recovered. A failed write only
		// costs that longer scan.
		if err := c.persist(ckRecovery, false); err != nil {
			s.logger.Warn("write recovery point checkpoint after recovery", "dir", c.dir, "err", err)
		}
	}
	if s.jrnl == nil {
		return nil
	}
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	return s.jrnl.start()
}

// JournalStats returns the journal's counters (zero without a journal).
func (s *Syncer) JournalStats() JournalStats {
	if s.jrnl == nil {
		return JournalStats{}
	}
	return s.jrnl.Stats()
}

// journalFor returns the journal when it belongs to the log dir of l.
func (s *Syncer) journalFor(l *Log) *journal {
	if s.jrnl == nil || s.jrnl.fsys != l.fsys || s.jrnl.dir != filepath.Dir(filepath.Clean(l.dir)) {
		return nil
	}
	return s.jrnl
}

// beginCut prepares a cut of l (TruncateTo, TruncateFullyAndStartAt):
// when l's bytes may be in the journal, it holds the round lock (no round
// journals l's bytes until the cut is done) and makes room for the cut's
// record, which the caller writes with journalCut under l.mu. The returned
// func ends it.
func (s *Syncer) beginCut(l *Log) func() {
	j := s.journalFor(l)
	if j == nil || !j.started {
		return func() {}
	}
	s.roundMu.Lock()
	for j.isReady() && !j.reserve(truncRecordSize(l)) && j.err() == nil {
		j.wait() // the other file's checkpoint frees it
	}
	return s.roundMu.Unlock
}

// journalCut journals (fsynced) that l is cut at offset, so that no record
// of l written before is replayed after a crash (beginCut first; l.mu
// held; l's bytes so far fsynced in its segments).
func (s *Syncer) journalCut(l *Log, offset int64) error {
	j := s.journalFor(l)
	if j == nil || !j.started || j.err() != nil || !j.isReady() {
		return nil // nothing journaled since the start: nothing to void
	}
	return j.writeTruncate(l, offset)
}

// maxSharedConfigs bounds Syncer.cfgs: past it the table starts over
// (logs keep their pointers; only the sharing of later ones is lost).
const maxSharedConfigs = 1024

// config returns a shared copy of the (normalized) cfg. The Config a log
// points to is never modified: UpdateConfig swaps the pointer.
func (s *Syncer) config(cfg Config) *Config {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	if c, ok := s.cfgs[cfg]; ok {
		return c
	}
	if s.cfgs == nil || len(s.cfgs) >= maxSharedConfigs {
		s.cfgs = map[Config]*Config{}
	}
	c := &cfg
	s.cfgs[cfg] = c
	return c
}

// DefaultDirFileCache is how many segment files (closed and active
// segments) the logs sharing a Syncer keep open together when
// Options.Files is not set (the broker shares one cache of
// strata.log.max.open.files, the same default, over its log dirs).
const DefaultDirFileCache = 10000

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
	if s.jrnl != nil {
		// Every journaled byte becomes durable in its segment (one
		// SyncFS), then the journal is voided: a clean start replays
		// nothing.
		s.jrnl.wait()
		if err := s.jrnl.release("shutdown"); err != nil {
			errs = append(errs, err)
		}
		s.jrnl.close()
	}
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

// persistCheckpointedRecoveryPoints writes the recovery-point checkpoint
// after a journal checkpoint moved the recovery points of the logs whose
// bytes the journal file held (one SyncFS made them durable). Without it
// the file would wait for the broker's log.flush.offset.checkpoint.interval.ms
// (60 s by default), and a crash would make recovery re-read (CRC check)
// everything the journal's logs received in that time, though all of it
// but the journal's last two files was already durable: with it, what a
// crash leaves past the recovery points is bounded by the journal's size,
// whatever the partition count and the write rate. One checkpoint file
// (tmp + fdatasync + rename + dir fsync) per journal file filled, in the
// checkpoint's goroutine, off the group-commit rounds.
func (s *Syncer) persistCheckpointedRecoveryPoints() {
	for _, c := range s.registries() {
		if err := c.persist(ckRecovery, false); err != nil {
			s.logger.Warn("write recovery point checkpoint after journal checkpoint", "dir", c.dir, "err", err)
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
	idle := time.NewTicker(journalIdleCheck)
	defer idle.Stop()
	for {
		select {
		case <-s.wake:
			s.round()
		case now := <-idle.C:
			s.releaseIdleJournal(now)
		case <-s.stop:
			s.round()
			return
		}
	}
}

// journalIdleCheck is how often the syncer checks whether its journal's
// files went unused for journalIdleRelease.
const journalIdleCheck = 10 * time.Second

// releaseIdleJournal removes the journal's files when no round used them
// for journalIdleRelease, so an idle broker holds no disk space for them.
func (s *Syncer) releaseIdleJournal(now time.Time) {
	s.mu.Lock()
	j := s.jrnl
	s.mu.Unlock()
	if j == nil {
		return
	}
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	if err := j.releaseIfIdle(now); err != nil {
		s.logger.Warn("release idle journal", "dir", j.dir, "err", err)
	}
}

// fsys returns the file system of the logs of preps named by who.
func (s *Syncer) fsys(preps []syncPrep, who []int) vfs.FS { return preps[who[0]].fsys }

// maxParallelSyncs bounds concurrent fdatasync calls within one round.
const maxParallelSyncs = 16

func (s *Syncer) round() {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
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

	useJournal := s.jrnl != nil && s.jrnl.started && len(logs) >= journalMinFiles
	preps := make([]syncPrep, len(logs))
	for i, l := range logs {
		jl := s.jrnl != nil && s.jrnl.started && s.journalFor(l) != nil
		preps[i] = l.prepareSync(useJournal && jl, jl)
	}
	errs := make([]error, len(logs))
	journaled := make([]bool, len(logs))
	// A long poll over several logs of the round wakes once, when all of
	// them are readable (wakeBatch).
	var wakes *wakeBatch
	if len(logs) > 1 {
		wakes = &wakeBatch{}
	}
	if c := syncFSRound(preps); c != nil {
		// Many new partition directories: one SyncFS of their log dir
		// makes them and every byte of the round durable in place.
		err := c.syncAll()
		for i := range preps {
			for _, f := range preps[i].files {
				f.Release()
			}
			if preps[i].jfile != nil {
				preps[i].jfile.Release()
				preps[i].jfile = nil
			}
			logs[i].finishSync(preps[i], err, false, wakes)
		}
		wakes.flush()
		s.persistRecoveryPoints()
		return
	}
	if useJournal {
		s.journalRound(preps, errs, journaled)
	}
	// New partition directories (each once per round) with the files: a
	// log's bytes count as durable only once both are synced.
	dirs := map[string][]int{}
	var dirNames []string
	for i := range preps {
		for _, d := range preps[i].dirs {
			if dirs[d] == nil {
				dirNames = append(dirNames, d)
			}
			dirs[d] = append(dirs[d], i)
		}
	}
	type logFile struct {
		i int // the log's index in preps
		f *SegmentFile
	}
	var files []logFile
	for i := range preps {
		for _, f := range preps[i].files {
			files = append(files, logFile{i, f})
		}
	}
	var mu sync.Mutex
	fail := func(err error, who ...int) {
		mu.Lock()
		for _, i := range who {
			errs[i] = err
		}
		mu.Unlock()
	}
	parallel.ForEach(len(dirNames)+len(files), maxParallelSyncs, func(k int) error {
		if k < len(dirNames) {
			d := dirNames[k]
			who := dirs[d]
			fsys := s.fsys(preps, who)
			sync := fsys.SyncDir
			if len(who) == 1 && preps[who[0]].dirs[0] == d {
				epochs := preps[who[0]].epochs
				sync = func(d string) error { return syncNewDir(fsys, d, epochs) }
			}
			if err := sync(d); err != nil {
				fail(err, who...)
			}
			return nil
		}
		lf := files[k-len(dirNames)]
		err := lf.f.f.Sync()
		lf.f.Release()
		if err != nil {
			fail(err, lf.i)
		}
		return nil
	})
	for i, l := range logs {
		l.finishSync(preps[i], errs[i], journaled[i], wakes)
	}
	wakes.flush()
	s.persistRecoveryPoints()
}

// syncFSNewDirs is how many new partition directories a round must make
// durable for it to use one SyncFS of their log dir instead: each new
// directory otherwise costs three fsyncs (partition.metadata, the leader
// epoch checkpoint, the directory), so the first produce spread over a
// thousand partitions just created paid three thousand. SyncFS flushes
// whatever else is dirty on the file system too, so it is kept for these
// rounds, which come once per new partition.
const syncFSNewDirs = 32

// syncFSRound returns the log dir registry whose SyncFS the round should
// use instead of fsyncs: when at least syncFSNewDirs of its logs have a new
// directory and every log of the round is in that one log dir.
func syncFSRound(preps []syncPrep) *dirCheckpoints {
	var c *dirCheckpoints
	n := 0
	for i := range preps {
		p := &preps[i]
		if p.log.ck == nil || (c != nil && (p.log.ck != c || p.fsys != preps[0].fsys)) {
			return nil
		}
		c = p.log.ck
		if len(p.dirs) > 0 {
			n++
		}
	}
	if n < syncFSNewDirs {
		return nil
	}
	return c
}

// journalRound makes the new bytes of the logs prepared for the journal
// durable with one journal write and fsync. When too few logs qualify or
// the journal has no room, their active segment files go back to the
// round's direct fsyncs.
func (s *Syncer) journalRound(preps []syncPrep, errs []error, journaled []bool) {
	var total int64
	n := 0
	for i := range preps {
		if p := &preps[i]; p.jfile != nil {
			total += recordSize(p.log, p.mark.pos-p.jfrom)
			n++
		}
	}
	j := s.jrnl
	if n < journalMinFiles || !j.reserve(total) {
		for i := range preps {
			if p := &preps[i]; p.jfile != nil {
				p.files = append(p.files, p.jfile)
				p.jfile = nil
			}
		}
		return
	}
	// The round is built and written in parts of about journalPart bytes
	// (whole records), then fsynced once.
	buf := j.buf[:0]
	var written int64
	var err error
	flush := func() {
		if err == nil && len(buf) > 0 {
			err = j.writePart(buf, written)
		}
		written += int64(len(buf))
		buf = buf[:0]
	}
	marks := make([]jmark, 0, n)
	for i := range preps {
		p := &preps[i]
		if p.jfile == nil {
			continue
		}
		size := p.mark.pos - p.jfrom
		start := len(buf)
		buf = appendJrecHeader(buf, j.gen, p.log, p.mark.base, p.jfrom, size)
		buf = slices.Grow(buf, int(size))[:len(buf)+int(size)]
		if _, rerr := p.jfile.f.ReadAt(buf[len(buf)-int(size):], p.jfrom); rerr != nil {
			// Cannot copy: this log's file is fsynced directly.
			buf = buf[:start]
			p.files = append(p.files, p.jfile)
			p.jfile = nil
			continue
		}
		sealJrec(buf, start)
		marks = append(marks, jmark{p.log, p.mark, p.cuts})
		if len(buf) >= journalPart {
			flush()
		}
	}
	flush()
	if err == nil {
		err = j.commit(written, len(marks), marks)
	}
	if cap(buf) <= journalKeepBuf {
		j.buf = buf[:0]
	} else {
		j.buf = nil
	}
	for i := range preps {
		if p := &preps[i]; p.jfile != nil {
			p.jfile.Release()
			p.jfile = nil
			errs[i] = err
			journaled[i] = true
		}
	}
}
