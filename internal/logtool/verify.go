package logtool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/strata-io/strata/internal/record"
)

// Problem is one defect found by Verify or Dump's index check.
type Problem struct {
	File     string `json:"file"`
	Position int64  `json:"position"` // byte position in File; -1 when about the whole file
	Reason   string `json:"reason"`
}

// String formats the problem as "file: position N: reason".
func (p Problem) String() string {
	if p.Position < 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Reason)
	}
	return fmt.Sprintf("%s: position %d: %s", p.File, p.Position, p.Reason)
}

// VerifyOptions tunes Verify.
type VerifyOptions struct {
	// Progress, if set, is called after each partition directory with the
	// number done and the total.
	Progress func(done, total int)
}

// Report is the outcome of Verify.
type Report struct {
	Partitions int       `json:"partitions"`
	Segments   int       `json:"segments"`
	Batches    int64     `json:"batches"`
	Records    int64     `json:"records"`
	Bytes      int64     `json:"bytes"`
	Problems   []Problem `json:"problems"`
}

// OK reports whether no problem was found.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Verify checks every partition directory (`<topic>-<n>`) under logDir:
// every batch of every segment frames, has a valid CRC-32C and decodes;
// offsets strictly increase across batches and segments; each segment's
// file-name base offset is <= its first batch's offset and above the
// previous segment's last offset; .index and .timeindex entries agree with
// the log. A partial batch at the end of the last (active) segment is
// reported as a torn tail. The returned error is for an unreadable logDir
// only; defects are in Report.Problems.
func Verify(logDir string, opts VerifyOptions) (*Report, error) {
	ents, err := os.ReadDir(logDir)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", logDir, err)
	}
	var parts []string
	for _, e := range ents {
		if _, _, ok := ParsePartitionDir(e.Name()); ok && e.IsDir() {
			parts = append(parts, filepath.Join(logDir, e.Name()))
		}
	}
	rep := &Report{}
	for i, dir := range parts {
		verifyPartition(dir, rep)
		rep.Partitions++
		if opts.Progress != nil {
			opts.Progress(i+1, len(parts))
		}
	}
	return rep, nil
}

// verifyPartition checks one partition directory, adding to rep.
func verifyPartition(dir string, rep *Report) {
	bases, err := segmentBases(dir)
	if err != nil {
		rep.Problems = append(rep.Problems, Problem{File: dir, Position: -1, Reason: err.Error()})
		return
	}
	prevLast := int64(-1)
	for i, base := range bases {
		rep.Segments++
		path := filepath.Join(dir, SegmentFileName(base, ExtLog))
		if base <= prevLast {
			rep.Problems = append(rep.Problems, Problem{File: path, Position: -1,
				Reason: fmt.Sprintf("base offset %d in file name not above previous segment's last offset %d", base, prevLast)})
		}
		layout, last, probs := checkSegment(path, base, prevLast, i == len(bases)-1, rep)
		rep.Problems = append(rep.Problems, probs...)
		prevLast = last
		if layout != nil {
			rep.Problems = append(rep.Problems, checkIndexFiles(path, layout)...)
		}
	}
}

// segmentBases lists the base offsets of the .log files in dir, sorted.
func segmentBases(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range ents {
		if base, ext, ok := ParseSegmentName(e.Name()); ok && ext == ExtLog && !e.IsDir() {
			bases = append(bases, base)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// checkSegment scans one .log file. It returns the batch layout (nil if the
// file cannot be read), the last offset seen (prevLast if none) and the
// problems found.
func checkSegment(path string, base, prevLast int64, active bool, rep *Report) (*segmentLayout, int64, []Problem) {
	var probs []Problem
	add := func(pos int64, format string, args ...any) {
		probs = append(probs, Problem{File: path, Position: pos, Reason: fmt.Sprintf(format, args...)})
	}
	f, size, err := openSized(path)
	if err != nil {
		add(-1, "%v", err)
		return nil, prevLast, probs
	}
	defer f.Close()
	rep.Bytes += size
	layout := &segmentLayout{base: base}
	last := prevLast
	sc := NewScanner(f, size)
	for sc.Next() {
		b, pos := sc.Batch(), sc.Position()
		rep.Batches++
		layout.batches = append(layout.batches, batchInfo{pos: pos, base: b.BaseOffset(), last: b.LastOffset(), maxTimestamp: b.MaxTimestamp()})
		layout.end = sc.Offset()
		if len(layout.batches) == 1 && b.BaseOffset() < base {
			add(pos, "first batch offset %d below the base offset %d in the file name", b.BaseOffset(), base)
		}
		if b.BaseOffset() <= last {
			add(pos, "batch base offset %d not above previous last offset %d", b.BaseOffset(), last)
		}
		if b.LastOffset() > last {
			last = b.LastOffset()
		}
		if err := record.ValidateStored(b); err != nil {
			add(pos, "invalid batch at offset %d: %v", b.BaseOffset(), err)
			continue
		}
		n, err := checkRecords(b)
		rep.Records += n
		if err != nil {
			add(pos, "batch at offset %d: %v", b.BaseOffset(), err)
		}
	}
	switch err := sc.Err(); {
	case err == nil:
	case sc.Truncated() && active:
		add(sc.Offset(), "torn tail at position %d (will be truncated by recovery): %v", sc.Offset(), err)
	case sc.Truncated():
		add(sc.Offset(), "truncated batch in a non-active segment: %v", err)
	default:
		add(sc.Offset(), "unreadable batch: %v", err)
	}
	return layout, last, probs
}

// checkRecords decodes every record of a CRC-valid batch and checks that
// offset deltas strictly increase within [0, lastOffsetDelta] and that a
// control batch holds at most one record. It returns the record count.
func checkRecords(b record.Batch) (int64, error) {
	var n int64
	prev := int64(-1)
	err := b.ForEachRecord(func(r *record.Record) error {
		n++
		d := int64(r.OffsetDelta)
		if d <= prev || d > int64(b.LastOffsetDelta()) {
			return fmt.Errorf("record %d has offset delta %d (previous %d, lastOffsetDelta %d)", n-1, d, prev, b.LastOffsetDelta())
		}
		prev = d
		return nil
	})
	if err == nil && b.IsControl() && n > 1 {
		err = fmt.Errorf("control batch holds %d records", n)
	}
	return n, err
}

// checkIndexFiles checks the .index and .timeindex of the segment at
// logPath against its layout. Missing index files are not a problem
// (recovery rebuilds them).
func checkIndexFiles(logPath string, layout *segmentLayout) []Problem {
	var probs []Problem
	idx := siblingPath(logPath, ExtIndex)
	if data, err := os.ReadFile(idx); err == nil {
		entries, extra := ParseOffsetIndex(data)
		if extra != 0 {
			probs = append(probs, Problem{File: idx, Position: -1, Reason: fmt.Sprintf("file length %d not a multiple of %d", len(data), OffsetEntrySize)})
		}
		probs = append(probs, checkOffsetIndex(idx, entries, layout)...)
	} else if !errors.Is(err, os.ErrNotExist) {
		probs = append(probs, Problem{File: idx, Position: -1, Reason: err.Error()})
	}
	tidx := siblingPath(logPath, ExtTimeIndex)
	if data, err := os.ReadFile(tidx); err == nil {
		entries, extra := ParseTimeIndex(data)
		if extra != 0 {
			probs = append(probs, Problem{File: tidx, Position: -1, Reason: fmt.Sprintf("file length %d not a multiple of %d", len(data), TimeEntrySize)})
		}
		probs = append(probs, checkTimeIndex(tidx, entries, layout)...)
	} else if !errors.Is(err, os.ErrNotExist) {
		probs = append(probs, Problem{File: tidx, Position: -1, Reason: err.Error()})
	}
	return probs
}

// scanLayout scans a .log file into its batch layout for index checks.
func scanLayout(logPath string) (*segmentLayout, error) {
	base, _, ok := ParseSegmentName(logPath)
	if !ok {
		return nil, fmt.Errorf("%s: not a segment file name", logPath)
	}
	f, size, err := openSized(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l := &segmentLayout{base: base}
	sc := NewScanner(f, size)
	for sc.Next() {
		b := sc.Batch()
		l.batches = append(l.batches, batchInfo{pos: sc.Position(), base: b.BaseOffset(), last: b.LastOffset(), maxTimestamp: b.MaxTimestamp()})
		l.end = sc.Offset()
	}
	return l, nil
}
