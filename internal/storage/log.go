package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// Options are the per-log dependencies.
type Options struct {
	FS     vfs.FS
	Syncer *Syncer // group commit shared by every log of a log dir
	Logger *slog.Logger
	Clock  clock.Clock // the time source; nil = clock.Real()
	// ProducerIDExpiration is producer.id.expiration.ms (24h).
	ProducerIDExpiration time.Duration
	// Files bounds open closed-segment files and loaded indexes; share one
	// across the logs of a broker. Nil uses the Syncer's cache (shared by
	// the logs of a dir, DefaultDirFileCache entries), or a private cache
	// of 4 when the log has its own syncer.
	Files *FileCache
	// Reserve is the log dir's free-space reserve (strata.log.min.free.bytes;
	// nil: none): appends, cleaner output and segment preallocation stop
	// before the disk's free space falls below it.
	Reserve *Reserve
	// DeferSync is for a broker opening all its logs at startup, before
	// its Syncer's StartJournal voids the log dir's journal: what recovery
	// makes durable (bytes past the recovery point, a cut tail, the
	// directory's entries) is not fsynced per log; StartJournal makes the
	// whole dir durable with one SyncFS first and only then moves these
	// logs' recovery points to their ends and voids the journal. A crash
	// before that recovers the logs again, the journal still whole. Needs
	// a shared Syncer (ignored without one); logs opened at runtime (new
	// partitions, reassignments) must not set it.
	DeferSync bool
}

// view is an immutable snapshot of what readers may see. A new view is
// published (atomically) after every change.
type view struct {
	segs     []*segment
	leo      int64
	hw       int64
	hwBase   int64 // base of the segment holding the high watermark
	hwPos    int64 // byte position of the high watermark in that segment
	logStart int64
	unstable int64 // first offset of the oldest undecided transaction, -1 = none
	durable  int64 // end of the fsynced data
	endBase  int64 // segment and byte position of the log end (replica reads)
	endPos   int64
}

// writeMark is where the log ends after a write: offset and position.
type writeMark struct {
	leo  int64
	base int64
	pos  int64
}

// Log is one topic partition's append-only log on disk: a directory
// "<topic>-<partition>" of segments named by 20-digit base offsets. One
// writer at a time (Append is serialised internally); readers run
// concurrently and take no lock across disk I/O.
type Log struct {
	// inv is how far the invariants build has checked the active
	// segment's offset index (see invariants.go); no bytes in other
	// builds.
	inv invCursor

	// The fields are grouped so that an idle log's struct stays small
	// (issue 18: ten thousand of them on a broker); the flags are together
	// in one word below.
	dir     string
	topicID [16]byte // from partition.metadata
	fsys    vfs.FS
	logger  *slog.Logger
	now     func() time.Time
	cfg     atomic.Pointer[Config] // shared with the dir's logs of the same settings (Syncer.config)
	// From Options: the shared file cache, the log dir's free-space
	// reserve and producer.id.expiration.ms.
	files         *FileCache
	reserve       *Reserve
	pidExpiration time.Duration

	syncer *Syncer
	ck     *dirCheckpoints // root checkpoints of the log dir
	key    tp              // topic and partition

	v atomic.Pointer[view]

	// hwMu guards hwCh, closed (and cleared) whenever the high watermark
	// moves, and the waiters fired then. hwCh is made by the first
	// HighWatermarkChanged after a move: an idle log holds none.
	hwMu    sync.Mutex
	hwCh    chan struct{}
	waiters []waiterReg
	// endWaiters are fired when the log end moves (AddEndWaiter);
	// nEndWaiters is their number, read without hwMu by publishView.
	endWaiters  []waiterReg
	nEndWaiters atomic.Int32
	// wakes, when set, holds back the waiters' wake-ups (a sync round's
	// wakeBatch; see holdWakes).
	wakes *wakeBatch

	// mu serialises writers (Append, roll, retention, cleaner swaps, sync
	// bookkeeping). Readers never take it.
	mu            sync.Mutex
	segs          []*segment
	active        *segment
	mark          writeMark // end of written data
	synced        writeMark // end of durable data: fsynced in the segments or in the journal
	flushed       writeMark // end of data fsynced in the segment files (the recovery point)
	logStart      int64
	recoveryPoint atomic.Int64 // flushed.leo
	cuts          uint64       // truncations so far (TruncateTo, TruncateFullyAndStartAt); see markFlushed
	ckptRecovery  int64        // recovery point last set in the log dir checkpoint
	ps            *producerState
	epochs        epochCache
	recEpochs     []EpochEntry // epochs seen by recovery (load only)
	// epochVer counts changes to the history or its file; AssignEpochs
	// finds with it that nothing came between its phases.
	epochVer uint64
	dirty    bool // active segment has unsynced bytes
	// changed: what a clean start reads (the producer snapshot at the log
	// end, the active segment's index files) is out of date on disk, so
	// Close must write it; a log that only served reads since it opened
	// closes without writing a byte.
	changed bool
	// dirsUnsynced: the partition directory is new and neither it nor its
	// entry in the log dir is fsynced yet (see load).
	dirsUnsynced bool
	// epochNoSync: the directory is new (created by this Open) and its
	// first sync has not begun: the leader epoch checkpoint is written
	// without fsync (epochUnsynced) and that first sync fsyncs it with
	// partition.metadata (syncNewDir), before any byte counts as durable.
	// A thousand new partitions' first appends then cost no fsync each
	// under the log lock (Kafka too keeps fsyncs out of UnifiedLog's lock,
	// KAFKA-15046).
	epochNoSync bool
	// epochUnsynced: the leader epoch checkpoint was written without
	// fsync; the directory's first sync fsyncs it.
	epochUnsynced bool
	// epochStale: the file still holds trailing epochs that the open
	// dropped from memory (their start is at or past the log end, so a
	// load drops them again); it is rewritten before the log end moves
	// past them (writeLocked), unless a write came first. See loadEpochs.
	epochStale bool
	// recFull: this Open's recovery read the whole log (nothing below a
	// recovery point was trusted), so the batches rebuilt the whole leader
	// epoch history (recEpochs) and an unreadable checkpoint file left by
	// a power cut before the directory's first sync can be ignored.
	recFull bool
	// hwTrusted: the log stopped being replicated in this incarnation
	// (UnsetReplicated): its high watermark, its own fsynced end since,
	// is committed, and replication starting again may keep it.
	hwTrusted bool
	// ownSyncer: the log made its Syncer (Options.Syncer was nil).
	ownSyncer bool
	// deferSync: opened with Options.DeferSync; recovery fsyncs nothing,
	// the Syncer's StartJournal makes the dir durable (one SyncFS).
	deferSync bool
	closed    bool
	// idxDisk: the active segment's in-memory indexes, as the open left
	// them, are those of its index files (see idleWriter).
	idxDisk bool
	// epochFence is the newest epoch an AssignEpochs batch took up for
	// this log (0: none): from its first phase on, Append refuses records
	// of an older leader epoch. Otherwise a leadership still serving the
	// old epoch while the batch makes the new one durable would append
	// past the offset the new epoch's entry names, with the old epoch
	// stamped on them, and OffsetForLeaderEpoch would answer a consumer
	// that read them that its epoch ended before them (Kafka's makeLeader
	// holds the partition's leaderIsrUpdateLock against appends).
	epochFence int32
	// epochDisk is what the leader epoch checkpoint file holds (as read
	// at open or last written), nil when not known: a write of the same
	// content is skipped (writeEpochCheckpoint).
	epochDisk []byte
	// metaPending: partition.metadata could not be written at open (a
	// full disk after a crash took the unsynced file); it is written
	// before the directory's first fsync (writePendingMeta).
	metaPending *[16]byte
	// closing holds (with a reference each) the .log files of rolled
	// segments not yet fsynced; the recovery point checkpoint moves past
	// them once a sync round or Flush covered them.
	closing   []*SegmentFile
	lastFlush int64 // l.now() in Unix nanoseconds at the last flush (flush.ms)
	// psExpireMs is the time of the last producer id expiry pass
	// (MaybeRoll) that found the producer state not loaded yet (l.ps nil,
	// see loadProducers), 0 = none: its load expires as of then.
	psExpireMs int64
	failed     error
	deleter    *deleter
	// completing holds transactions whose marker is not yet below the high
	// watermark: they keep the last stable offset at their first offset.
	completing []completedTxn
	// verifying holds the transaction verification guard of each producer
	// id being verified here (verify.go; Kafka's VerificationStateEntry).
	verifying map[int64]*VerificationGuard
	// rebuildTxnFrom (load only) is the base of the first segment whose
	// .txnindex must be rebuilt from the log (-1 = none).
	rebuildTxnFrom int64
	txnFiles       map[int64]bool // bases with a .txnindex file (load only)
	lsoPos         atomic.Pointer[lsoMark]
	// rep is set while the high watermark is decided by replication
	// (StartReplication, SetHighWatermark), and from Open when the log
	// dir's replication-offset-checkpoint has the log; nil: it follows the
	// fsynced end (or the log end without durable acks). See follower.go.
	rep *replicated
}

// sinceMs is the time from then (Unix nanoseconds) to now in milliseconds.
func sinceMs(now time.Time, then int64) int64 {
	return (now.UnixNano() - then) / int64(time.Millisecond)
}

// Dir returns the partition directory path.
func (l *Log) Dir() string { return l.dir }

// Config returns the settings in force.
func (l *Log) Config() Config { return *l.cfg.Load() }

// UpdateConfig applies changed topic settings from the next operation on.
func (l *Log) UpdateConfig(cfg Config) {
	l.cfg.Store(l.syncer.config(cfg.normalized()))
}

// LogStartOffset is the first offset still readable.
func (l *Log) LogStartOffset() int64 { return l.v.Load().logStart }

// TopicID is the id of the log's topic (its partition.metadata).
func (l *Log) TopicID() [16]byte { return l.topicID }

// LogEndOffset is the next offset to be assigned.
func (l *Log) LogEndOffset() int64 { return l.v.Load().leo }

// HighWatermark is the end of the readable (durable) prefix.
func (l *Log) HighWatermark() int64 { return l.v.Load().hw }

// RecoveryPoint is the offset below which data is known fsynced in the
// segment files.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// setSynced records m as durable (under l.mu); flushed also when the
// segment files themselves were fsynced up to it.
func (l *Log) setSynced(m writeMark, flushed bool) {
	if m.leo > l.synced.leo || (m.leo == l.synced.leo && m.base > l.synced.base) {
		l.synced = m
		if !l.cfg.Load().Durable {
			// WaitDurable waits for synced whatever Config.Durable says;
			// publish wakes waiters only when the high watermark moves,
			// which without Durable does not wait for fsync.
			l.notifyHW()
		}
	}
	if flushed && (m.leo > l.flushed.leo || (m.leo == l.flushed.leo && m.base > l.flushed.base)) {
		l.flushed = m
		l.recoveryPoint.Store(m.leo)
	}
}

// markFlushed records that a journal checkpoint made the segment bytes
// up to m durable.
// cuts is l.cuts when the bytes were journaled: a mark from before a cut
// (TruncateTo) names bytes the log no longer has, and is ignored.
func (l *Log) markFlushed(m writeMark, cuts uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil || cuts != l.cuts || m.leo <= l.flushed.leo || m.leo > l.mark.leo {
		return
	}
	l.setSynced(m, true)
	if len(l.closing) == 0 {
		l.setRecoveryPoint(l.flushed.leo, false)
	}
}

// failFlush fails the log: a journal checkpoint could not make its bytes
// durable in its segments.
func (l *Log) failFlush(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail(err)
}

// Size is the total bytes of all segment files of the log.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.v.Load().segs {
		n += s.size.Load()
	}
	return n
}

// HighWatermarkChanged returns a channel closed the next time the high
// watermark advances or the last stable offset moves (for long-poll
// fetches).
func (l *Log) HighWatermarkChanged() <-chan struct{} {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	if l.hwCh == nil {
		l.hwCh = make(chan struct{})
	}
	return l.hwCh
}

func (l *Log) notifyHW() {
	l.hwMu.Lock()
	if l.hwCh != nil {
		close(l.hwCh)
		l.hwCh = nil
	}
	for _, r := range l.waiters {
		if l.wakes != nil {
			r.w.mark(r.tag)
			l.wakes.add(r.w)
			continue
		}
		r.w.fire(r.tag)
	}
	l.hwMu.Unlock()
}

// publish installs a new reader view from the writer state (under l.mu).
func (l *Log) publish() { l.publishView(false) }

// publishView installs the view; back allows the high watermark to move
// back (TruncateTo, StartReplication); otherwise it never does.
func (l *Log) publishView(back bool) {
	old := l.v.Load()
	cfg := l.cfg.Load()
	hw := l.synced
	if !cfg.Durable || hw.leo > l.mark.leo {
		hw = l.mark
	}
	if l.rep != nil {
		hw = l.replicatedMark()
	}
	if old != nil && hw.leo < old.hw && !back {
		// Never move backwards (e.g. switching to Durable at run time).
		hw = writeMark{leo: old.hw, base: old.hwBase, pos: old.hwPos}
	}
	nv := &view{segs: l.segs, leo: l.mark.leo, hw: hw.leo, hwBase: hw.base, hwPos: hw.pos, logStart: l.logStart,
		unstable: l.firstUnstable(hw.leo), durable: min(l.synced.leo, l.mark.leo), endBase: l.mark.base, endPos: l.mark.pos}
	l.v.Store(nv)
	if old == nil || nv.hw > old.hw || nv.lso() != old.lso() {
		l.notifyHW()
	}
	if l.rep != nil && old != nil && nv.durable > old.durable && l.rep.onDurable != nil {
		l.rep.onDurable(nv.durable)
	}
	if old == nil || nv.leo != old.leo {
		l.notifyEnd()
	}
}

// Open opens (creating if absent) the partition directory dir, runs crash
// recovery when the log dir was not shut down cleanly (cleanShutdown=false),
// completes or rolls back interrupted segment swaps, and loads producer
// state. topicID is written to partition.metadata.
func Open(dir string, topicID [16]byte, cfg Config, cleanShutdown bool, opts Options) (*Log, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ProducerIDExpiration == 0 {
		opts.ProducerIDExpiration = 24 * time.Hour
	}
	if opts.Files == nil && opts.Syncer != nil {
		opts.Files = opts.Syncer.files
	}
	if opts.Files == nil {
		opts.Files = NewFileCache(4)
	}
	topic, part, err := ParsePartitionDir(dir)
	if err != nil {
		return nil, err
	}
	cfg = cfg.normalized()
	l := &Log{
		dir: dir, fsys: opts.FS, logger: partitionLogger(opts.Logger, filepath.Base(dir)), now: time.Now,
		files: opts.Files, reserve: opts.Reserve, pidExpiration: opts.ProducerIDExpiration,
		ps: newProducerState(),

		rebuildTxnFrom: -1,
	}
	if opts.Syncer == nil {
		l.syncer = NewSyncer(opts.Logger)
		l.ownSyncer = true
	} else {
		l.syncer = opts.Syncer
		l.deferSync = opts.DeferSync
	}
	l.cfg.Store(l.syncer.config(cfg))
	l.key = tp{topic, part}
	if opts.Clock != nil {
		l.now = opts.Clock.Now // a method value: made only for a clock other than the real one
	}
	ck, err := l.syncer.checkpoints(l.fsys, filepath.Dir(filepath.Clean(dir)), opts.Logger, l.ownSyncer)
	l.ck = ck
	if err == nil {
		err = l.load(topicID, cleanShutdown)
	}
	if err != nil {
		l.closeFiles()
		if l.deleter != nil {
			l.deleter.close()
		}
		if l.ownSyncer {
			l.syncer.shutdown() // writes no checkpoint for a log that did not open
		}
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l.lastFlush = l.now().UnixNano()
	l.mu.Lock()
	if hw := l.ck.get(ckReplication, l.key); hw >= 0 {
		// Replicated when it last ran: its high watermark is the one
		// checkpointed, capped by the recovered end (Kafka's
		// Partition.createLog then UnifiedLog.updateHighWatermark), not
		// its own end, which may hold records the ISR never had.
		l.rep = &replicated{hw: hw}
		l.ck.track(l.key, l)
	}
	l.publish()
	l.checkInvariants(true)
	if l.flushed == l.mark && len(l.closing) == 0 {
		// Everything is durable: the active segment's file is closed
		// until the first append or read reopens it through the file
		// cache, so an idle partition holds no descriptor, and its
		// indexes are dropped until used.
		l.active.closeFile()
		l.files.remove(l.active)
		l.idleWriter()
	}
	l.mu.Unlock()
	return l, nil
}

func (l *Log) newSegment(base int64) *segment {
	cfg := l.cfg.Load()
	return &segment{
		base: base, log: l,
		maxIndexBytes: cfg.SegmentIndexBytes, indexInterval: cfg.IndexIntervalBytes,
		firstBatchTs: -1,
	}
}

// load runs the startup sequence (Kafka's LogLoader).
func (l *Log) load(topicID [16]byte, cleanShutdown bool) error {
	_, statErr := l.fsys.Stat(l.dir)
	if statErr != nil {
		if err := l.fsys.MkdirAll(l.dir, 0o755); err != nil {
			return err
		}
	}
	// A new partition directory is not fsynced now: nothing in it needs to
	// survive a power cut until a record is acknowledged, and a lost one is
	// created again at the next start. The first sync of the log (a
	// group-commit round, Flush, a roll) fsyncs it and its parent first, so
	// creating a thousand partitions costs no fsync per partition.
	l.dirsUnsynced = errNotExist(statErr)
	l.epochNoSync = l.dirsUnsynced
	// A directory made just now is empty: no file to read or list.
	fresh := errNotExist(statErr)
	var err error
	if l.topicID, err = l.writePartitionMetadata(topicID, fresh); err != nil {
		return err
	}
	var ents []fs.DirEntry
	if !fresh {
		if ents, err = l.fsys.ReadDir(l.dir); err != nil {
			return err
		}
	}
	if changed, err := completeSwapsIn(l.fsys, l.dir, ents, l.logger); err != nil {
		return err
	} else if changed {
		if ents, err = l.fsys.ReadDir(l.dir); err != nil {
			return err
		}
	}
	bases, snaps, err := l.scanDir(ents)
	if err != nil {
		return err
	}
	if errNotExist(statErr) {
		// A new partition: entries of an older partition of that name
		// (its topic deleted before the files were rewritten) are stale.
		l.ck.remove(l.key)
	}
	rp, ls, err := l.readCheckpoints(ents)
	if err != nil {
		return err
	}
	var mtimeMs int64 // of the last .log
	for _, b := range bases {
		s := l.newSegment(b)
		st, err := l.fsys.Stat(s.path(LogSuffix))
		if err != nil {
			return err
		}
		s.size.Store(st.Size())
		mtimeMs = st.ModTime().UnixMilli()
		l.segs = append(l.segs, s)
	}
	created := false
	if len(l.segs) == 0 {
		created = true
		l.segs = []*segment{l.newSegment(max(ls, 0))}
		if err := l.createSegmentFiles(l.segs[0], true); err != nil {
			return err
		}
	}
	last := l.segs[len(l.segs)-1]
	var leo int64
	if cleanShutdown {
		leo, err = l.loadClean(last)
		if err != nil {
			l.logger.Warn("clean open failed, recovering", "err", err)
			cleanShutdown = false
		}
	}
	dirChanged := created && !l.dirsUnsynced
	// idxStale: recovery left the active segment's indexes in memory with
	// entries its files lack (see recover).
	idxStale := false
	if !cleanShutdown {
		var changed bool
		l.recFull = max(rp, 0) <= l.segs[0].base
		// Gaps between segments past the recovery point are lost tails
		// (recover), unless a compacted log has no recovery point entry.
		gapsLost := rp >= 0 || !l.cfg.Load().Compact
		if created {
			// The segment was just created empty: nothing to recover.
			leo = l.segs[0].base
		} else if leo, changed, idxStale, err = l.recover(max(rp, 0), gapsLost); err != nil {
			return err
		}
		// Recovery found (and made durable) bytes past the recovery point
		// or cut a torn tail: a clean close writes the snapshot and
		// indexes. A log with nothing past its recovery point wrote
		// nothing and needs nothing written.
		l.changed = changed
		dirChanged = dirChanged || changed
		// Acknowledged bytes the segments lost but the log dir's journal
		// kept go back into them (then checked and fsynced like any bytes
		// past the recovery point).
		if recs := l.syncer.journalFor(l).recordsFor(l); len(recs) > 0 {
			from := leo
			wrote, err := l.replayJournal(recs, leo)
			if err != nil {
				return err
			}
			if wrote {
				rebuild := l.rebuildTxnFrom
				if leo, _, idxStale, err = l.recover(from, gapsLost); err != nil {
					return err
				}
				if rebuild >= 0 && (l.rebuildTxnFrom < 0 || rebuild < l.rebuildTxnFrom) {
					l.rebuildTxnFrom = rebuild // -1: none
				}
				l.changed, dirChanged = true, true
			}
		}
	}
	if ls > leo {
		// Kafka §3.2 step 5: everything below the log start is gone.
		for _, s := range l.segs {
			l.removeSegmentFiles(s)
		}
		l.segs = []*segment{l.newSegment(ls)}
		if err := l.createSegmentFiles(l.segs[0], true); err != nil {
			return err
		}
		created = true
		leo = ls
	}
	l.logStart = max(ls, l.segs[0].base)
	if created || l.changed {
		// The last .log is new, or recovery or the journal replay may have
		// cut or written it since it was stat'ed.
		mtimeMs = 0
	}
	if err := l.openActive(mtimeMs); err != nil {
		return err
	}
	// A clean open read the active segment's indexes from its files; an
	// empty active segment has none. A recovery may hold entries its files
	// lack (the scan from their last entry): kept in memory.
	l.idxDisk = cleanShutdown || l.active.size.Load() == 0
	act := l.active
	l.mark = writeMark{leo: leo, base: act.base, pos: act.size.Load()}
	l.setSynced(l.mark, true)
	if dirChanged && !l.deferSync {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return err
		}
	}
	// The recovery point is the exact offset below which everything is
	// fsynced (Kafka's meaning): now the log end. Memory only: the file may
	// keep a lower value until the next checkpoint write, which only costs
	// a longer scan after a crash. A value above the end (the data below
	// it was lost) must go at once, or a later crash would trust bytes
	// written after this start without checking them.
	l.ckptRecovery = rp
	switch {
	case rp > leo:
		if err := l.setRecoveryPoint(leo, true); err != nil {
			return err
		}
		if l.deferSync && (dirChanged || l.changed) {
			l.syncer.deferRecoveryPoint(l.ck, l.key, leo)
		}
	case l.deferSync && (rp != leo || dirChanged || l.changed):
		// Nothing recovery wrote was fsynced: the checkpoint entry moves
		// to leo only after StartJournal's SyncFS of the dir (the
		// registry keeps the old, lower value until then, so a checkpoint
		// written meanwhile by another log never claims these bytes
		// durable). The log is not served before StartJournal, so its own
		// marks may already say leo.
		l.ckptRecovery = leo
		l.syncer.deferRecoveryPoint(l.ck, l.key, leo)
	case rp != leo:
		l.ckptRecovery = leo
		l.ck.set(ckRecovery, l.key, leo, false)
	}
	if err := l.loadEpochs(leo, l.recEpochs, fresh); err != nil {
		return err
	}
	l.recEpochs = nil
	l.loadTxnIndexes()
	if idxStale {
		// A clean close writes the active segment's indexes (and the
		// producer snapshot): what the next clean start reads.
		l.changed = true
	}
	if l.rebuildTxnFrom < 0 && len(snaps) == 0 && leo <= l.segs[0].base {
		// An empty log (a new partition): an empty state, read from nothing.
		l.ps = newProducerState()
		return nil
	}
	if l.rebuildTxnFrom < 0 && (len(snaps) == 0 || snaps[len(snaps)-1] <= leo) {
		// Nothing to rebuild or remove: the producer state is loaded by
		// its first use (loadProducers), as Kafka loads an index by its
		// first use (LazyIndex). l.ps stays nil until then.
		l.ps = nil
		return nil
	}
	return l.loadProducerState(snaps, leo)
}

// loadProducers loads the producer state the open left to its first use
// (l.ps nil; under l.mu): every writer (appends, roll, retention, the
// cleaner's swaps, a close that writes the snapshot) and every reader of
// it (readerView, Producers, StartTxnVerification) calls it first, so it
// reads the same snapshot and batches the open would have read. Producer
// ids that an expiry pass (MaybeRoll) would have dropped while it was not
// loaded are dropped as it loads (psExpireMs). A failure fails the log.
func (l *Log) loadProducers() error {
	if l.ps != nil {
		return nil
	}
	if l.failed != nil {
		return fmt.Errorf("%s: %v: %w", l.dir, l.failed, kerr.KafkaStorageError)
	}
	expireMs := l.psExpireMs
	snaps, err := l.listSnapshots()
	if err == nil {
		err = l.loadProducerState(snaps, l.mark.leo)
	}
	if err != nil {
		l.ps = nil
		l.psExpireMs = expireMs
		return l.fail(fmt.Errorf("load producer state: %w", err))
	}
	if expireMs != 0 {
		l.ps.expire(expireMs, l.pidExpiration.Milliseconds())
	}
	l.publish() // the last stable offset is known now
	return nil
}

// unstablePending is view.unstable while the producer state is not loaded.
const unstablePending = -2

// readerView is the reader view, first loading the producer state when
// the open left it for later (the view's last stable offset needs it).
// Only a partition's first reader waits on l.mu for it.
func (l *Log) readerView() *view {
	v := l.v.Load()
	if v.unstable != unstablePending {
		return v
	}
	l.mu.Lock()
	if !l.closed {
		l.loadProducers()
	}
	l.mu.Unlock()
	return l.v.Load()
}

// scanDir removes leftovers (.deleted, .tmp, orphan indexes) among the
// partition directory's entries and returns the sorted segment bases and
// snapshot offsets.
func (l *Log) scanDir(ents []fs.DirEntry) (bases, snaps []int64, err error) {
	logs := map[int64]bool{}
	l.txnFiles = map[int64]bool{}
	var idx []string
	for _, e := range ents {
		name := e.Name()
		full := filepath.Join(l.dir, name)
		switch {
		case hasSuffix(name, DeletedSuffix), hasSuffix(name, TmpSuffix):
			if err := l.fsys.Remove(full); err != nil && !errNotExist(err) {
				return nil, nil, err
			}
		case hasSuffix(name, LogSuffix):
			if b, ok := parseBase(name); ok {
				logs[b] = true
				bases = append(bases, b)
			}
		case hasSuffix(name, TxnIndexSuffix):
			idx = append(idx, name)
			if b, ok := parseBase(name); ok {
				l.txnFiles[b] = true
			}
		case hasSuffix(name, IndexSuffix), hasSuffix(name, TimeIndexSuffix):
			idx = append(idx, name)
		case hasSuffix(name, SnapshotSuffix):
			if b, ok := parseBase(name); ok {
				snaps = append(snaps, b)
			}
		}
	}
	for _, name := range idx {
		if b, ok := parseBase(name); ok && !logs[b] {
			l.fsys.Remove(filepath.Join(l.dir, name))
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	sort.Slice(snaps, func(i, j int) bool { return snaps[i] < snaps[j] })
	return bases, snaps, nil
}

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }

// readCheckpoints returns the partition's recovery point and log start
// offset from the log dir's root checkpoints (-1 when absent). Checkpoint
// files left inside the partition directory by older Strata versions are
// merged in (the lower recovery point, the higher log start), written to
// the root files and deleted.
func (l *Log) readCheckpoints(dirEnts []fs.DirEntry) (rp, ls int64, err error) {
	rp = l.ck.get(ckRecovery, l.key)
	ls = l.ck.get(ckLogStart, l.key)
	var legacy []string
	for k, name := range ckNames {
		if !slices.ContainsFunc(dirEnts, func(e fs.DirEntry) bool { return e.Name() == name }) {
			continue // none: the usual case, known without a syscall
		}
		full := filepath.Join(l.dir, name)
		ents, err := ReadCheckpoint(l.fsys, full)
		if err != nil {
			return -1, -1, err
		}
		if _, serr := l.fsys.Stat(full); serr == nil {
			legacy = append(legacy, full)
		}
		for _, e := range ents {
			if e.Topic != l.key.topic || e.Partition != l.key.partition {
				continue
			}
			if k == ckRecovery && (rp < 0 || e.Offset < rp) {
				rp = e.Offset
			}
			if k == ckLogStart && e.Offset > ls {
				ls = e.Offset
			}
		}
	}
	if len(legacy) == 0 {
		return rp, ls, nil
	}
	if rp >= 0 {
		l.ck.set(ckRecovery, l.key, rp, false)
	}
	if ls >= 0 {
		l.ck.set(ckLogStart, l.key, ls, false)
	}
	// Unforced: partitions migrating at once share the writes; an entry
	// that did not change is already in the root files.
	if err := l.ck.persistAll(false); err != nil {
		l.logger.Warn("cannot move partition checkpoints to the log dir root yet", "err", err)
		return rp, ls, nil
	}
	for _, f := range legacy {
		if err := l.fsys.Remove(f); err != nil && !errNotExist(err) {
			l.logger.Warn("remove old partition checkpoint", "file", f, "err", err)
		}
	}
	l.logger.Info("moved partition checkpoints to the log dir root", "files", len(legacy))
	return rp, ls, l.fsys.SyncDir(l.dir)
}

// writeLogStartCheckpoint persists the log start offset in the log dir's
// log-start-offset-checkpoint at once.
func (l *Log) writeLogStartCheckpoint(off int64) error {
	l.ck.set(ckLogStart, l.key, off, true)
	return l.ck.persist(ckLogStart, false)
}

// setRecoveryPoint records rp, the offset below which every byte of the
// log (and every closed segment's indexes) is fsynced, in the log dir's
// recovery-point checkpoint registry. The file is written by the broker's
// periodic checkpoint (log.flush.offset.checkpoint.interval.ms), by
// Syncer.Close, at the end of a group-commit round when a log's recovery
// point entered a newer segment (so a crash rescans at most the active
// segment, as before exact recovery points), and at once when now is set
// (the value went down: TruncateTo, lost data).
func (l *Log) setRecoveryPoint(rp int64, now bool) error {
	if rp == l.ckptRecovery && !now {
		return nil
	}
	urgent := now || l.ckptRecovery < l.active.base
	l.ckptRecovery = rp
	l.ck.set(ckRecovery, l.key, rp, urgent)
	if now {
		return l.ck.persist(ckRecovery, false)
	}
	return nil
}

// writePartitionMetadata checks or writes partition.metadata and returns
// the partition's topic id.
func (l *Log) writePartitionMetadata(topicID [16]byte, fresh bool) ([16]byte, error) {
	name := filepath.Join(l.dir, PartitionMetaFile)
	var data []byte
	err := fs.ErrNotExist
	if !fresh {
		data, err = vfs.ReadFile(l.fsys, name)
	}
	if err == nil {
		old, perr := ParsePartitionMetadata(data)
		if perr == nil {
			if old != topicID && topicID != ([16]byte{}) {
				return old, fmt.Errorf("partition.metadata topic id %x differs from %x: %w", old, topicID, kerr.InconsistentTopicID)
			}
			return old, nil
		}
		l.logger.Warn("rewriting unreadable partition.metadata", "err", perr)
	} else if !errNotExist(err) {
		return topicID, err
	}
	if l.dirsUnsynced {
		// A new directory: durable with it (a torn or lost file is written
		// again at the next start).
		err = writeFileNoSync(l.fsys, name, FormatPartitionMetadata(topicID))
	} else {
		err = vfs.WriteFileAtomic(l.fsys, name, FormatPartitionMetadata(topicID), 0o644)
	}
	if err != nil {
		// A crash can take the file (written without fsync) and a full disk
		// then refuses it again: the log still opens and serves what it
		// has, and the file is written before the directory's first fsync
		// (Kafka too writes partition.metadata apart from opening the log,
		// PartitionMetadataFile.maybeFlush). Without it the directory counts
		// as new, so nothing in it is durable until the file is.
		l.logger.Warn("partition.metadata not written; retried before the log's first fsync", "dir", l.dir, "err", err)
		id := topicID
		l.metaPending = &id
		l.dirsUnsynced = true
		_ = l.fsys.Remove(name + ".tmp")
		_ = l.fsys.Remove(name) // no empty or torn file left to be fsynced as if written
	}
	return topicID, nil
}

// writePendingMeta writes partition.metadata when it could not be written
// at open (metaPending); syncDirsLocked and the sync rounds then fsync it
// with the directory. l.mu must be held.
func (l *Log) writePendingMeta() error {
	if l.metaPending == nil {
		return nil
	}
	name := filepath.Join(l.dir, PartitionMetaFile)
	if err := writeFileNoSync(l.fsys, name, FormatPartitionMetadata(*l.metaPending)); err != nil {
		_ = l.fsys.Remove(name) // syncNewDir then fails instead of syncing an empty file
		return err
	}
	l.metaPending = nil
	return nil
}

// syncDirsLocked fsyncs a new partition directory and its parent once,
// before the first bytes of the log are counted as durable.
func (l *Log) syncDirsLocked() error {
	if !l.dirsUnsynced {
		return nil
	}
	if err := l.writePendingMeta(); err != nil {
		return err
	}
	l.epochNoSync = false
	if err := syncNewDir(l.fsys, l.dir, l.epochUnsynced); err != nil {
		return err
	}
	if err := l.fsys.SyncDir(filepath.Dir(l.dir)); err != nil {
		return err
	}
	l.dirsUnsynced, l.epochUnsynced = false, false
	return nil
}

// syncNewDir makes a new partition directory durable: its
// partition.metadata (written without fsync) and its entries. The caller
// fsyncs the parent.
func syncNewDir(fsys vfs.FS, dir string, epochs bool) error {
	names := []string{filepath.Join(dir, PartitionMetaFile)}
	if epochs {
		names = append(names, filepath.Join(dir, LeaderEpochFile))
	}
	for _, name := range names {
		f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
		if err != nil {
			return fmt.Errorf("fsync %s: %w", name, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("fsync %s: %w", name, err)
		}
	}
	return fsys.SyncDir(dir)
}

// loadClean trusts a cleanly closed log: it finds the end of the last
// segment from the last entry of its .index file (read alone: the indexes
// themselves are loaded by their first use, segment.indexes) and the
// batch headers past it, without a full scan. An empty segment reads
// nothing; a missing or unreadable .index makes the scan start at the
// segment's base (the index is rebuilt by its first load).
func (l *Log) loadClean(last *segment) (int64, error) {
	size := last.size.Load()
	if size == 0 {
		return last.base, nil
	}
	var pos int64
	leo := last.base
	if data, err := vfs.ReadFile(l.fsys, last.path(IndexSuffix)); err == nil {
		if oi, err := ParseOffsetIndex(data, size); err == nil {
			rel, p := lookupOffsetIndex(oi, 1<<62)
			if p > 0 || rel > 0 {
				pos, leo = int64(p), last.base+int64(rel)+1
			}
		}
	}
	f, err := last.acquire()
	if err != nil {
		return 0, err
	}
	defer f.Release()
	hr := headerReader{f: f.f, size: size, prev: -1}
	for p := pos; p < size; {
		hdr, err := hr.header(p)
		var h hdrInfo
		if err == nil {
			h, err = headerInfo(hdr)
		}
		if err != nil || p+h.size > size {
			return 0, fmt.Errorf("segment %d: torn batch at %d after clean shutdown", last.base, p)
		}
		leo = h.last + 1
		p += h.size
	}
	return leo, nil
}

// createSegmentFiles creates an empty segment's .log. Its .index and
// .timeindex are not created: the active segment's indexes live in memory
// and their files are written when the segment closes (roll, a clean close
// of a changed log: closeActiveFiles), as Kafka's LazyIndex creates an
// index file only when the index is first used. A missing index file of
// an empty segment loads as an empty index (loadIndexes), and recovery
// rebuilds a missing one from the .log (Kafka's LogLoader too). So a new
// partition costs three inodes (directory, .log, partition.metadata), not
// five. Leftover files of an older segment of the same base are removed,
// unless fresh: the caller knows the directory holds no file of that base
// (load, after scanDir removed the index files without a .log); the new
// .log then stays open as the segment's file and its indexes are set
// empty, which openActive uses without a syscall.
func (l *Log) createSegmentFiles(s *segment, fresh bool) error {
	name := s.path(LogSuffix)
	if !fresh {
		if _, err := l.fsys.Stat(name); err == nil {
			l.logger.Warn("replacing leftover file of new segment", "file", name)
		}
	}
	f, err := l.fsys.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	s.setAbortedTxns(nil)
	if fresh {
		cfg := l.cfg.Load()
		s.mu.Lock()
		s.file, s.fileRW = newSegmentFile(f), true
		s.oi = &offsetIndex{maxEntries: int(cfg.SegmentIndexBytes) / offsetEntrySize}
		s.ti = &timeIndex{maxEntries: int(cfg.SegmentIndexBytes) / timeEntrySize}
		s.mu.Unlock()
		return nil
	}
	f.Close()
	// A new segment has no index entries and no aborted transactions yet.
	for _, suf := range []string{IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
		if err := l.fsys.Remove(s.path(suf)); err != nil && !errNotExist(err) {
			return fmt.Errorf("remove leftover %s: %w", s.path(suf), err)
		}
	}
	return nil
}

func (l *Log) removeSegmentFiles(s *segment) {
	s.markDeleted()
	for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
		if err := l.fsys.Remove(s.path(suf)); err != nil && !errNotExist(err) {
			l.logger.Warn("remove segment file", "file", s.path(suf), "err", err)
		}
	}
}

// openActive makes the last segment the active one. It reads nothing:
// its indexes are loaded (from the files, or kept from recovery's scan)
// and its index builder made by the first write, roll or close
// (loadWriter) or read (segment.indexes), its .log opened through the file
// cache by the first use (or here, to preallocate), and its first batch's
// timestamp read by loadWriter (firstTsUnknown until then). mtimeMs is the
// .log's modification time when the caller stat'ed the file (load), 0 to
// stat it here: with the segment's first batch timestamp unknown, the
// time-based roll (segment.ms) counts the age of a non-empty segment from
// it, as from its creation for an empty one.
func (l *Log) openActive(mtimeMs int64) error {
	s := l.segs[len(l.segs)-1]
	cfg := l.cfg.Load()
	s.mu.Lock()
	s.active = true
	if s.file != nil && !s.fileRW && cfg.Preallocate {
		// Opened read-only as a closed segment (loadClean, TruncateTo):
		// reopened read-write below to preallocate. Otherwise the first
		// append reopens it (writeFile), so a clean start opens each
		// partition's active segment once, not twice.
		s.file.Release()
		s.file = nil
	}
	s.mu.Unlock()
	if cfg.Preallocate {
		sf, err := s.acquire()
		if err != nil {
			return fmt.Errorf("open active segment: %w", err)
		}
		if l.reserve.take(cfg.SegmentBytes) == nil {
			// Preallocation only speeds appends up: skipped when it would
			// reach into the log dir's free-space reserve.
			l.fsys.Preallocate(sf.f, cfg.SegmentBytes)
		}
		sf.Release()
	}
	s.firstBatchTs = -1
	s.createdMs = l.now().UnixMilli()
	if s.size.Load() > 0 {
		s.firstBatchTs = firstTsUnknown
		if mtimeMs == 0 {
			if st, err := l.fsys.Stat(s.path(LogSuffix)); err == nil {
				mtimeMs = st.ModTime().UnixMilli()
			}
		}
		if mtimeMs != 0 {
			s.createdMs = mtimeMs
		}
	}
	s.bld = nil
	s.jitterMs = jitter(cfg)
	l.active = s
	return nil
}

// firstTsUnknown is the active segment's firstBatchTs until loadWriter
// reads its first batch header.
const firstTsUnknown = -2

// loadWriter makes the active segment s ready for the writer (under
// l.mu): its indexes loaded and its index builder rebuilt from the data
// already present. Unlike Kafka, which preallocates the active segment's
// index files to segment.index.bytes because it memory-maps them, the
// active segment's indexes live in memory and are written when it closes:
// opening a partition changes no file. An idle log drops them (idleWriter)
// and its next write, roll or close loads them again here.
func (l *Log) loadWriter(s *segment) error {
	if s.bld != nil {
		return nil
	}
	oi, ti, err := s.indexes()
	if err != nil {
		return err
	}
	if s.firstBatchTs == firstTsUnknown {
		s.firstBatchTs = -1
		sf, err := s.acquire()
		if err != nil {
			return err
		}
		var hdr [record.HeaderSize]byte
		if h, err := readHeader(sf.f, 0, hdr[:]); err == nil {
			s.firstBatchTs = h.maxTs
		}
		sf.Release()
	}
	cfg := l.cfg.Load()
	oi.maxEntries = int(cfg.SegmentIndexBytes) / offsetEntrySize
	ti.maxEntries = int(cfg.SegmentIndexBytes) / timeEntrySize
	s.maxIndexBytes = cfg.SegmentIndexBytes
	s.indexInterval = cfg.IndexIntervalBytes
	b := newIndexBuilder(s.base, oi, ti, int64(cfg.IndexIntervalBytes))
	if ts, off, err := s.maxTimestamp(); err == nil && ts >= 0 {
		b.maxTs, b.maxTsOff = ts, off
	}
	b.first = s.size.Load() == 0
	if !b.first {
		b.firstTs = s.firstBatchTs
		// Bytes since the last index entry: conservatively the tail past it.
		_, lastPos := lookupOffsetIndex(oi.snapshot(), 1<<62)
		b.since = s.size.Load() - int64(lastPos)
	}
	s.bld = b
	return nil
}

// idleWriter drops the active segment's in-memory indexes and index
// builder (under l.mu) when its index files on disk hold the same
// entries: the open read them from these files (l.idxDisk: a clean open,
// or an empty segment; a missing or unreadable file is rebuilt from the
// .log by the next load as by this one) and nothing was written to the
// log since (l.changed is false). Ten thousand idle partitions
// then hold no index memory; readers load the indexes on demand through
// the file cache (whose eviction drops them again, evictActive) and the
// writer through loadWriter.
func (l *Log) idleWriter() {
	s := l.active
	if l.changed || !l.idxDisk || s == nil {
		return
	}
	s.mu.Lock()
	if s.pinned == 0 {
		s.bld = nil
		s.oi, s.ti = nil, nil
	}
	s.mu.Unlock()
}

// evictActive closes the file of l's active segment s for the file cache:
// first every byte written to it is fsynced (flushLocked; nothing to do
// for an idle partition), so the descriptor is never closed over unsynced
// bytes whose write-back error no later descriptor would report. It
// reports false when l is busy (its writer holds mu: the file is in use)
// or the fsync failed; the cache tries again later. A failed log's file
// closes without an fsync: nothing more of it is acknowledged.
func (l *Log) evictActive(s *segment) bool {
	if !l.mu.TryLock() {
		return false
	}
	defer l.mu.Unlock()
	if l.active != s || l.closed {
		return s.unloadClosed()
	}
	if l.failed == nil {
		if err := l.flushLocked(); err != nil {
			return false
		}
	}
	s.closeFile()
	l.idleWriter()
	return true
}

func jitter(cfg *Config) int64 {
	j := cfg.SegmentJitterMs.Milliseconds()
	if ms := cfg.SegmentMs.Milliseconds(); j > ms {
		j = ms
	}
	if j <= 0 {
		return 0
	}
	return rand.Int64N(j)
}

// closeActiveFiles writes the active segment's trimmed indexes (with the
// final time-index entry) and fsyncs them, trims the .log and, when
// syncLog, fsyncs it. With deferSync nothing is fsynced: each index file
// is written to "<name>.tmp" and renamed over its name by Syncer.Close
// after the SyncFS that makes the whole log dir durable (and before its
// second one), so a crash at any point leaves each index file as the
// previous close wrote it or as this one does, never torn (recovery
// resumes from them, resumeIndexes). The files go in the order
// .txnindex, .timeindex, .index (see writeSegmentIndexes).
func (l *Log) closeActiveFiles(s *segment, syncLog, deferSync bool) error {
	s.mu.Lock()
	oi, ti, active := s.oi, s.ti, s.active
	s.mu.Unlock()
	if !active {
		return nil
	}
	if s.bld == nil {
		// Dropped while idle (idleWriter): the files on disk are current.
		if err := l.loadWriter(s); errors.Is(err, errSegmentGone) {
			return nil
		} else if err != nil {
			return fmt.Errorf("close segment %d: %w", s.base, err)
		}
		s.mu.Lock()
		oi, ti = s.oi, s.ti
		s.mu.Unlock()
	}
	if oi == nil {
		return nil
	}
	s.bld.finish()
	write := writeIndexFile
	if deferSync {
		write = func(fsys vfs.FS, name string, data []byte) error {
			if err := writeFileNoSync(fsys, name+TmpSuffix, data); err != nil {
				return err
			}
			l.ck.deferRename(name)
			return nil
		}
		syncLog = false
	}
	var txn []byte
	if ents := s.abortedTxns(); len(ents) > 0 {
		// Appended unsynced as aborts happened; now whole and durable.
		txn = EncodeTxnIndex(ents)
	}
	errs := writeSegmentIndexes(l.fsys, s, write, txn, ti.snapshot(), oi.snapshot())
	// A file the cache closed was fsynced first (evictActive) and has
	// no byte past the segment's size (a failed write is cut at once).
	if f := s.fileRef(); f != nil {
		if st, err := f.f.Stat(); err != nil || st.Size() != s.size.Load() {
			errs = append(errs, f.f.Truncate(s.size.Load()))
		}
		if syncLog {
			errs = append(errs, f.f.Sync())
		}
		f.Release()
	}
	s.mu.Lock()
	s.active = false
	s.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close segment %d: %w", s.base, err)
	}
	return nil
}

// closeFiles releases every open handle (error paths and Close).
func (l *Log) closeFiles() {
	for _, s := range l.segs {
		s.mu.Lock()
		s.active = false
		s.mu.Unlock()
		s.unloadClosed()
		if s.log.files != nil {
			s.log.files.remove(s)
		}
	}
}

// fail records a storage failure (called with l.mu held): later appends
// return KafkaStorageError, and WaitDurable callers are woken to see it
// instead of waiting out their timeout.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
		l.logger.Error("log failed", "err", err)
		l.notifyHW()
		l.notifyEnd()
	}
	return fmt.Errorf("%s: %v: %w", l.dir, err, kerr.KafkaStorageError)
}

// WaitDurable blocks until every offset < upTo is fsynced (group commit)
// and visible below the high watermark, or ctx ends. It keeps that
// promise whatever Config.Durable says: without Durable the high
// watermark does not wait for fsync, but WaitDurable still does (the
// group and transaction coordinators rely on it for their records).
func (l *Log) WaitDurable(ctx context.Context, upTo int64) error {
	for {
		ch := l.HighWatermarkChanged()
		l.mu.Lock()
		synced, failed, closed := l.synced.leo, l.failed, l.closed
		l.mu.Unlock()
		if synced >= upTo && l.HighWatermark() >= upTo {
			return nil
		}
		if failed != nil {
			return fmt.Errorf("%s: %v: %w", l.dir, failed, kerr.KafkaStorageError)
		}
		if closed {
			return fmt.Errorf("%s: log closed: %w", l.dir, kerr.NotLeaderForPartition)
		}
		if !l.syncer.request(l) {
			// The shared syncer is gone (shutdown): sync directly.
			if err := l.Flush(); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// syncPrep is what one group-commit round syncs for a log.
type syncPrep struct {
	mark   writeMark
	ckpt   int64  // active segment base when prepared
	cuts   uint64 // l.cuts when prepared
	inJrnl bool   // the bytes are durable in the journal already: nothing to do
	log    *Log
	jfile  *SegmentFile // active segment whose bytes from jfrom go to the journal (a reference)
	jfrom  int64
	files  []*SegmentFile // to fsync, one reference each
	closed []*SegmentFile // the subset taken from l.closing
	dirs   []string       // new partition directory and its parent to fsync (see load)
	epochs bool           // with dirs: the leader epoch checkpoint too (epochUnsynced)
	fsys   vfs.FS
}

// prepareSync takes what a round must make durable for l. journal: the
// round writes the journal (l's new bytes go there); journaling: l's log
// dir has a started journal, so bytes already made durable by it need no
// fsync of their segment (its checkpoint flushes them).
func (l *Log) prepareSync(journal, journaling bool) syncPrep {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := syncPrep{mark: l.mark, fsys: l.fsys, log: l, cuts: l.cuts}
	if l.closed || l.active == nil {
		return p
	}
	p.ckpt = l.active.base
	if l.dirsUnsynced {
		// A failed write leaves the file missing: syncNewDir then fails
		// the round for this log, as any fsync error does.
		if err := l.writePendingMeta(); err != nil {
			l.logger.Warn("partition.metadata", "err", err)
		}
		p.dirs = []string{l.dir, filepath.Dir(l.dir)}
		p.epochs = l.epochUnsynced
		l.epochNoSync = false // later epoch writes fsync as usual
	}
	for _, f := range l.closing {
		if f.tryAcquire() {
			p.files = append(p.files, f)
			p.closed = append(p.closed, f)
		}
	}
	switch {
	case journal && l.cfg.Load().Durable && len(l.closing) == 0 &&
		l.synced.base == l.active.base && l.mark.base == l.active.base && l.mark.pos > l.synced.pos &&
		l.activeFile(&p.jfile):
		// The new bytes go to the journal; the segment file stays
		// dirty (l.dirty) until a direct sync or a checkpoint.
		p.jfrom = l.synced.pos
	case journaling && len(l.closing) == 0 && l.synced == l.mark:
		// Nothing new since the journal made the bytes durable (a
		// WaitDurable asked again): the journal's checkpoint will flush
		// the segment.
		p.inJrnl = true
	case l.dirty:
		// The file is open: the cache closes an active segment's file
		// only after an fsync that clears dirty (evictActive).
		var f *SegmentFile
		if l.activeFile(&f) {
			p.files = append(p.files, f)
		}
		l.dirty = false
	}
	return p
}

// activeFile sets *f to the active segment's open file with a reference
// and reports true; false when the cache closed it (then its bytes are
// fsynced, see evictActive).
func (l *Log) activeFile(f **SegmentFile) bool {
	*f = l.active.fileRef()
	return *f != nil
}

// finishSync applies a round's outcome: journaled rounds make the bytes
// durable (the high watermark moves), direct ones also flushed.
func (l *Log) finishSync(p syncPrep, err error, journaled bool, wakes *wakeBatch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if wakes != nil {
		l.holdWakes(wakes)
		defer l.holdWakes(nil)
	}
	if err != nil {
		l.fail(fmt.Errorf("fdatasync: %w", err)) // wakes WaitDurable callers
		return
	}
	if len(p.dirs) > 0 {
		l.dirsUnsynced = false
		if p.epochs {
			l.epochUnsynced = false
		}
	}
	for _, f := range p.closed {
		for i, c := range l.closing {
			if c == f {
				l.closing = append(l.closing[:i:i], l.closing[i+1:]...)
				f.Release()
				break
			}
		}
	}
	if p.inJrnl {
		return
	}
	if p.mark.leo > l.synced.leo {
		l.setSynced(p.mark, !journaled)
		l.publish()
	} else if !journaled {
		l.setSynced(p.mark, true)
	}
	if len(l.closing) == 0 && !l.closed && l.failed == nil {
		l.setRecoveryPoint(l.flushed.leo, false) // in memory; see setRecoveryPoint
	}
}

// Flush fsyncs everything written so far and advances the recovery point.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked()
}

func (l *Log) flushLocked() error {
	if l.closed {
		return nil
	}
	if l.failed != nil {
		return fmt.Errorf("%s: %v: %w", l.dir, l.failed, kerr.KafkaStorageError)
	}
	if l.flushed.leo == l.mark.leo && len(l.closing) == 0 {
		// Nothing written since the last fsync: nothing to flush.
		l.dirty = false
		l.lastFlush = l.now().UnixNano()
		return l.setRecoveryPoint(l.mark.leo, false)
	}
	if err := l.syncDirsLocked(); err != nil {
		return l.fail(fmt.Errorf("fsync new partition directory: %w", err))
	}
	for _, f := range l.closing {
		if err := f.f.Sync(); err != nil {
			return l.fail(fmt.Errorf("fdatasync: %w", err))
		}
	}
	var af *SegmentFile
	if l.activeFile(&af) { // closed by the cache only once fsynced
		err := af.f.Sync()
		af.Release()
		if err != nil {
			return l.fail(fmt.Errorf("fdatasync: %w", err))
		}
	}
	l.releaseClosing()
	l.dirty = false
	l.lastFlush = l.now().UnixNano()
	moved := l.mark.leo > l.synced.leo
	l.setSynced(l.mark, true)
	if moved {
		l.publish()
	}
	if err := l.setRecoveryPoint(l.mark.leo, false); err != nil {
		return l.fail(err)
	}
	return nil
}

func (l *Log) releaseClosing() {
	for _, f := range l.closing {
		f.Release()
	}
	l.closing = nil
}

// Close flushes what is not yet durable and, when the log changed since
// it was opened, writes the producer snapshot at the log end and the
// active segment's trimmed indexes (what a clean start reads); then it
// closes the files. A log with nothing written since its last fsync and
// no change costs no fsync and no write.
func (l *Log) Close() error { return l.close(false) }

// CloseDeferSync is Close for a broker shutting down a whole log dir: it
// writes what Close writes but fsyncs nothing. The log dir's Syncer, whose
// Close must follow, then makes the whole dir durable with one SyncFS and
// only after it moves the logs' recovery points to their ends and writes
// the checkpoint files; a crash before that recovers the logs as after any
// crash.
func (l *Log) CloseDeferSync() error { return l.close(true) }

func (l *Log) close(deferSync bool) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	var errs []error
	if l.failed == nil {
		if !deferSync {
			errs = append(errs, l.flushLocked())
		}
		if l.changed {
			errs = append(errs, l.writeSnapshotSync(l.mark.leo, !deferSync))
			errs = append(errs, l.closeActiveFiles(l.active, true, deferSync))
			if !deferSync {
				errs = append(errs, l.fsys.SyncDir(l.dir))
			}
		}
		if err := errors.Join(errs...); err == nil {
			switch {
			case deferSync:
				l.syncer.deferRecoveryPoint(l.ck, l.key, l.mark.leo)
			default:
				// Written by Syncer.Close (once for all logs of the dir).
				l.setRecoveryPoint(l.mark.leo, false)
				if !l.ownSyncer && l.syncer.isClosed() {
					errs = append(errs, l.ck.persist(ckRecovery, false))
				}
			}
		}
	}
	if l.rep != nil {
		// The high watermark of the close, written with the dir's
		// checkpoints (Syncer.Close; Kafka checkpoints high watermarks
		// at shutdown).
		l.ck.untrack(l.key, l, l.v.Load().hw)
		if !l.ownSyncer && l.syncer.isClosed() {
			errs = append(errs, l.ck.persist(ckReplication, false))
		}
	}
	l.closed = true
	l.releaseClosing()
	l.closeFiles()
	del := l.deleter
	l.mu.Unlock()
	l.syncer.forget(l)
	if l.ownSyncer {
		errs = append(errs, l.syncer.Close())
	}
	if del != nil {
		del.close()
	}
	l.notifyHW()
	l.notifyEnd()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close %s: %w", l.dir, err)
	}
	return nil
}

// Delete closes the log (writing nothing) and removes its directory,
// durably.
func (l *Log) Delete() error { return l.delete(true) }

// DeleteDeferSync is Delete without the fsync of the log dir: the caller
// fsyncs it once for many deleted logs.
func (l *Log) DeleteDeferSync() error { return l.delete(false) }

func (l *Log) delete(syncParent bool) error {
	l.mu.Lock()
	l.failed = errors.New("log deleted")
	l.mu.Unlock()
	l.Close()
	if err := l.fsys.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("delete %s: %w", l.dir, err)
	}
	if syncParent {
		if err := l.fsys.SyncDir(filepath.Dir(l.dir)); err != nil {
			return err
		}
	}
	// The entries go with the next checkpoint write: until then they are
	// harmless (a load drops entries without a directory, and a new
	// directory of the same name ignores them).
	l.ck.remove(l.key)
	return nil
}

// deleteLater unlinks files (renamed .deleted files) after delay, or at
// once when the log is closed (under l.mu). The deleter is made by the
// first delete: an idle log holds none.
func (l *Log) deleteLater(files []string, delay time.Duration) {
	if l.deleter == nil {
		l.deleter = newDeleter(l.fsys, l.logger)
		l.deleter.closed = l.closed // Close is past: unlinked at once
	}
	l.deleter.schedule(files, delay)
}

// deleter unlinks renamed .deleted files after file.delete.delay.ms. Close
// stops the timers and deletes what is still pending.
type deleter struct {
	fsys    vfs.FS
	logger  *slog.Logger
	mu      sync.Mutex
	pending map[*time.Timer][]string // made by the first delayed delete
	closed  bool
}

func newDeleter(fsys vfs.FS, logger *slog.Logger) *deleter {
	return &deleter{fsys: fsys, logger: logger}
}

func (d *deleter) schedule(files []string, delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || delay <= 0 {
		d.unlink(files)
		return
	}
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		d.mu.Lock()
		fs, ok := d.pending[t]
		delete(d.pending, t)
		d.mu.Unlock()
		if ok {
			d.unlink(fs)
		}
	})
	if d.pending == nil {
		d.pending = map[*time.Timer][]string{}
	}
	d.pending[t] = files
}

func (d *deleter) unlink(files []string) {
	for _, f := range files {
		if err := d.fsys.Remove(f); err != nil && !errNotExist(err) {
			d.logger.Warn("delete file", "file", f, "err", err)
		}
	}
}

func (d *deleter) close() {
	d.mu.Lock()
	d.closed = true
	var all []string
	for t, fs := range d.pending {
		t.Stop()
		all = append(all, fs...)
		delete(d.pending, t)
	}
	d.mu.Unlock()
	d.unlink(all)
}
