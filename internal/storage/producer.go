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
// touched by the partition's writer (under Log.mu).
type producerState struct {
	m map[int64]*producerEntry
}

func newProducerState() *producerState { return &producerState{m: map[int64]*producerEntry{}} }

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
		t.ps.m[pid] = e
	}
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

// applyTxn tracks open transactions: a transactional data batch opens one
// (its first offset is kept until the marker), a control batch (COMMIT or
// ABORT marker written by the coordinator) closes it. b has its final
// offsets.
func (t *producerTxn) applyTxn(b record.Batch) {
	pid := b.ProducerID()
	if pid < 0 {
		return
	}
	switch {
	case b.IsControl():
		if e := t.mut(pid); e != nil {
			e.txnFirstOffset = -1
			if ep := b.ProducerEpoch(); ep > e.epoch {
				e.epoch = ep
				e.batches = e.batches[:0]
			}
		}
	case b.IsTransactional():
		if e := t.mut(pid); e != nil && e.txnFirstOffset < 0 {
			e.txnFirstOffset = b.BaseOffset()
		}
	}
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
// batch of each producer (older ones are not persisted, as in Kafka).
func (ps *producerState) encodeSnapshot() []byte {
	pids := make([]int64, 0, len(ps.m))
	for pid, e := range ps.m {
		if len(e.batches) > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	buf := make([]byte, snapshotHeader+snapshotEntrySize*len(pids))
	binary.BigEndian.PutUint16(buf[0:], snapshotVersion)
	binary.BigEndian.PutUint32(buf[6:], uint32(len(pids)))
	p := buf[snapshotHeader:]
	for _, pid := range pids {
		e := ps.m[pid]
		b := e.batches[len(e.batches)-1]
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
		if pid < 0 || delta < 0 || lastOff < 0 {
			return nil, fmt.Errorf("%w: entry %d", errBadSnapshot, i)
		}
		firstSeq := seqAdd(lastSeq, -int64(delta))
		ps.m[pid] = &producerEntry{
			pid:              pid,
			epoch:            int16(binary.BigEndian.Uint16(p[8:])),
			batches:          []batchMeta{{firstSeq: firstSeq, lastSeq: lastSeq, firstOffset: lastOff - int64(delta), lastOffset: lastOff}},
			lastTimestamp:    int64(binary.BigEndian.Uint64(p[26:])),
			coordinatorEpoch: int32(binary.BigEndian.Uint32(p[34:])),
			txnFirstOffset:   int64(binary.BigEndian.Uint64(p[38:])),
		}
		p = p[snapshotEntrySize:]
	}
	return ps, nil
}
