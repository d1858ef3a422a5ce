package storage

import (
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
)

// Transactions (KIP-98) on the storage side: a producer's first
// transactional data batch opens its transaction in the partition, the
// coordinator's COMMIT/ABORT marker closes it. The last stable offset (LSO)
// is the first offset of the oldest transaction that is open or whose
// marker is not yet below the high watermark (Kafka's first unstable
// offset), capped by the high watermark. READ_COMMITTED readers stop at it.

// completedTxn is a transaction closed by a marker at offset last.
type completedTxn struct {
	pid         int64
	first, last int64
	abort       bool
}

// completeTxns records transactions closed by the markers just written
// (under l.mu, producer state committed): each keeps the LSO at its first
// offset until the high watermark passes its marker, and an abort gets a
// .txnindex entry in the active segment.
func (l *Log) completeTxns(done []completedTxn) error {
	for _, c := range done {
		l.completing = append(l.completing, c)
		if !c.abort {
			continue
		}
		lso := l.ps.firstOpen()
		if lso < 0 {
			lso = c.last + 1
		}
		if err := l.appendAbortedTxn(AbortedTxn{ProducerID: c.pid, FirstOffset: c.first, LastOffset: c.last, LastStableOffset: lso}); err != nil {
			return l.fail(err)
		}
	}
	return nil
}

// firstUnstable returns the first offset not yet stable at high watermark
// hw (-1 when everything below hw is stable) and forgets completed
// transactions whose marker is below hw (under l.mu).
func (l *Log) firstUnstable(hw int64) int64 {
	k := 0
	for _, c := range l.completing {
		if c.last >= hw {
			l.completing[k] = c
			k++
		}
	}
	clear(l.completing[k:])
	l.completing = l.completing[:k]
	if l.ps == nil {
		return unstablePending
	}
	first := l.ps.firstOpen()
	for _, c := range l.completing {
		if first < 0 || c.first < first {
			first = c.first
		}
	}
	return first
}

// lso is the view's last stable offset. A transaction whose first offset
// fell below the log start (DeleteRecords) holds it at the log start, as
// in Kafka.
func (v *view) lso() int64 {
	u := v.unstable
	if u == unstablePending {
		// Not known before the producer state is loaded (readers load it
		// first, readerView): nothing counts as stable.
		return min(v.logStart, v.hw)
	}
	if u >= 0 && u < v.logStart {
		u = v.logStart
	}
	if u >= 0 && u < v.hw {
		return u
	}
	return v.hw
}

// AppendMarker appends one transaction marker (a control batch: COMMIT
// when commit, else ABORT) for producer pid at epoch, closing its open
// transaction in this partition. coordinatorEpoch goes in the marker
// value. An ABORT that closes an open transaction appends an AbortedTxn to
// the .txnindex of the segment holding the marker. A marker for a producer
// with no open transaction here is still written and changes nothing
// else. An epoch older than the producer's wraps kerr.InvalidProducerEpoch,
// a coordinatorEpoch older than its last marker's
// kerr.TransactionCoordinatorFenced (nothing written). It returns the
// marker's offset once written; call WaitDurable(ctx, offset+1) for
// durability.
func (l *Log) AppendMarker(pid int64, epoch int16, coordinatorEpoch int32, commit bool, leaderEpoch int32) (int64, error) {
	if pid < 0 || epoch < 0 {
		return -1, fmt.Errorf("marker for %s: producer id %d epoch %d: %w", l.dir, pid, epoch, kerr.InvalidRecord)
	}
	typ := record.ControlAbort
	if commit {
		typ = record.ControlCommit
	}
	b, err := record.BuildNumbered(record.BatchHeader{
		PartitionLeaderEpoch: leaderEpoch,
		Attributes:           record.AttrTransactional | record.AttrControl,
		BaseTimestamp:        l.now().UnixMilli(),
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		BaseSequence:         -1,
	}, []record.Record{record.EndTxnMarker(typ, coordinatorEpoch)})
	if err != nil {
		return -1, fmt.Errorf("marker for %s: %w", l.dir, err)
	}
	res, err := l.Append(b, AppendOptions{LeaderEpoch: leaderEpoch, Coordinator: true})
	if err != nil {
		return -1, err
	}
	return res.BaseOffset, nil
}

// ReadCommitted is Read bounded by the last stable offset (READ_COMMITTED
// fetches): only batches whose last offset is below the LSO are returned.
// The result's HighWatermark is still the high watermark; offset at or
// past the LSO (but within the log) returns no chunks.
func (l *Log) ReadCommitted(offset, maxBytes int64, minOneBatch bool) (ReadResult, error) {
	for try := 0; ; try++ {
		v := l.readerView()
		sv, err := l.stableView(v)
		var res ReadResult
		if err == nil {
			res, err = l.read(sv, offset, maxBytes, minOneBatch)
			res.HighWatermark = v.hw
		}
		if errors.Is(err, errSegmentGone) && try < maxViewRetries {
			continue
		}
		return res, err
	}
}

// lsoMark caches where the last stable offset's batch starts.
type lsoMark struct {
	off int64
	seg *segment
	pos int64
}

// stableView returns v with its readable end moved down from the high
// watermark to the last stable offset (a batch boundary: the first offset
// of a transaction's first batch).
func (l *Log) stableView(v *view) (*view, error) {
	lso := v.lso()
	if lso >= v.hw {
		return v, nil
	}
	s := v.segs[floorSegment(v.segs, lso)]
	var pos int64
	if c := l.lsoPos.Load(); c != nil && c.off == lso && c.seg == s {
		pos = c.pos
	} else if lso > s.base {
		oi, _, err := s.indexes()
		if err != nil {
			return nil, err
		}
		f, err := s.acquire()
		if err != nil {
			return nil, err
		}
		_, p := lookupOffsetIndex(oi.snapshot(), lso-1-s.base)
		pos = int64(p)
		limit := v.limitFor(s)
		hdr := make([]byte, record.HeaderSize)
		found := false
		for pos < limit {
			h, err := readHeader(f.f, pos, hdr)
			if err != nil {
				f.Release()
				return nil, fmt.Errorf("find last stable offset %d in %s segment %d: %w", lso, l.dir, s.base, err)
			}
			if h.last >= lso {
				found = true
				break
			}
			pos += h.size
		}
		f.Release()
		pos = min(pos, limit)
		if found {
			l.lsoPos.Store(&lsoMark{off: lso, seg: s, pos: pos})
		}
	}
	sv := *v
	sv.hw, sv.hwBase, sv.hwPos = lso, s.base, pos
	return &sv, nil
}

// Producers returns every producer with live state in this partition, by
// producer id (DescribeProducers).
func (l *Log) Producers() []ProducerInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadProducers(); err != nil {
		return nil
	}
	out := make([]ProducerInfo, 0, len(l.ps.m))
	for pid, e := range l.ps.m {
		seq := int32(-1)
		if n := len(e.batches); n > 0 {
			seq = e.batches[n-1].lastSeq
		}
		out = append(out, ProducerInfo{
			ProducerID: pid, Epoch: e.epoch, LastSequence: seq, LastTimestamp: e.lastTimestamp,
			CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.txnFirstOffset,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
