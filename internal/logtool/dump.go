package logtool

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/strata-io/strata/internal/record"
)

// DumpOptions selects what Dump prints.
type DumpOptions struct {
	PrintRecords bool // print every record of every batch
	VerifyIndex  bool // check .index/.timeindex entries against the sibling .log
	JSON         bool // JSON Lines (one object per line) instead of text
}

// Dump prints the segment file at path (.log, .index, .timeindex or
// .txnindex), or every segment file of the partition directory at path, to
// w. It returns the problems it found (bad CRCs, undecodable records, a torn
// tail, index entries that disagree with the log); err is for unreadable
// paths and write failures.
func Dump(w io.Writer, path string, opts DumpOptions) ([]Problem, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("dump: %w", err)
	}
	files := []string{path}
	if st.IsDir() {
		if files, err = segmentFiles(path); err != nil {
			return nil, fmt.Errorf("dump: %w", err)
		}
	}
	d := &dumper{w: w, opts: opts}
	for _, f := range files {
		d.file(f)
		if d.err != nil {
			return d.probs, fmt.Errorf("dump: %w", d.err)
		}
	}
	return d.probs, nil
}

// segmentFiles lists dir's segment files ordered by base offset, then
// .log, .index, .timeindex, .txnindex.
func segmentFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	rank := map[string]int{ExtLog: 0, ExtIndex: 1, ExtTimeIndex: 2, ExtTxnIndex: 3}
	type seg struct {
		base int64
		rank int
		name string
	}
	var segs []seg
	for _, e := range ents {
		base, ext, ok := ParseSegmentName(e.Name())
		if r, known := rank[ext]; ok && known && !e.IsDir() {
			segs = append(segs, seg{base, r, e.Name()})
		}
	}
	sort.Slice(segs, func(i, j int) bool {
		if segs[i].base != segs[j].base {
			return segs[i].base < segs[j].base
		}
		return segs[i].rank < segs[j].rank
	})
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = filepath.Join(dir, s.name)
	}
	return out, nil
}

// dumper carries the output state; the first write error sticks in err.
type dumper struct {
	w     io.Writer
	opts  DumpOptions
	probs []Problem
	err   error
}

func (d *dumper) printf(format string, args ...any) {
	if d.err == nil {
		_, d.err = fmt.Fprintf(d.w, format, args...)
	}
}

func (d *dumper) json(v any) {
	if d.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		d.err = err
		return
	}
	_, d.err = d.w.Write(append(b, '\n'))
}

// problem records and prints a problem.
func (d *dumper) problem(p Problem) {
	d.probs = append(d.probs, p)
	if d.opts.JSON {
		d.json(struct {
			Type string `json:"type"`
			Problem
		}{"problem", p})
		return
	}
	d.printf("PROBLEM %s\n", p)
}

// file dumps one file according to its extension.
func (d *dumper) file(path string) {
	_, ext, ok := ParseSegmentName(path)
	if !ok {
		ext = filepath.Ext(path)
	}
	if d.opts.JSON {
		d.json(map[string]string{"type": "file", "file": path})
	} else {
		d.printf("Dumping %s\n", path)
	}
	switch ext {
	case ExtLog:
		d.log(path)
	case ExtIndex:
		d.offsetIndex(path)
	case ExtTimeIndex:
		d.timeIndex(path)
	case ExtTxnIndex:
		d.txnIndex(path)
	default:
		d.problem(Problem{File: path, Position: -1, Reason: "not a segment file (.log, .index, .timeindex, .txnindex)"})
	}
}

// batchJSON is the JSON form of a batch line.
type batchJSON struct {
	Type                 string `json:"type"`
	BaseOffset           int64  `json:"baseOffset"`
	LastOffset           int64  `json:"lastOffset"`
	Count                int32  `json:"count"`
	Position             int64  `json:"position"`
	Size                 int    `json:"size"`
	CRC                  uint32 `json:"crc"`
	CRCValid             bool   `json:"crcValid"`
	Magic                int8   `json:"magic"`
	Compression          string `json:"compression"`
	TimestampType        string `json:"timestampType"`
	MaxTimestamp         int64  `json:"maxTimestamp"`
	BaseTimestamp        int64  `json:"baseTimestamp"`
	ProducerID           int64  `json:"producerId"`
	ProducerEpoch        int16  `json:"producerEpoch"`
	BaseSequence         int32  `json:"baseSequence"`
	PartitionLeaderEpoch int32  `json:"partitionLeaderEpoch"`
	IsTransactional      bool   `json:"isTransactional"`
	IsControl            bool   `json:"isControl"`
	DeleteHorizonMs      *int64 `json:"deleteHorizonMs"`
}

func timestampType(b record.Batch) string {
	if b.IsLogAppendTime() {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// log dumps a .log segment.
func (d *dumper) log(path string) {
	f, size, err := openSized(path)
	if err != nil {
		d.problem(Problem{File: path, Position: -1, Reason: err.Error()})
		return
	}
	defer f.Close()
	sc := NewScanner(f, size)
	for sc.Next() && d.err == nil {
		b, pos := sc.Batch(), sc.Position()
		crcValid := b.Magic() == record.MagicV2 && b.ComputeCRC() == b.CRC()
		bj := batchJSON{Type: "batch", BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset(), Count: b.NumRecords(),
			Position: pos, Size: len(b), CRC: b.CRC(), CRCValid: crcValid, Magic: b.Magic(), Compression: b.Compression().String(),
			TimestampType: timestampType(b), MaxTimestamp: b.MaxTimestamp(), BaseTimestamp: b.BaseTimestamp(),
			ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence(),
			PartitionLeaderEpoch: b.PartitionLeaderEpoch(), IsTransactional: b.IsTransactional(), IsControl: b.IsControl()}
		horizon := "none"
		if b.HasDeleteHorizon() {
			h := b.BaseTimestamp()
			bj.DeleteHorizonMs, horizon = &h, strconv.FormatInt(h, 10)
		}
		if d.opts.JSON {
			d.json(bj)
		} else {
			d.printf("baseOffset: %d lastOffset: %d count: %d position: %d size: %d crc: %08x crcValid: %t magic: %d compression: %s timestampType: %s maxTimestamp: %d producerId: %d producerEpoch: %d baseSequence: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s\n",
				bj.BaseOffset, bj.LastOffset, bj.Count, pos, bj.Size, bj.CRC, crcValid, bj.Magic, bj.Compression, bj.TimestampType,
				bj.MaxTimestamp, bj.ProducerID, bj.ProducerEpoch, bj.BaseSequence, bj.PartitionLeaderEpoch, bj.IsTransactional, bj.IsControl, horizon)
		}
		if err := record.ValidateStored(b); err != nil {
			d.problem(Problem{File: path, Position: pos, Reason: fmt.Sprintf("invalid batch at offset %d: %v", b.BaseOffset(), err)})
			continue
		}
		if d.opts.PrintRecords {
			if err := b.ForEachRecord(func(r *record.Record) error { d.record(b, r); return d.err }); err != nil && d.err == nil {
				d.problem(Problem{File: path, Position: pos, Reason: fmt.Sprintf("batch at offset %d: %v", b.BaseOffset(), err)})
			}
		}
	}
	if err := sc.Err(); err != nil {
		reason := "unreadable batch: " + err.Error()
		if sc.Truncated() {
			reason = fmt.Sprintf("torn tail at position %d (will be truncated by recovery): %v", sc.Offset(), err)
		}
		d.problem(Problem{File: path, Position: sc.Offset(), Reason: reason})
	}
}

// text is a nullable byte field for JSON: null, a string when valid
// UTF-8, else {"hex": "..."}.
type text []byte

// MarshalJSON implements json.Marshaler.
func (t text) MarshalJSON() ([]byte, error) {
	switch {
	case t == nil:
		return []byte("null"), nil
	case utf8.Valid(t):
		return json.Marshal(string(t))
	}
	return json.Marshal(map[string]string{"hex": hex.EncodeToString(t)})
}

// quote renders a nullable byte field for text output: null or a Go quoted string.
func quote(b []byte) string {
	if b == nil {
		return "null"
	}
	return strconv.Quote(string(b))
}

type headerJSON struct {
	Key   string `json:"key"`
	Value text   `json:"value"`
}

type recordJSON struct {
	Type      string       `json:"type"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"`
	Key       text         `json:"key"`
	Value     text         `json:"value"`
	Headers   []headerJSON `json:"headers"`
	Control   string       `json:"control,omitempty"`
}

// record prints one record of b.
func (d *dumper) record(b record.Batch, r *record.Record) {
	ts := b.BaseTimestamp() + r.TimestampDelta
	if b.IsLogAppendTime() {
		ts = b.MaxTimestamp()
	}
	rj := recordJSON{Type: "record", Offset: b.BaseOffset() + int64(r.OffsetDelta), Timestamp: ts, Key: r.Key, Value: r.Value,
		Headers: make([]headerJSON, len(r.Headers))}
	for i, h := range r.Headers {
		rj.Headers[i] = headerJSON{h.Key, h.Value}
	}
	if b.IsControl() {
		rj.Control = controlType(r)
	}
	if d.opts.JSON {
		d.json(rj)
		return
	}
	if rj.Control != "" {
		d.printf("| offset: %d timestamp: %d control: %s\n", rj.Offset, ts, rj.Control)
		return
	}
	hs := make([]string, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = strconv.Quote(h.Key) + "=" + quote(h.Value)
	}
	d.printf("| offset: %d timestamp: %d key: %s value: %s headers: [%s]\n", rj.Offset, ts, quote(r.Key), quote(r.Value), strings.Join(hs, " "))
}

// controlType names a control record by its key (Kafka's ControlRecordType),
// with the coordinator epoch for transaction markers.
func controlType(r *record.Record) string {
	t, err := record.ParseControlKey(r.Key)
	if err != nil {
		return "UNPARSABLE"
	}
	if t != record.ControlAbort && t != record.ControlCommit {
		return t.String()
	}
	epoch, err := record.ParseEndTxnMarker(r.Value)
	if err != nil {
		return t.String() + " (unparsable marker value)"
	}
	return fmt.Sprintf("%s coordinatorEpoch: %d", t, epoch)
}

// offsetIndex dumps an .index file.
func (d *dumper) offsetIndex(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		d.problem(Problem{File: path, Position: -1, Reason: err.Error()})
		return
	}
	base, _, _ := ParseSegmentName(path)
	entries, extra := ParseOffsetIndex(data)
	for _, e := range entries {
		off := base + int64(e.RelativeOffset)
		if d.opts.JSON {
			d.json(map[string]any{"type": "offsetIndexEntry", "offset": off, "position": e.Position})
		} else {
			d.printf("offset: %d position: %d\n", off, e.Position)
		}
	}
	if extra != 0 {
		d.problem(Problem{File: path, Position: -1, Reason: fmt.Sprintf("file length %d not a multiple of %d", len(data), OffsetEntrySize)})
	}
	if d.opts.VerifyIndex {
		if l := d.layout(path); l != nil {
			d.checked(path, checkOffsetIndex(path, entries, l))
		}
	}
}

// timeIndex dumps a .timeindex file.
func (d *dumper) timeIndex(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		d.problem(Problem{File: path, Position: -1, Reason: err.Error()})
		return
	}
	base, _, _ := ParseSegmentName(path)
	entries, extra := ParseTimeIndex(data)
	for _, e := range entries {
		off := base + int64(e.RelativeOffset)
		if d.opts.JSON {
			d.json(map[string]any{"type": "timeIndexEntry", "timestamp": e.Timestamp, "offset": off})
		} else {
			d.printf("timestamp: %d offset: %d\n", e.Timestamp, off)
		}
	}
	if extra != 0 {
		d.problem(Problem{File: path, Position: -1, Reason: fmt.Sprintf("file length %d not a multiple of %d", len(data), TimeEntrySize)})
	}
	if d.opts.VerifyIndex {
		if l := d.layout(path); l != nil {
			d.checked(path, checkTimeIndex(path, entries, l))
		}
	}
}

// txnIndex dumps a .txnindex file.
func (d *dumper) txnIndex(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		d.problem(Problem{File: path, Position: -1, Reason: err.Error()})
		return
	}
	entries, extra := ParseTxnIndex(data)
	for _, e := range entries {
		if d.opts.JSON {
			d.json(map[string]any{"type": "txnIndexEntry", "version": e.Version, "producerId": e.ProducerID,
				"firstOffset": e.FirstOffset, "lastOffset": e.LastOffset, "lastStableOffset": e.LastStableOffset})
		} else {
			d.printf("version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
				e.Version, e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset)
		}
	}
	if extra != 0 {
		d.problem(Problem{File: path, Position: -1, Reason: fmt.Sprintf("file length %d not a multiple of %d", len(data), TxnEntrySize)})
	}
}

// layout scans the .log sibling of an index file for --verify-index.
func (d *dumper) layout(indexPath string) *segmentLayout {
	logPath := siblingPath(indexPath, ExtLog)
	if logPath == "" {
		d.problem(Problem{File: indexPath, Position: -1, Reason: "cannot verify: not a segment file name"})
		return nil
	}
	l, err := scanLayout(logPath)
	if err != nil {
		d.problem(Problem{File: indexPath, Position: -1, Reason: "cannot verify: " + err.Error()})
		return nil
	}
	return l
}

// checked reports index-check problems and a summary line.
func (d *dumper) checked(path string, probs []Problem) {
	for _, p := range probs {
		d.problem(p)
	}
	if !d.opts.JSON {
		d.printf("Index check of %s: %d problems\n", filepath.Base(path), len(probs))
	}
}
