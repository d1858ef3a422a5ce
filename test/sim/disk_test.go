package sim

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/replica"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// rlog is one replica's log: a real storage.Log on the broker's own
// vfs.CrashFS, opened, appended, fsynced, truncated and reopened through
// storage's API as the broker does, and an in-memory copy of its records
// (record id and leader epoch per offset) that the invariants read
// cheaply. Every change is made in the storage log first and the copy
// follows what the log answers. The high watermark, the fsynced end and
// the leader epoch history are always the storage log's.
//
// A crash keeps the broker's CrashFS as a kill -9 leaves it
// (vfs.CrashFS.Clone: the page cache survives) or as a power cut does
// (Crash: only what was fsynced). The restart opens the directory again
// through storage.Open's crash recovery: what the log recovers, and the
// high watermark it opens with, are what the broker's replica layer gets.
// (Until session 6 this was an in-memory model that kept its high
// watermark across a restart; the binary took its recovered log end, and
// the session-5 kill-all anomaly went unseen here; docs/reliability.md.)
//
// The simulation decides when a broker fsyncs (its fsync events call
// Flush), so the storage logs run with storage's own durable mode off
// (no background group commit: nothing happens between two events);
// strata.durable.acks is the replica layer's setting (params.durable).
// Every record is a batch of its own, so a truncation lands exactly on the
// offset asked for. Segments are 16 KiB, so logs roll: with storage's
// durable mode off a roll leaves the rolled segment's tail unsynced while
// the new segment's file is made durable, and a power cut between used to
// leave a gap that recovery ended the log past (offsets below the log end
// that held nothing; open checks every offset below the end reads a
// record). Recovery now reads such a gap as a lost tail (storage.Log.recover,
// TestRollPowerCutLeavesNoGap); until session 7 the simulation kept 1 GiB
// segments to stay clear of it.
type rlog struct {
	fs      *vfs.CrashFS
	syncer  *storage.Syncer
	l       *storage.Log
	entries []entry
	// segBytes is segment.bytes (0: logConfig's 16 KiB).
	segBytes int64
}

const (
	logDir = "/data/t-0"
	baseTS = 1_800_000_000_000 // record timestamps (ms), and the storage clock
)

var (
	quietLog = slog.New(slog.DiscardHandler)
	topicID  = [16]byte{'s', 'i', 'm'}
)

func logConfig(segBytes int64) storage.Config {
	cfg := storage.DefaultConfig()
	cfg.Durable = false     // the simulation calls Flush (see rlog)
	cfg.FileDeleteDelay = 0 // no timer goroutine: files of a truncation go at once
	cfg.RetentionMs = -1    // nothing expires
	cfg.IndexIntervalBytes = 256
	cfg.SegmentBytes = 16 << 10 // rolls every ~200 records: recovery across segments (see rlog)
	if segBytes > 0 {
		cfg.SegmentBytes = segBytes
	}
	return cfg
}

// open opens the log directory as a broker's start does (no clean
// shutdown: every stop in the simulation is a crash) and loads the copy.
func (m *rlog) open() error {
	if m.fs == nil {
		m.fs = vfs.NewCrashFS()
		if err := m.fs.MkdirAll("/data", 0o755); err != nil {
			return err
		}
	}
	m.syncer = storage.NewSyncer(quietLog)
	l, err := storage.Open(logDir, topicID, logConfig(m.segBytes), false, storage.Options{FS: m.fs, Syncer: m.syncer,
		Logger: quietLog, Clock: clock.NewManual(time.UnixMilli(baseTS))})
	if err != nil {
		m.syncer.Close()
		return err
	}
	m.l = l
	m.entries, err = readEntries(l)
	if err != nil {
		return fmt.Errorf("%w (log end %d, fsynced %d, high watermark %d, segments %+v; files:\n%s)",
			err, l.LogEndOffset(), l.DurableEnd(), l.HighWatermark(), l.Segments(), m.fs)
	}
	if int64(len(m.entries)) != l.LogEndOffset() {
		return fmt.Errorf("reopened log ends at %d but holds %d records", l.LogEndOffset(), len(m.entries))
	}
	return nil
}

// crash ends the process that had the log open: power drops what was not
// fsynced, a kill keeps the page cache. The storage log is never closed
// (that would be a clean shutdown): its syncer stops on a file system no
// one will read again.
func (m *rlog) crash(power bool) {
	img := m.fs.Clone()
	if power {
		img = m.fs.Crash()
	}
	old, oldSyncer := m.l, m.syncer
	m.fs, m.l, m.syncer = img, nil, nil
	_ = old.Close()
	_ = oldSyncer.Close()
}

// readEntries reads every record of l (offset order).
func readEntries(l *storage.Log) ([]entry, error) {
	var out []entry
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		res, err := l.ReadUpToEnd(off, 1<<20, true)
		if err != nil {
			return nil, fmt.Errorf("read at %d: %w", off, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return nil, fmt.Errorf("read at %d below the log end %d: nothing", off, l.LogEndOffset())
		}
		for _, c := range res.Chunks {
			buf := make([]byte, c.Len)
			if _, err := c.File.File().ReadAt(buf, c.Pos); err != nil && !errors.Is(err, io.EOF) {
				res.Release()
				return nil, err
			}
			for len(buf) > 0 {
				b, rest, err := record.Next(buf)
				if err != nil {
					res.Release()
					return nil, fmt.Errorf("batch at %d: %w", off, err)
				}
				if b.BaseOffset() != int64(len(out)) {
					res.Release()
					return nil, fmt.Errorf("batch at %d where %d was expected", b.BaseOffset(), len(out))
				}
				recs, err := b.Records()
				if err != nil {
					res.Release()
					return nil, err
				}
				for _, r := range recs {
					out = append(out, entry{id: string(r.Value), epoch: b.PartitionLeaderEpoch()})
				}
				off = b.LastOffset() + 1
				buf = rest
			}
		}
		res.Release()
	}
	return out, nil
}

func batchOf(e entry, base int64) []byte {
	b, err := record.BuildNumbered(record.BatchHeader{BaseOffset: base, PartitionLeaderEpoch: e.epoch,
		BaseTimestamp: baseTS, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.Record{{Value: []byte(e.id)}})
	if err != nil {
		panic(err)
	}
	return b
}

// appendLeader appends records as the leader's produce path does
// (storage.Log.Append, which assigns the offsets and stamps the epoch).
func (m *rlog) appendLeader(ids []string, epoch int32) error {
	for _, id := range ids {
		res, err := m.l.Append(batchOf(entry{id: id}, 0), storage.AppendOptions{LeaderEpoch: epoch})
		if err != nil {
			return fmt.Errorf("append %s: %w", id, err)
		}
		if res.BaseOffset != m.end() {
			return fmt.Errorf("append %s at %d, log copy ends at %d", id, res.BaseOffset, m.end())
		}
		m.entries = append(m.entries, entry{id: id, epoch: epoch})
	}
	return nil
}

// appendFollower appends the leader's records from offset end on
// (storage.Log.AppendAsFollower: the leader's offsets and epochs).
func (m *rlog) appendFollower(es []entry) error {
	var buf []byte
	for i, e := range es {
		buf = append(buf, batchOf(e, m.end()+int64(i))...)
	}
	if len(buf) == 0 {
		return nil
	}
	if _, err := m.l.AppendAsFollower(buf); err != nil {
		return fmt.Errorf("append %d fetched records at %d: %w", len(es), m.end(), err)
	}
	m.entries = append(m.entries, es...)
	if m.l.LogEndOffset() != m.end() {
		return fmt.Errorf("log ends at %d after a fetch, its copy at %d", m.l.LogEndOffset(), m.end())
	}
	return nil
}

func (m *rlog) end() int64 { return int64(len(m.entries)) }

// durable is the end of the fsynced records.
func (m *rlog) durable() int64 { return m.l.DurableEnd() }

// hw is the log's high watermark: what consumers may read from it.
func (m *rlog) hw() int64 { return m.l.HighWatermark() }

// setHW hands the replica layer's high watermark to the log, as
// replica.Replica does (storage.Log.SetHighWatermark).
func (m *rlog) setHW(hw int64) { m.l.SetHighWatermark(hw, nil) }

func (m *rlog) flush() error { return m.l.Flush() }

// checkpoint is the broker's periodic write of its log dir's
// replication-offset-checkpoint (storage.Syncer.WriteHighWatermarks, every
// replica.high.watermark.checkpoint.interval.ms).
func (m *rlog) checkpoint() error { return m.syncer.WriteHighWatermarks() }

// startReplication is the replica layer taking the log over at a
// broker's start (replica.Manager.Apply on a fresh replica): the high
// watermark starts from what the log knows committed.
func (m *rlog) startReplication() { m.l.StartReplication(nil) }

func (m *rlog) local() replica.Local {
	return replica.Local{End: m.end(), Durable: m.durable(), Start: m.l.LogStartOffset()}
}

// assign records that leader epoch starts at the log end (a new leader).
func (m *rlog) assign(epoch int32) error { return m.l.AssignEpoch(epoch) }

func (m *rlog) lookup(epoch int32) (int32, int64) { return m.l.EndOffsetForEpoch(epoch) }

func (m *rlog) latestEpoch() int32 {
	if e := m.l.LatestEpoch(); e >= 0 {
		return e
	}
	return replica.NoEpoch
}

// truncate cuts the log at off (storage.Log.TruncateTo).
func (m *rlog) truncate(off int64) error {
	end, err := m.l.TruncateTo(off)
	if err != nil {
		return fmt.Errorf("truncate to %d: %w", off, err)
	}
	if end != min(off, m.end()) {
		return fmt.Errorf("truncate to %d ended the log at %d", off, end)
	}
	m.entries = m.entries[:end]
	return nil
}
