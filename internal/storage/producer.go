package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
)

// maxBatchesPerProducer is how many recent batches are kept per producer
// for duplicate detection (Kafka keeps 5, matching
// max.in.flight.requests.per.connection).
const maxBatchesPerProducer = 5

// batchMeta identifies one appended idempotent batch.
type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerEntry is the state of one producer id (Kafka's
// ProducerStateEntry).
type producerEntry struct {
	pid              int64
	epoch            int16
	batches          []batchMeta // oldest first, at most maxBatchesPerProducer
	lastTimestamp    int64       // wall-clock ms of the last append
	coordinatorEpoch int32
	txnFirstOffset   int64 // -1 = no open transaction
}

func (e *producerEntry) clone() *producerEntry {
	c := *e
	c.batches = append([]batchMeta(nil), e.batches...)
	return &c
}

func (e *producerEntry) lastSeq() (int32, bool) {
	if len(e.batches) == 0 {
		return 0, false
	}
	return e.batches[len(e.batches)-1].lastSeq, true
}

func (e *producerEntry) add(b batchMeta) {
	if len(e.batches) == maxBatchesPerProducer {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:maxBatchesPerProducer-1]
	}
	e.batches = append(e.batches, b)
}

// producerState is one partition's idempotent-producer table. It is only
// touched by the partition's writer (under Log.mu). Its maps are made by
// their first entry (setEntry, setOpen): a partition no idempotent
// producer wrote to holds none.
type producerState struct {
	m    map[int64]*producerEntry
	open map[int64]int64 // producer id -> first offset of its open transaction
}

func newProducerState() *producerState { return &producerState{} }

func (ps *producerState) setEntry(e *producerEntry) {
	if ps.m == nil {
		ps.m = map[int64]*producerEntry{}
	}
	ps.m[e.pid] = e
}

func (ps *producerState) setOpen(pid, first int64) {
	if ps.open == nil {
		ps.open = map[int64]int64{}
	}
	ps.open[pid] = first
}

// reindexOpen rebuilds the open-transaction set from the table.
func (ps *producerState) reindexOpen() {
	clear(ps.open)
	for pid, e := range ps.m {
		if e.txnFirstOffset >= 0 {
			ps.setOpen(pid, e.txnFirstOffset)
		}
	}
}

// firstOpen returns the first offset of the oldest open transaction, or
// -1 when none is open.
func (ps *producerState) firstOpen() int64 {
	first := int64(-1)
	for _, off := range ps.open {
		if first < 0 || off < first {
			first = off
		}
	}
	return first
}

// producerTxn stages changes of one Append so that a rejected request
// leaves the table untouched.
type producerTxn struct {
	ps      *producerState
	changed map[int64]*producerEntry
}

func (ps *producerState) begin() *producerTxn { return &producerTxn{ps: ps} }

func (t *producerTxn) get(pid int64) *producerEntry {
	if e, ok := t.changed[pid]; ok {
		return e
	}
	return t.ps.m[pid]
}

func (t *producerTxn) put(e *producerEntry) {
	if t.changed == nil {
		t.changed = map[int64]*producerEntry{}
	}
	t.changed[e.pid] = e
}

func (t *producerTxn) commit() {
	for pid, e := range t.changed {
		t.ps.setEntry(e)
		if e.txnFirstOffset >= 0 {
			t.ps.setOpen(pid, e.txnFirstOffset)
		} else {
			delete(t.ps.open, pid)
		}
	}
	clear(t.changed)
}

// nextSeq is seq+1 wrapping at MaxInt32 as Kafka does.
func nextSeq(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}

// seqAdd adds d to a sequence number modulo 2^31 (Kafka wraps sequences
// at Int32.MAX to 0).
func seqAdd(seq int32, d int64) int32 {
	const m = math.MaxInt32 + 1
	return int32(((int64(seq)+d)%m + m) % m)
}

// check validates an incoming idempotent batch. It returns the original
// batch when b is a duplicate of one of the last five.
func (t *producerTxn) check(pid int64, epoch int16, firstSeq, lastSeq int32) (*batchMeta, error) {
	e := t.get(pid)
	if e == nil {
		// Unknown producer (new, or expired/removed by retention): accept
		// any sequence, as Kafka does.
		return nil, nil
	}
	switch {
	case epoch < e.epoch:
		return nil, fmt.Errorf("producer %d epoch %d older than %d: %w", pid, epoch, e.epoch, kerr.InvalidProducerEpoch)
	case epoch > e.epoch:
		if firstSeq != 0 {
			return nil, fmt.Errorf("producer %d new epoch %d starts at sequence %d, want 0: %w", pid, epoch, firstSeq, kerr.OutOfOrderSequenceNumber)
		}
		return nil, nil
	}
	for i := range e.batches {
		b := &e.batches[i]
		if b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			c := *b
			return &c, nil
		}
	}
	last, ok := e.lastSeq()
	if !ok {
		return nil, nil
	}
	if firstSeq != nextSeq(last) {
		return nil, fmt.Errorf("producer %d epoch %d: sequence %d after %d: %w", pid, epoch, firstSeq, last, kerr.OutOfOrderSequenceNumber)
	}
	return nil, nil
}

// record stages the append of a batch.
func (t *producerTxn) record(pid int64, epoch int16, b batchMeta, now int64) {
	var e *producerEntry
	if old := t.get(pid); old != nil {
		e = old
		if _, staged := t.changed[pid]; !staged {
			e = old.clone()
		}
	} else {
		e = &producerEntry{pid: pid, epoch: epoch, coordinatorEpoch: -1, txnFirstOffset: -1}
	}
	if epoch != e.epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	if b.firstSeq < 0 {
		b.firstSeq, b.lastSeq = -1, -1 // coordinator-origin batch: no sequence
	}
	e.add(b)
	e.lastTimestamp = now
	t.put(e)
}

// mut returns a staged (cloned) entry for pid, or nil when unknown.
func (t *producerTxn) mut(pid int64) *producerEntry {
	if e, ok := t.changed[pid]; ok {
		return e
	}
	e := t.ps.m[pid]
	if e == nil {
		return nil
	}
	c := e.clone()
	t.put(c)
	return c
}

// checkEpoch rejects a batch whose epoch is older than the producer's
// (the only check of coordinator-origin data batches, which carry no
// sequence numbers).
func (t *producerTxn) checkEpoch(pid int64, epoch int16) error {
	if e := t.get(pid); e != nil && epoch < e.epoch {
		return fmt.Errorf("producer %d epoch %d older than %d: %w", pid, epoch, e.epoch, kerr.InvalidProducerEpoch)
	}
	return nil
}

// txnOpen reports whether pid has an open transaction (staged state).
func (t *producerTxn) txnOpen(pid int64) bool {
	e := t.get(pid)
	return e != nil && e.txnFirstOffset >= 0
}

// openTxn starts pid's transaction at off unless one is open (a
// transactional data batch; the entry exists: record ran first).
func (t *producerTxn) openTxn(pid, off int64) {
	if e := t.mut(pid); e != nil && e.txnFirstOffset < 0 {
		e.txnFirstOffset = off
	}
}

// txnMarker is the content of a COMMIT or ABORT control record.
type txnMarker struct {
	commit           bool
	coordinatorEpoch int32
}

// parseMarker decodes the control record of control batch b. ok is false
// for an empty control batch (all cleaned away) and for control types other
// than COMMIT and ABORT.
func parseMarker(b record.Batch) (m txnMarker, ok bool, err error) {
	if b.NumRecords() == 0 {
		return m, false, nil
	}
	var key, value []byte
	errStop := errors.New("stop")
	err = b.ForEachRecord(func(r *record.Record) error {
		key, value = r.Key, r.Value
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return m, false, fmt.Errorf("control batch at %d: %v: %w", b.BaseOffset(), err, kerr.CorruptMessage)
	}
	typ, err := record.ParseControlKey(key)
	if err != nil {
		return m, false, err
	}
	if typ != record.ControlCommit && typ != record.ControlAbort {
		return m, false, nil
	}
	ce, err := record.ParseEndTxnMarker(value)
	if err != nil {
		return m, false, err
	}
	return txnMarker{commit: typ == record.ControlCommit, coordinatorEpoch: ce}, true, nil
}

// checkMarker validates a transaction marker as Kafka's leader does: an
// epoch older than the producer's is InvalidProducerEpoch, a coordinator
// epoch older than the last marker's is TransactionCoordinatorFenced.
func (t *producerTxn) checkMarker(pid int64, epoch int16, m txnMarker) error {
	e := t.get(pid)
	if e == nil {
		return nil
	}
	if epoch < e.epoch {
		return fmt.Errorf("marker for producer %d at epoch %d older than %d: %w", pid, epoch, e.epoch, kerr.InvalidProducerEpoch)
	}
	if m.coordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("marker for producer %d from coordinator epoch %d older than %d: %w", pid, m.coordinatorEpoch, e.coordinatorEpoch, kerr.TransactionCoordinatorFenced)
	}
	return nil
}

// applyMarker stages a COMMIT/ABORT marker of pid at epoch: its open
// transaction (if any) closes. It returns the transaction's first offset,
// -1 when none was open (the marker then changes nothing else).
func (t *producerTxn) applyMarker(pid int64, epoch int16, m txnMarker, now int64) int64 {
	e := t.mut(pid)
	if e == nil {
		e = &producerEntry{pid: pid, epoch: epoch, txnFirstOffset: -1}
		t.put(e)
	}
	first := e.txnFirstOffset
	if epoch != e.epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	e.coordinatorEpoch = m.coordinatorEpoch
	e.lastTimestamp = now
	e.txnFirstOffset = -1
	return first
}

// expire removes producers idle for longer than ttl (ms) without an open
// transaction.
func (ps *producerState) expire(nowMs, ttlMs int64) {
	if ttlMs <= 0 {
		return
	}
	for pid, e := range ps.m {
		if e.txnFirstOffset < 0 && nowMs-e.lastTimestamp >= ttlMs {
			delete(ps.m, pid)
		}
	}
}

// lastBatches maps producer id to the last offset of its last batch.
func (ps *producerState) lastBatches() map[int64]int64 {
	out := make(map[int64]int64, len(ps.m))
	for pid, e := range ps.m {
		if n := len(e.batches); n > 0 {
			out[pid] = e.batches[n-1].lastOffset
		}
	}
	return out
}

// Producer snapshot layout (Kafka's ProducerStateManager, version 1).
const (
	snapshotVersion   = 1
	snapshotHeader    = 10 // version int16 | crc uint32 | count int32
	snapshotEntrySize = 46
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadSnapshot is wrapped by snapshot parse errors.
var errBadSnapshot = errors.New("corrupt producer snapshot")

// encodeSnapshot renders the table in Kafka's .snapshot layout: the last
// batch of each producer (older ones are not persisted, as in Kafka);
// a producer without a data batch (only markers) has lastSequence and
// lastOffset -1.
func (ps *producerState) encodeSnapshot() []byte {
	pids := make([]int64, 0, len(ps.m))
	for pid := range ps.m {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	buf := make([]byte, snapshotHeader+snapshotEntrySize*len(pids))
	binary.BigEndian.PutUint16(buf[0:], snapshotVersion)
	binary.BigEndian.PutUint32(buf[6:], uint32(len(pids)))
	p := buf[snapshotHeader:]
	for _, pid := range pids {
		e := ps.m[pid]
		b := batchMeta{firstSeq: -1, lastSeq: -1, firstOffset: -1, lastOffset: -1}
		if n := len(e.batches); n > 0 {
			b = e.batches[n-1]
		}
		binary.BigEndian.PutUint64(p[0:], uint64(pid))
		binary.BigEndian.PutUint16(p[8:], uint16(e.epoch))
		binary.BigEndian.PutUint32(p[10:], uint32(b.lastSeq))
		binary.BigEndian.PutUint64(p[14:], uint64(b.lastOffset))
		binary.BigEndian.PutUint32(p[22:], uint32(b.lastOffset-b.firstOffset))
		binary.BigEndian.PutUint64(p[26:], uint64(e.lastTimestamp))
		binary.BigEndian.PutUint32(p[34:], uint32(e.coordinatorEpoch))
		binary.BigEndian.PutUint64(p[38:], uint64(e.txnFirstOffset))
		p = p[snapshotEntrySize:]
	}
	binary.BigEndian.PutUint32(buf[2:], crc32.Checksum(buf[6:], castagnoli))
	return buf
}

// ParseProducerSnapshot decodes a .snapshot file, checking its CRC-32C.
func parseSnapshot(data []byte) (*producerState, error) {
	if len(data) < snapshotHeader {
		return nil, fmt.Errorf("%w: %d bytes", errBadSnapshot, len(data))
	}
	if v := binary.BigEndian.Uint16(data); v != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d", errBadSnapshot, v)
	}
	if crc := binary.BigEndian.Uint32(data[2:]); crc != crc32.Checksum(data[6:], castagnoli) {
		return nil, fmt.Errorf("%w: crc mismatch", errBadSnapshot)
	}
	n := int64(binary.BigEndian.Uint32(data[6:]))
	if int64(len(data)-snapshotHeader) != n*snapshotEntrySize {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", errBadSnapshot, n, len(data))
	}
	ps := newProducerState()
	p := data[snapshotHeader:]
	for i := int64(0); i < n; i++ {
		pid := int64(binary.BigEndian.Uint64(p[0:]))
		lastSeq := int32(binary.BigEndian.Uint32(p[10:]))
		lastOff := int64(binary.BigEndian.Uint64(p[14:]))
		delta := int32(binary.BigEndian.Uint32(p[22:]))
		txnFirst := int64(binary.BigEndian.Uint64(p[38:]))
		if pid < 0 || delta < 0 || lastOff < -1 || (lastOff == -1 && delta != 0) || lastOff-int64(delta) < -1 || txnFirst < -1 {
			return nil, fmt.Errorf("%w: entry %d", errBadSnapshot, i)
		}
		if _, dup := ps.m[pid]; dup {
			return nil, fmt.Errorf("%w: producer %d twice", errBadSnapshot, pid)
		}
		e := &producerEntry{
			pid:              pid,
			epoch:            int16(binary.BigEndian.Uint16(p[8:])),
			lastTimestamp:    int64(binary.BigEndian.Uint64(p[26:])),
			coordinatorEpoch: int32(binary.BigEndian.Uint32(p[34:])),
			txnFirstOffset:   txnFirst,
		}
		if lastOff >= 0 {
			firstSeq := seqAdd(lastSeq, -int64(delta))
			if lastSeq < 0 {
				firstSeq, lastSeq = -1, -1
			}
			e.batches = []batchMeta{{firstSeq: firstSeq, lastSeq: lastSeq, firstOffset: lastOff - int64(delta), lastOffset: lastOff}}
		}
		ps.setEntry(e)
		p = p[snapshotEntrySize:]
	}
	ps.reindexOpen()
	return ps, nil
}
