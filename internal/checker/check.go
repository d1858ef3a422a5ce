package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// AnomalyType names one class of anomaly. The definitions are in the package
// documentation and in docs/reliability.md.
type AnomalyType string

const (
	LostWrite          AnomalyType = "lost-write"
	UnseenWrite        AnomalyType = "unseen-write"
	InconsistentOffset AnomalyType = "inconsistent-offset"
	Duplicate          AnomalyType = "duplicate"
	PollSkip           AnomalyType = "poll-skip"
	PollNonmonotonic   AnomalyType = "poll-nonmonotonic"
	AbortedRead        AnomalyType = "aborted-read"
	UncommittedRead    AnomalyType = "uncommitted-read"
	NonAtomicTxn       AnomalyType = "non-atomic-txn"
	DoubleProcessed    AnomalyType = "txn-double-processing"
	SendReorder        AnomalyType = "send-reorder"
	PhantomRead        AnomalyType = "phantom-read"
	OffsetOrder        AnomalyType = "offset-order"
	NonLinearizable    AnomalyType = "nonlinearizable"
)

// AllAnomalyTypes lists every type, in report order.
var AllAnomalyTypes = []AnomalyType{
	LostWrite, UnseenWrite, InconsistentOffset, Duplicate, PollSkip, PollNonmonotonic,
	AbortedRead, UncommittedRead, NonAtomicTxn, DoubleProcessed, SendReorder, PhantomRead,
	OffsetOrder, NonLinearizable,
}

// Anomaly is one violation, with the operations that show it.
type Anomaly struct {
	Type   AnomalyType `json:"type"`
	TP     TP          `json:"tp"`
	Offset int64       `json:"offset"` // NoOffset when no single offset is involved
	Values []string    `json:"values,omitempty"`
	Ops    []int       `json:"ops"` // indexes into the history
	Detail string      `json:"detail"`
}

// Options tune Check.
type Options struct {
	// Drained says the history ends with a read of every partition from its
	// start to its end after the faults healed. Only then are acknowledged
	// writes nobody read (UnseenWrite) and partly visible transactions
	// (NonAtomicTxn) anomalies rather than lag.
	Drained bool
	// LinearizabilityTimeout bounds porcupine per partition; 0 means 10 s;
	// negative skips porcupine (the exact check and the pairwise
	// offset-order check still run).
	LinearizabilityTimeout time.Duration
}

// Stats counts what the history holds.
type Stats struct {
	Ops          map[Kind]map[Status]int `json:"ops"`
	Sends        int                     `json:"sends"`         // records sent (all statuses)
	AckedSends   int                     `json:"acked_sends"`   // acknowledged records (send ok, or in a committed transaction)
	FailedSends  int                     `json:"failed_sends"`  // records definitely not written (failed send, aborted transaction)
	UnknownSends int                     `json:"unknown_sends"` // records whose fate the client did not learn
	RecordsRead  int                     `json:"records_read"`  // records returned to consumers, counting repeats
	ValuesRead   int                     `json:"values_read"`   // distinct values read
	Partitions   int                     `json:"partitions"`
	// Linearizability is the verdict per partition of the offset model
	// (Ok, Illegal), decided exactly.
	Linearizability map[string]string `json:"linearizability,omitempty"`
	// Porcupine is porcupine's verdict on the same model per partition (Ok,
	// Illegal, Unknown: out of budget; skipped when disabled).
	Porcupine map[string]string `json:"porcupine,omitempty"`
	// ConsumeTxnsCommitted counts committed transactions that consumed
	// records and committed their offsets (consume-transform-produce).
	ConsumeTxnsCommitted int `json:"consume_txns_committed"`
	// AllowedDuplicates counts values stored at two offsets by producers
	// that are not idempotent (Kafka allows it; not an anomaly).
	AllowedDuplicates int `json:"allowed_duplicates"`
}

// Result is what Check found.
type Result struct {
	Stats     Stats                 `json:"stats"`
	Counts    map[AnomalyType]int   `json:"counts"`
	Anomalies []Anomaly             `json:"anomalies"`
	Drained   bool                  `json:"drained"`
	Unseen    int                   `json:"unseen"` // acknowledged values nobody read (an anomaly only when Drained)
	byType    map[AnomalyType][]int // indexes into Anomalies
	history   *History              // for reports
	extra     map[string]string     // free-form notes for the report
}

// Valid reports whether no anomaly was found.
func (r *Result) Valid() bool { return len(r.Anomalies) == 0 }

// Of returns the anomalies of one type.
func (r *Result) Of(t AnomalyType) []Anomaly {
	var out []Anomaly
	for _, i := range r.byType[t] {
		out = append(out, r.Anomalies[i])
	}
	return out
}

func (r *Result) add(a Anomaly) {
	if a.Offset == 0 && a.TP == (TP{}) {
		a.Offset = NoOffset
	}
	r.byType[a.Type] = append(r.byType[a.Type], len(r.Anomalies))
	r.Counts[a.Type]++
	r.Anomalies = append(r.Anomalies, a)
}

// readAt is one record read: which operation, where.
type readAt struct {
	op     int
	tp     TP
	offset int64
}

// writeRef points at one Send of one operation.
type writeRef struct {
	op   int
	send int
}

// analysis holds the indexes every check shares.
type analysis struct {
	h   *History
	res *Result

	writerOf  map[string]writeRef
	readersOf map[string][]readAt
	rcRead    map[string]bool // value read by some READ_COMMITTED reader

	// log[tp][offset] is every value any client says sits at offset: the
	// sends that must have taken effect plus every read.
	log map[TP]map[int64]map[string]bool
	// at[tp][offset] is a few operations that reported that offset.
	at map[TP]map[int64][]int
	// offsetsOf[value] is every offset the value was reported at.
	offsetsOf map[string]map[int64]bool
}

// maxOpsPerOffset bounds how many operations an anomaly names per offset.
const maxOpsPerOffset = 8

// Check analyses a history. It never looks at anything but the history: what
// the clients saw.
func Check(h *History, opts Options) *Result {
	res := &Result{
		Counts:  map[AnomalyType]int{},
		byType:  map[AnomalyType][]int{},
		Drained: opts.Drained,
		history: h,
		extra:   map[string]string{},
		Stats:   Stats{Ops: map[Kind]map[Status]int{}, Linearizability: map[string]string{}, Porcupine: map[string]string{}},
	}
	a := &analysis{
		h: h, res: res,
		writerOf:  map[string]writeRef{},
		readersOf: map[string][]readAt{},
		rcRead:    map[string]bool{},
		log:       map[TP]map[int64]map[string]bool{},
		at:        map[TP]map[int64][]int{},
		offsetsOf: map[string]map[int64]bool{},
	}
	a.index()
	a.inconsistentOffsets()
	a.duplicates()
	a.phantomAndAbortedReads()
	a.lostAndUnseen(opts.Drained)
	a.txnAtomicity(opts.Drained)
	a.doubleProcessing()
	a.sessions()
	a.sendOrder()
	a.linearizability(opts.LinearizabilityTimeout)
	return res
}

func (a *analysis) op(i int) *Op { return &a.h.Ops[i] }

// acked reports whether the write of v was acknowledged.
func (a *analysis) acked(w writeRef) bool {
	op := a.op(w.op)
	return op.Status == OK && (op.Kind == KindSend || (op.Kind == KindTxn && op.Commit))
}

// mustHaveCommitted reports whether op's sends took effect: it was
// acknowledged, or its fate is unknown and one of its records was read (for a
// transaction, by a READ_COMMITTED reader: the transaction then committed,
// and all of it must be there).
func (a *analysis) mustHaveCommitted(op *Op, send int) bool {
	switch {
	case op.Status == OK && op.Kind == KindSend:
		return true
	case op.Status == OK && op.Kind == KindTxn:
		return op.Commit
	case op.Status == Unknown && op.Kind == KindSend:
		return len(a.readersOf[op.Sends[send].Value]) > 0
	case op.Status == Unknown && op.Kind == KindTxn:
		for _, s := range op.Sends {
			if a.rcRead[s.Value] {
				return true
			}
		}
	}
	return false
}

func (a *analysis) note(tp TP, offset int64, value string, op int) {
	offs := a.log[tp]
	if offs == nil {
		offs = map[int64]map[string]bool{}
		a.log[tp] = offs
		a.at[tp] = map[int64][]int{}
	}
	vals := offs[offset]
	if vals == nil {
		vals = map[string]bool{}
		offs[offset] = vals
	}
	vals[value] = true
	if ops := a.at[tp][offset]; len(ops) < maxOpsPerOffset && (len(ops) == 0 || ops[len(ops)-1] != op) {
		a.at[tp][offset] = append(ops, op)
	}
	if w, ok := a.writerOf[value]; ok && a.op(w.op).Sends[w.send].TP != tp {
		return // read in the wrong partition: a phantom there, no offset of its own
	}
	if a.offsetsOf[value] == nil {
		a.offsetsOf[value] = map[int64]bool{}
	}
	a.offsetsOf[value][offset] = true
}

func (a *analysis) index() {
	st := &a.res.Stats
	for i := range a.h.Ops {
		op := a.op(i)
		if st.Ops[op.Kind] == nil {
			st.Ops[op.Kind] = map[Status]int{}
		}
		st.Ops[op.Kind][op.Status]++
		if op.Kind == KindTxn && op.Status == OK && op.Commit && len(op.OffsetCommits) > 0 {
			st.ConsumeTxnsCommitted++
		}
		for j, s := range op.Sends {
			if _, dup := a.writerOf[s.Value]; !dup {
				a.writerOf[s.Value] = writeRef{op: i, send: j}
			}
			st.Sends++
			switch {
			case a.acked(writeRef{op: i, send: j}):
				st.AckedSends++
			case op.Status == Fail:
				st.FailedSends++
			case op.Status == Unknown:
				st.UnknownSends++
			}
		}
		for _, r := range op.Reads {
			a.readersOf[r.Value] = append(a.readersOf[r.Value], readAt{op: i, tp: r.TP, offset: r.Offset})
			if op.ReadCommitted {
				a.rcRead[r.Value] = true
			}
			st.RecordsRead++
		}
	}
	st.ValuesRead = len(a.readersOf)
	// Reads first, then the sends that must have taken effect.
	for i := range a.h.Ops {
		op := a.op(i)
		for _, r := range op.Reads {
			a.note(r.TP, r.Offset, r.Value, i)
		}
	}
	for i := range a.h.Ops {
		op := a.op(i)
		for j, s := range op.Sends {
			if s.Offset >= 0 && a.mustHaveCommitted(op, j) {
				a.note(s.TP, s.Offset, s.Value, i)
			}
		}
	}
	st.Partitions = len(a.log)
}

func sortedValues(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func sortedOffsets[V any](m map[int64]V) []int64 {
	out := make([]int64, 0, len(m))
	for o := range m {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// inconsistentOffsets: one offset of one partition reported with two values.
func (a *analysis) inconsistentOffsets() {
	for _, tp := range sortedTPs(a.log) {
		offs := a.log[tp]
		for _, o := range sortedOffsets(offs) {
			if vals := offs[o]; len(vals) > 1 {
				a.res.add(Anomaly{Type: InconsistentOffset, TP: tp, Offset: o, Values: sortedValues(vals),
					Ops:    append([]int(nil), a.at[tp][o]...),
					Detail: fmt.Sprintf("offset %d of %s holds %d different values", o, tp, len(vals))})
			}
		}
	}
}

// duplicates: a value stored at more than one offset. An anomaly for
// idempotent and transactional producers; counted otherwise.
func (a *analysis) duplicates() {
	vals := make([]string, 0)
	for v, offs := range a.offsetsOf {
		if len(offs) > 1 {
			vals = append(vals, v)
		}
	}
	sort.Strings(vals)
	for _, v := range vals {
		w, ok := a.writerOf[v]
		if !ok {
			continue // a phantom; reported there
		}
		wop := a.op(w.op)
		if !wop.Idempotent && wop.Kind != KindTxn {
			a.res.Stats.AllowedDuplicates++
			continue
		}
		offs := sortedOffsets(a.offsetsOf[v])
		tp := wop.Sends[w.send].TP
		ops := []int{w.op}
		for _, o := range offs {
			ops = append(ops, a.at[tp][o]...)
		}
		a.res.add(Anomaly{Type: Duplicate, TP: tp, Offset: offs[1], Values: []string{v}, Ops: dedupe(ops),
			Detail: fmt.Sprintf("value written once by %s producer %s is stored at offsets %v", kindOfProducer(wop), wop.Process, offs)})
	}
}

func kindOfProducer(op *Op) string {
	if op.Kind == KindTxn {
		return "transactional"
	}
	return "idempotent"
}

func dedupe(ops []int) []int {
	seen := map[int]bool{}
	out := ops[:0]
	for _, o := range ops {
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out
}

// phantomAndAbortedReads: values nobody wrote; values whose write
// definitely failed, or whose transaction aborted, seen by a reader that
// should not see them; transactional values a READ_COMMITTED reader saw
// before the transaction asked to commit.
func (a *analysis) phantomAndAbortedReads() {
	for i := range a.h.Ops {
		r := a.op(i)
		if r.Kind == KindTxn {
			continue // what a transaction consumed is also in its session's poll
		}
		for _, rec := range r.Reads {
			w, ok := a.writerOf[rec.Value]
			if !ok {
				a.res.add(Anomaly{Type: PhantomRead, TP: rec.TP, Offset: rec.Offset, Values: []string{rec.Value}, Ops: []int{i},
					Detail: "a value no client sent was read"})
				continue
			}
			wop := a.op(w.op)
			if sent := wop.Sends[w.send].TP; sent != rec.TP {
				a.res.add(Anomaly{Type: PhantomRead, TP: rec.TP, Offset: rec.Offset, Values: []string{rec.Value}, Ops: []int{w.op, i},
					Detail: fmt.Sprintf("the value was sent to %s but read in %s", sent, rec.TP)})
				continue
			}
			switch {
			case wop.Kind == KindSend && wop.Status == Fail:
				a.res.add(Anomaly{Type: AbortedRead, TP: rec.TP, Offset: rec.Offset, Values: []string{rec.Value}, Ops: []int{w.op, i},
					Detail: fmt.Sprintf("the send failed (%s) yet a reader saw the value", wop.Error)})
			case wop.Kind == KindTxn && wop.Status == Fail && r.ReadCommitted:
				a.res.add(Anomaly{Type: AbortedRead, TP: rec.TP, Offset: rec.Offset, Values: []string{rec.Value}, Ops: []int{w.op, i},
					Detail: "a READ_COMMITTED reader saw a value of an aborted transaction"})
			case wop.Kind == KindTxn && r.ReadCommitted && (!wop.Commit || r.End < wop.EndStart):
				why := "the transaction never asked to commit"
				if wop.Commit {
					why = fmt.Sprintf("the poll ended at %s, before the transaction asked to commit at %s",
						time.Duration(r.End), time.Duration(wop.EndStart))
				}
				a.res.add(Anomaly{Type: UncommittedRead, TP: rec.TP, Offset: rec.Offset, Values: []string{rec.Value}, Ops: []int{w.op, i},
					Detail: "a READ_COMMITTED reader saw uncommitted transactional data: " + why})
			}
		}
	}
}

// lostAndUnseen: an acknowledged value nobody read although some reader read
// past its offset (lost), or that nobody read at all (unseen; an anomaly once
// the partitions were drained after healing).
func (a *analysis) lostAndUnseen(drained bool) {
	// bound[tp]: the highest first-offset of any value read, and who read it.
	type boundAt struct {
		offset int64
		op     int
	}
	bound := map[TP]boundAt{}
	for i := range a.h.Ops {
		op := a.op(i)
		if op.Status != OK {
			continue
		}
		for _, r := range op.Reads {
			first := firstOffset(a.offsetsOf[r.Value])
			if b, ok := bound[r.TP]; !ok || first > b.offset {
				bound[r.TP] = boundAt{offset: first, op: i}
			}
		}
	}
	for i := range a.h.Ops {
		op := a.op(i)
		for j, s := range op.Sends {
			w := writeRef{op: i, send: j}
			if !a.acked(w) || len(a.readersOf[s.Value]) > 0 || a.writerOf[s.Value] != w {
				continue
			}
			off := s.Offset
			if offs := a.offsetsOf[s.Value]; len(offs) > 0 {
				off = firstOffset(offs)
			}
			if b, ok := bound[s.TP]; ok && off >= 0 && off <= b.offset {
				a.res.add(Anomaly{Type: LostWrite, TP: s.TP, Offset: off, Values: []string{s.Value}, Ops: []int{i, b.op},
					Detail: fmt.Sprintf("acknowledged at offset %d, never read, though op %d read offset %d", off, b.op, b.offset)})
				continue
			}
			a.res.Unseen++
			if drained {
				a.res.add(Anomaly{Type: UnseenWrite, TP: s.TP, Offset: off, Values: []string{s.Value}, Ops: []int{i},
					Detail: fmt.Sprintf("acknowledged at offset %d, never read by any consumer, not even the final drain", off)})
			}
		}
	}
}

func firstOffset(offs map[int64]bool) int64 {
	first := NoOffset
	for o := range offs {
		if first == NoOffset || o < first {
			first = o
		}
	}
	return first
}

// txnAtomicity: a transaction that asked to commit and whose records READ_COMMITTED
// readers saw only partly, after a drain.
func (a *analysis) txnAtomicity(drained bool) {
	if !drained {
		return
	}
	for i := range a.h.Ops {
		op := a.op(i)
		if op.Kind != KindTxn || op.Status == Fail || !op.Commit || len(op.Sends) < 2 {
			continue
		}
		var seen, unseen []string
		readers := []int{i}
		for _, s := range op.Sends {
			if a.rcRead[s.Value] {
				seen = append(seen, s.Value)
				for _, r := range a.readersOf[s.Value] {
					if a.op(r.op).ReadCommitted {
						readers = append(readers, r.op)
						break
					}
				}
			} else {
				unseen = append(unseen, s.Value)
			}
		}
		if len(seen) > 0 && len(unseen) > 0 {
			a.res.add(Anomaly{Type: NonAtomicTxn, TP: op.Sends[0].TP, Offset: NoOffset, Values: unseen, Ops: dedupe(readers),
				Detail: fmt.Sprintf("transaction (%s) is partly visible to READ_COMMITTED readers: %d of %d records seen; missing %s",
					op.Status, len(seen), len(op.Sends), strings.Join(head(unseen, 5), ", "))})
		}
	}
}

func head(s []string, n int) []string {
	if len(s) > n {
		return append(append([]string(nil), s[:n]...), fmt.Sprintf("... (%d more)", len(s)-n))
	}
	return s
}

// doubleProcessing: one input record consumed by two committed transactions
// of the same group: the offset commit was not atomic with the transaction.
func (a *analysis) doubleProcessing() {
	type input struct {
		group  string
		tp     TP
		offset int64
	}
	first := map[input]int{}
	for i := range a.h.Ops {
		op := a.op(i)
		if op.Kind != KindTxn || op.Status != OK || !op.Commit || op.Group == "" {
			continue
		}
		for _, r := range op.Reads {
			in := input{op.Group, r.TP, r.Offset}
			if j, ok := first[in]; ok && j != i {
				a.res.add(Anomaly{Type: DoubleProcessed, TP: r.TP, Offset: r.Offset, Values: []string{r.Value}, Ops: []int{j, i},
					Detail: fmt.Sprintf("record consumed by two committed transactions of group %s", op.Group)})
				continue
			}
			first[in] = i
		}
	}
}

// visibleOffsets returns, per partition, the sorted offsets whose record a
// reader at that isolation level must return when it reads past them.
func (a *analysis) visibleOffsets(readCommitted bool) map[TP][]int64 {
	out := map[TP][]int64{}
	for tp, offs := range a.log {
		var vis []int64
		for o, vals := range offs {
			if !readCommitted || a.anyVisibleRC(vals) {
				vis = append(vis, o)
			}
		}
		sort.Slice(vis, func(i, j int) bool { return vis[i] < vis[j] })
		out[tp] = vis
	}
	return out
}

func (a *analysis) anyVisibleRC(vals map[string]bool) bool {
	for v := range vals {
		if a.rcRead[v] {
			return true
		}
		if w, ok := a.writerOf[v]; ok && a.acked(w) {
			return true
		}
	}
	return false
}

// between returns the offsets of sorted strictly between lo and hi.
func between(sorted []int64, lo, hi int64) []int64 {
	i := sort.Search(len(sorted), func(i int) bool { return sorted[i] > lo })
	j := sort.Search(len(sorted), func(i int) bool { return sorted[i] >= hi })
	if i >= j {
		return nil
	}
	return sorted[i:j]
}

// sessions: each consumer session reads each partition forward, one record
// after another, unless it was repositioned (assign, seek, rebalance).
func (a *analysis) sessions() {
	vis := map[bool]map[TP][]int64{true: a.visibleOffsets(true), false: a.visibleOffsets(false)}
	type last struct {
		offset int64 // the next record must come after this one
		op     int
		known  bool // false: the position is unknown (first read sets it)
	}
	byProc := map[string][]int{}
	var procs []string
	for i := range a.h.Ops {
		p := a.op(i).Process
		if _, ok := byProc[p]; !ok {
			procs = append(procs, p)
		}
		byProc[p] = append(byProc[p], i)
	}
	for _, p := range procs {
		pos := map[TP]last{}
		for _, i := range byProc[p] {
			op := a.op(i)
			switch op.Kind {
			case KindAssign:
				pos = map[TP]last{}
				fallthrough
			case KindSeek:
				for _, ps := range op.Positions {
					if ps.Offset >= 0 {
						pos[ps.TP] = last{offset: ps.Offset - 1, op: i, known: true}
					} else {
						pos[ps.TP] = last{op: i}
					}
				}
				continue
			case KindRebalance:
				for _, tp := range op.Partitions {
					delete(pos, tp)
				}
				continue
			case KindTxn:
				continue // its Reads repeat the session's poll
			}
			for _, r := range op.Reads {
				l, ok := pos[r.TP]
				if ok && l.known {
					switch {
					case r.Offset <= l.offset:
						a.res.add(Anomaly{Type: PollNonmonotonic, TP: r.TP, Offset: r.Offset, Values: []string{r.Value}, Ops: dedupe([]int{l.op, i}),
							Detail: fmt.Sprintf("session %s read offset %d after offset %d without a seek or rebalance", p, r.Offset, l.offset)})
					default:
						if skipped := between(vis[op.ReadCommitted][r.TP], l.offset, r.Offset); len(skipped) > 0 {
							a.res.add(Anomaly{Type: PollSkip, TP: r.TP, Offset: r.Offset, Values: []string{r.Value}, Ops: dedupe([]int{l.op, i}),
								Detail: fmt.Sprintf("session %s went from offset %d to %d, skipping %d record(s) at %s", p, l.offset, r.Offset,
									len(skipped), offsetList(skipped))})
						}
					}
				}
				pos[r.TP] = last{offset: r.Offset, op: i, known: true}
			}
		}
	}
}

func offsetList(offs []int64) string {
	var parts []string
	for i, o := range offs {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(offs)-5))
			break
		}
		parts = append(parts, fmt.Sprint(o))
	}
	return strings.Join(parts, ",")
}

// sendOrder: an idempotent producer's acknowledged records to one partition
// get increasing offsets in the order it sent them.
func (a *analysis) sendOrder() {
	type key struct {
		proc string
		tp   TP
	}
	type prev struct {
		offset int64
		op     int
	}
	byProc := map[string][]int{}
	for i := range a.h.Ops {
		op := a.op(i)
		if op.Kind == KindSend && op.Idempotent && op.Status == OK {
			byProc[op.Process] = append(byProc[op.Process], i)
		}
	}
	procs := make([]string, 0, len(byProc))
	for p := range byProc {
		procs = append(procs, p)
	}
	sort.Strings(procs)
	for _, p := range procs {
		ops := byProc[p]
		sort.SliceStable(ops, func(x, y int) bool { return a.op(ops[x]).Start < a.op(ops[y]).Start })
		last := map[key]prev{}
		for _, i := range ops {
			for _, s := range a.op(i).Sends {
				if s.Offset < 0 {
					continue
				}
				k := key{p, s.TP}
				if pv, ok := last[k]; ok && s.Offset <= pv.offset {
					a.res.add(Anomaly{Type: SendReorder, TP: s.TP, Offset: s.Offset, Values: []string{s.Value}, Ops: []int{pv.op, i},
						Detail: fmt.Sprintf("idempotent producer %s sent this after the record at offset %d, yet it got offset %d", p, pv.offset, s.Offset)})
				}
				last[k] = prev{offset: s.Offset, op: i}
			}
		}
	}
}
