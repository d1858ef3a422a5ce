package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/strata-io/strata/internal/vfs"
)

// A segment's .txnindex lists the transactions aborted by an ABORT marker
// written in that segment (Kafka's TransactionIndex). The file is created only
// when the first abort lands in the segment; its entries are also kept in
// memory (segment.txns) so AbortedTransactions never touches the disk. The
// active segment's file is appended to as aborts happen and rewritten
// (tmp, fsync, rename) when the segment closes; recovery rebuilds the file
// of every re-scanned segment from its markers.

// TxnEntrySize is the size of one .txnindex entry.
const TxnEntrySize = 34

// errBadTxnIndex is wrapped by .txnindex parse errors.
var errBadTxnIndex = errors.New("corrupt transaction index")

// appendTxnEntry appends the 34-byte encoding of e to dst.
func appendTxnEntry(dst []byte, e AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(e.LastStableOffset))
}

// EncodeTxnIndex renders entries in Kafka's .txnindex layout.
func EncodeTxnIndex(entries []AbortedTxn) []byte {
	out := make([]byte, 0, len(entries)*TxnEntrySize)
	for _, e := range entries {
		out = appendTxnEntry(out, e)
	}
	return out
}

// ParseTxnIndex decodes a .txnindex file. It checks every entry (version
// 0, producer id >= 0, 0 <= firstOffset <= lastOffset, lastStableOffset >=
// 0, entries in strictly increasing lastOffset order). On error it also returns the valid entries
// before the first bad one.
func ParseTxnIndex(data []byte) ([]AbortedTxn, error) {
	n := len(data) / TxnEntrySize
	out := make([]AbortedTxn, 0, n)
	for i := 0; i < n; i++ {
		p := data[i*TxnEntrySize:]
		if v := int16(binary.BigEndian.Uint16(p)); v != 0 {
			return out, fmt.Errorf("%w: entry %d has version %d", errBadTxnIndex, i, v)
		}
		e := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(p[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(p[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(p[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(p[26:])),
		}
		if e.ProducerID < 0 || e.FirstOffset < 0 || e.FirstOffset > e.LastOffset || e.LastStableOffset < 0 ||
			(len(out) > 0 && e.LastOffset <= out[len(out)-1].LastOffset) {
			return out, fmt.Errorf("%w: entry %d %+v out of range or order", errBadTxnIndex, i, e)
		}
		out = append(out, e)
	}
	if len(data)%TxnEntrySize != 0 {
		return out, fmt.Errorf("%w: length %d not a multiple of %d", errBadTxnIndex, len(data), TxnEntrySize)
	}
	return out, nil
}

// abortedTxns returns the segment's entries (shared, read-only).
func (s *segment) abortedTxns() []AbortedTxn {
	if p := s.txns.Load(); p != nil {
		return *p
	}
	return nil
}

// setAbortedTxns replaces the segment's entries.
func (s *segment) setAbortedTxns(e []AbortedTxn) {
	if len(e) == 0 {
		s.txns.Store(nil)
		return
	}
	s.txns.Store(&e)
}

// addAbortedTxn appends one entry (writer only). Readers holding the old
// slice never see the new element: appends only write past their length.
func (s *segment) addAbortedTxn(e AbortedTxn) {
	n := append(s.abortedTxns(), e)
	s.txns.Store(&n)
}

// writeTxnIndex replaces the segment's .txnindex (suffix state: "" or
// CleanedSuffix) with entries, or removes it when there are none. The
// caller fsyncs the directory.
func writeTxnIndex(fsys vfs.FS, path string, entries []AbortedTxn) error {
	if len(entries) == 0 {
		if err := fsys.Remove(path); err != nil && !errNotExist(err) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	}
	return writeIndexFile(fsys, path, EncodeTxnIndex(entries))
}

// appendAbortedTxn records an abort whose marker is in the active segment:
// in memory, and appended to the segment's .txnindex (created on the first
// abort; fsynced when the segment closes).
func (l *Log) appendAbortedTxn(e AbortedTxn) error {
	s := l.active
	n := len(s.abortedTxns())
	name := s.path(TxnIndexSuffix)
	f, err := l.fsys.OpenFile(name, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	_, werr := f.WriteAt(appendTxnEntry(nil, e), int64(n)*TxnEntrySize)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	s.addAbortedTxn(e)
	return nil
}

// loadTxnIndex reads a closed segment's .txnindex into memory. A corrupt
// file keeps its valid prefix and reports false: the caller rebuilds it
// from the log.
func (l *Log) loadTxnIndex(s *segment) bool {
	data, err := vfs.ReadFile(l.fsys, s.path(TxnIndexSuffix))
	if errNotExist(err) {
		return true
	}
	if err != nil {
		l.logger.Warn("unreadable transaction index; rebuilding it", "base", s.base, "err", err)
		return false
	}
	ents, err := ParseTxnIndex(data)
	s.setAbortedTxns(ents)
	if err != nil {
		l.logger.Warn("corrupt transaction index; rebuilding it", "base", s.base, "err", err)
		return false
	}
	return true
}

// AbortedTransactions returns the aborted transactions overlapping
// [from, to): every entry with LastOffset >= from and FirstOffset < to, in
// LastOffset order (READ_COMMITTED fetches, the cleaner). Entries come
// from memory. The scan stops at the first entry whose LastStableOffset
// is >= to: every transaction still open then started at or after to.
func (l *Log) AbortedTransactions(from, to int64) []AbortedTxn {
	v := l.v.Load()
	var out []AbortedTxn
	for i := floorSegment(v.segs, from); i < len(v.segs); i++ {
		for _, e := range v.segs[i].abortedTxns() {
			if e.LastOffset >= from && e.FirstOffset < to {
				out = append(out, e)
			}
			if e.LastStableOffset >= to {
				return out
			}
		}
	}
	return out
}

// distributeTxns assigns the entries of replaced segments to the
// replacement segments (sorted by base): each goes to the last replacement
// whose base is <= its LastOffset (the first one when none is).
func distributeTxns(entries []AbortedTxn, reps []*SegmentWriter) [][]AbortedTxn {
	out := make([][]AbortedTxn, len(reps))
	if len(reps) == 0 {
		return out
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].LastOffset < entries[j].LastOffset })
	for _, e := range entries {
		i := sort.Search(len(reps), func(i int) bool { return reps[i].seg.base > e.LastOffset })
		if i > 0 {
			i--
		}
		out[i] = append(out[i], e)
	}
	return out
}
