package cleaner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// newFakeClock is the manual clock a log and its cleaner share in tests.
func newFakeClock() *clock.Manual {
	return clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// fatalf is the part of testing.TB and *rapid.T the harness needs.
type fatalf interface {
	Fatalf(format string, args ...any)
	Helper()
}

// harness is one real storage.Log in a temp log dir with a real Cleaner.
type harness struct {
	t      fatalf
	logDir string
	dir    string
	topic  string
	cfg    storage.Config
	ccfg   Config
	clock  *clock.Manual
	fs     vfs.FS
	syncer *storage.Syncer
	log    *storage.Log
	cl     *Cleaner
	logger *slog.Logger
}

// compactCfg is a compacted topic config on which the background loop
// never selects the log by ratio (tests drive cleaning with CleanNow).
func compactCfg() storage.Config {
	cfg := storage.DefaultConfig()
	cfg.Compact = true
	cfg.Delete = false
	cfg.Durable = false
	cfg.MinCleanableDirtyRatio = 1
	cfg.DeleteRetentionMs = 1000
	cfg.MaxCompactionLagMs = math.MaxInt64
	cfg.SegmentMs = 1000 * time.Hour
	cfg.RetentionMs = -1
	return cfg
}

func newHarness(t fatalf, logDir string, cfg storage.Config, ccfg Config, clock *clock.Manual, fsys vfs.FS) *harness {
	h := &harness{t: t, logDir: logDir, topic: "t", cfg: cfg, ccfg: ccfg, clock: clock, fs: fsys,
		logger: discardLogger()}
	if h.clock == nil {
		h.clock = newFakeClock()
	}
	if h.fs == nil {
		h.fs = vfs.Default()
	}
	h.dir = filepath.Join(logDir, "t-0")
	h.open(true)
	return h
}

func (h *harness) open(clean bool) {
	h.t.Helper()
	h.syncer = storage.NewSyncer(h.logger)
	l, err := storage.Open(h.dir, [16]byte{1}, h.cfg, clean, storage.Options{
		FS: h.fs, Syncer: h.syncer, Logger: h.logger, Clock: h.clock, ProducerIDExpiration: 24 * time.Hour,
	})
	if err != nil {
		h.t.Fatalf("open log: %v", err)
	}
	h.log = l
	src := func(yield func(Partition) bool) { yield(Partition{Topic: h.topic, Partition: 0, Log: h.log}) }
	ccfg := h.ccfg
	ccfg.FS = h.fs
	ccfg.Clock = h.clock
	c, err := New(ccfg, h.logDir, src, h.logger, nil)
	if err != nil {
		h.t.Fatalf("new cleaner: %v", err)
	}
	h.cl = c
	c.Start()
}

func (h *harness) close() {
	h.t.Helper()
	if err := h.cl.Close(); err != nil {
		h.t.Fatalf("close cleaner: %v", err)
	}
	if err := h.log.Close(); err != nil {
		h.t.Fatalf("close log: %v", err)
	}
	if err := h.syncer.Close(); err != nil {
		h.t.Fatalf("close syncer: %v", err)
	}
}

func (h *harness) restart() {
	h.close()
	h.open(true)
}

func (h *harness) clean() {
	h.t.Helper()
	if err := h.cl.CleanNow(context.Background(), h.topic, 0); err != nil {
		h.t.Fatalf("clean: %v", err)
	}
}

// producer describes the producer fields of a client batch.
type producer struct {
	id    int64
	epoch int16
	seq   int32
	txn   bool // transactional batches
}

var noProducer = producer{id: -1, epoch: -1, seq: -1}

// clientBatch builds a batch as a producer sends it (base offset 0).
func clientBatch(codec record.Compression, p producer, ts int64, kvs []kv) []byte {
	recs := make([]record.Record, len(kvs))
	for i, x := range kvs {
		recs[i] = record.Record{TimestampDelta: int64(i), Key: x.key, Value: x.val,
			Headers: []record.Header{{Key: "n", Value: []byte(fmt.Sprint(i))}}}
	}
	attrs := int16(codec)
	if p.txn {
		attrs |= record.AttrTransactional
	}
	return recordtest.Batch(record.BatchHeader{
		Attributes: attrs, BaseTimestamp: ts, ProducerID: p.id, ProducerEpoch: p.epoch, BaseSequence: p.seq,
		PartitionLeaderEpoch: -1,
	}, recs...)
}

func (h *harness) append(b []byte) (storage.AppendResult, error) {
	return h.log.Append(b, storage.AppendOptions{LeaderEpoch: 0, RequireKeys: true})
}

// stored is one record read back from the log.
type stored struct {
	Offset int64
	Key    []byte
	Value  []byte
	TS     int64
	Hdrs   int
}

// readAll reads every record below the high watermark, checking that
// batches arrive in offset order and advancing by batch last offset + 1.
func (h *harness) readAll() ([]stored, []record.Batch) {
	h.t.Helper()
	return readLog(h.t, h.log)
}

func readLog(t fatalf, l *storage.Log) ([]stored, []record.Batch) {
	var out []stored
	var batches []record.Batch
	off := l.LogStartOffset()
	for off < l.HighWatermark() {
		res, err := l.Read(off, 1<<20, true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			break
		}
		progressed := false
		for _, ch := range res.Chunks {
			buf := make([]byte, ch.Len)
			if _, err := ch.File.File().ReadAt(buf, ch.Pos); err != nil && err != io.EOF {
				t.Fatalf("read chunk: %v", err)
			}
			for len(buf) > 0 {
				b, rest, err := record.Next(buf)
				if err != nil {
					break // partial batch at the end of a chunk
				}
				buf = rest
				if b.LastOffset() < off {
					continue
				}
				if err := record.ValidateStored(b); err != nil {
					t.Fatalf("stored batch at %d: %v", b.BaseOffset(), err)
				}
				cp := append(record.Batch(nil), b...)
				batches = append(batches, cp)
				if b.IsControl() { // transaction markers are not data
					off = b.LastOffset() + 1
					progressed = true
					continue
				}
				base, bts := b.BaseOffset(), b.BaseTimestamp()
				err = b.ForEachRecord(func(r *record.Record) error {
					o := base + int64(r.OffsetDelta)
					if o < off {
						return nil
					}
					ts := bts + r.TimestampDelta
					if b.IsLogAppendTime() {
						ts = b.MaxTimestamp()
					}
					out = append(out, stored{Offset: o, Key: clone(r.Key), Value: clone(r.Value), TS: ts, Hdrs: len(r.Headers)})
					return nil
				})
				if err != nil {
					t.Fatalf("decode batch at %d: %v", base, err)
				}
				off = b.LastOffset() + 1
				progressed = true
			}
		}
		res.Release()
		if !progressed {
			t.Fatalf("read at %d made no progress", off)
		}
	}
	return out, batches
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func mustTempDir(t fatalf) string {
	d, err := os.MkdirTemp("", "cleaner-test-")
	if err != nil {
		t.Fatalf("tempdir: %v", err)
	}
	return d
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
