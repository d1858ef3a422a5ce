package logtool

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

// segWriter writes a segment the way Kafka does: batches appended to .log,
// an .index/.timeindex entry when more than interval bytes were appended
// since the last entry (tested before the current append).
type segWriter struct {
	t                    testing.TB
	dir                  string
	base                 int64
	next                 int64 // next offset to assign
	log, idx, tidx       []byte
	interval, sinceLast  int
	maxTs, offsetOfMaxTs int64
	lastIndexedTimestamp int64
	preallocIndexSlots   int
}

func newSegWriter(t testing.TB, dir string, base int64, interval int) *segWriter {
	return &segWriter{t: t, dir: dir, base: base, next: base, interval: interval, maxTs: -1, lastIndexedTimestamp: -1}
}

// appendBatch builds and appends a batch of n records with codec c.
func (w *segWriter) appendBatch(n int, c record.Compression, ts int64) record.Batch {
	w.t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{TimestampDelta: int64(i), Key: []byte(fmt.Sprint("k", w.next+int64(i))),
			Value: []byte(fmt.Sprint("value-", w.next+int64(i))), Headers: []record.Header{{Key: "h", Value: nil}}}
	}
	if n > 0 {
		recs[0].Key = nil
	}
	h := recordtest.NoProducer
	h.BaseOffset, h.Attributes, h.BaseTimestamp, h.PartitionLeaderEpoch = w.next, int16(c), ts, 0
	b := recordtest.Batch(h, recs...)
	w.appendRaw(b)
	return b
}

// appendRaw appends an already built batch and maintains the indexes.
func (w *segWriter) appendRaw(b record.Batch) {
	if b.MaxTimestamp() > w.maxTs {
		w.maxTs, w.offsetOfMaxTs = b.MaxTimestamp(), b.LastOffset()
	}
	if w.sinceLast > w.interval {
		w.idx = binary.BigEndian.AppendUint32(w.idx, uint32(b.LastOffset()-w.base))
		w.idx = binary.BigEndian.AppendUint32(w.idx, uint32(len(w.log)))
		if w.maxTs > w.lastIndexedTimestamp {
			w.tidx = binary.BigEndian.AppendUint64(w.tidx, uint64(w.maxTs))
			w.tidx = binary.BigEndian.AppendUint32(w.tidx, uint32(w.offsetOfMaxTs-w.base))
			w.lastIndexedTimestamp = w.maxTs
		}
		w.sinceLast = 0
	}
	w.log = append(w.log, b...)
	w.sinceLast += len(b)
	w.next = b.LastOffset() + 1
}

// write stores the three files, padding the indexes with zero slots.
func (w *segWriter) write() (logPath string) {
	w.t.Helper()
	logPath = filepath.Join(w.dir, SegmentFileName(w.base, ExtLog))
	idx := append(w.idx, make([]byte, w.preallocIndexSlots*OffsetEntrySize)...)
	tidx := append(w.tidx, make([]byte, w.preallocIndexSlots*TimeEntrySize)...)
	for path, data := range map[string][]byte{
		logPath: w.log,
		filepath.Join(w.dir, SegmentFileName(w.base, ExtIndex)):     idx,
		filepath.Join(w.dir, SegmentFileName(w.base, ExtTimeIndex)): tidx,
	} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			w.t.Fatal(err)
		}
	}
	return logPath
}

// buildLogDir makes a sound log dir: topic "a" partition 0 with two
// segments (mixed codecs, index entries, preallocated active indexes) and
// partition 1 with one empty segment. It returns the log dir and the path
// of a-0's active .log.
func buildLogDir(t testing.TB) (string, string) {
	t.Helper()
	root := t.TempDir()
	p0 := filepath.Join(root, "a-0")
	p1 := filepath.Join(root, "a-1")
	for _, d := range []string{p0, p1} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s0 := newSegWriter(t, p0, 0, 100)
	codecs := []record.Compression{record.None, record.Gzip, record.Snappy, record.LZ4, record.Zstd}
	for i := 0; i < 10; i++ {
		s0.appendBatch(3+i, codecs[i%len(codecs)], 1_000+int64(i)*10)
	}
	s0.write()
	s1 := newSegWriter(t, p0, s0.next, 100)
	s1.preallocIndexSlots = 16
	for i := 0; i < 6; i++ {
		s1.appendBatch(4, record.None, 2_000+int64(i)*10)
	}
	// An empty batch as the cleaner leaves it.
	empty, err := record.Build(record.BatchHeader{BaseOffset: s1.next, LastOffsetDelta: 2, BaseTimestamp: -1, MaxTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s1.appendRaw(empty)
	active := s1.write()
	newSegWriter(t, p1, 0, 100).write()
	// Files Verify must ignore.
	os.WriteFile(filepath.Join(root, "recovery-point-offset-checkpoint"), []byte("0\n0\n"), 0o644)
	os.WriteFile(filepath.Join(p0, "leader-epoch-checkpoint"), []byte("0\n0\n"), 0o644)
	return root, active
}
