package checker

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

var (
	p0 = TP{"t", 0}
	p1 = TP{"t", 1}
)

// hist builds a history by hand; each added op gets the next 20 ns of the
// clock unless it sets Start/End itself.
type hist struct {
	h History
	t int64
}

func (b *hist) add(op Op) int {
	op.Index = len(b.h.Ops)
	if op.Start == 0 && op.End == 0 {
		b.t += 10
		op.Start = b.t
		b.t += 10
		op.End = b.t
	}
	if op.Status == "" {
		op.Status = OK
	}
	b.h.Ops = append(b.h.Ops, op)
	return op.Index
}

func (b *hist) send(proc string, tp TP, value string, offset int64, st Status) int {
	return b.add(Op{Process: proc, Kind: KindSend, Status: st, Idempotent: true,
		Sends: []Send{{TP: tp, Value: value, Offset: offset}}})
}

func (b *hist) poll(proc string, rc bool, recs ...Record) int {
	return b.add(Op{Process: proc, Kind: KindPoll, ReadCommitted: rc, Reads: recs})
}

func rec(tp TP, off int64, v string) Record { return Record{TP: tp, Offset: off, Value: v} }

func check(t *testing.T, b *hist, drained bool) *Result {
	t.Helper()
	if err := b.h.Validate(); err != nil {
		t.Fatal(err)
	}
	return Check(&b.h, Options{Drained: drained})
}

// expect asserts the result has exactly the given anomaly types (with
// counts), and returns the anomalies of the first.
func expect(t *testing.T, r *Result, want map[AnomalyType]int) {
	t.Helper()
	for _, typ := range AllAnomalyTypes {
		if r.Counts[typ] != want[typ] {
			var buf bytes.Buffer
			_ = r.WriteReport(&buf)
			t.Fatalf("%s: got %d, want %d\n%s", typ, r.Counts[typ], want[typ], buf.String())
		}
	}
}

func names(t *testing.T, a Anomaly, ops ...int) {
	t.Helper()
	for _, o := range ops {
		if !slices.Contains(a.Ops, o) {
			t.Fatalf("anomaly %s names ops %v, want %d among them (%s)", a.Type, a.Ops, o, a.Detail)
		}
	}
}

func TestValidHistory(t *testing.T) {
	b := &hist{}
	b.send("p", p0, "a", 0, OK)
	b.send("p", p0, "b", 1, OK)
	b.send("p", p1, "c", 0, OK)
	b.add(Op{Process: "c", Kind: KindAssign, Positions: []Position{{p0, 0}, {p1, 0}}})
	b.poll("c", true, rec(p0, 0, "a"), rec(p1, 0, "c"))
	b.poll("c", true, rec(p0, 1, "b"))
	r := check(t, b, true)
	expect(t, r, nil)
	if r.Stats.AckedSends != 3 || r.Stats.ValuesRead != 3 {
		t.Fatalf("stats %+v", r.Stats)
	}
	for tp, v := range r.Stats.Linearizability {
		if v != "Ok" {
			t.Fatalf("%s: porcupine %s", tp, v)
		}
	}
}

func TestLostWrite(t *testing.T) {
	b := &hist{}
	b.send("p", p0, "a", 0, OK)
	lost := b.send("p", p0, "b", 1, OK)
	b.send("p", p0, "c", 2, OK)
	r1 := b.poll("c1", true, rec(p0, 0, "a")) // group sessions: positions unknown
	r2 := b.poll("c2", true, rec(p0, 2, "c"))
	r := check(t, b, false)
	expect(t, r, map[AnomalyType]int{LostWrite: 1})
	a := r.Of(LostWrite)[0]
	if a.Offset != 1 || a.Values[0] != "b" {
		t.Fatalf("lost %+v", a)
	}
	names(t, a, lost, r2)
	_ = r1
}

func TestUnseenWrite(t *testing.T) {
	b := &hist{}
	b.send("p", p0, "a", 0, OK)
	w := b.send("p", p0, "b", 1, OK)
	b.poll("c", true, rec(p0, 0, "a"))
	r := check(t, b, false)
	expect(t, r, nil)
	if r.Unseen != 1 {
		t.Fatalf("unseen %d", r.Unseen)
	}
	r = check(t, b, true)
	expect(t, r, map[AnomalyType]int{UnseenWrite: 1})
	names(t, r.Of(UnseenWrite)[0], w)
}

func TestInconsistentOffset(t *testing.T) {
	b := &hist{}
	w := b.send("p", p0, "a", 0, OK)
	b.send("q", p0, "x", NoOffset, Unknown)
	rd := b.poll("c", true, rec(p0, 0, "x"))
	r := check(t, b, false)
	// a is also lost: someone read offset 0 and it was not a.
	expect(t, r, map[AnomalyType]int{InconsistentOffset: 1, LostWrite: 1})
	a := r.Of(InconsistentOffset)[0]
	if a.Offset != 0 || strings.Join(a.Values, ",") != "a,x" {
		t.Fatalf("%+v", a)
	}
	names(t, a, w, rd)
}

func TestDuplicate(t *testing.T) {
	for _, idem := range []bool{true, false} {
		b := &hist{}
		w := b.add(Op{Process: "p", Kind: KindSend, Idempotent: idem, Sends: []Send{{TP: p0, Value: "a", Offset: 0}}})
		rd := b.poll("c", true, rec(p0, 0, "a"), rec(p0, 1, "a"))
		r := check(t, b, true)
		if !idem {
			expect(t, r, nil)
			if r.Stats.AllowedDuplicates != 1 {
				t.Fatalf("allowed duplicates %d", r.Stats.AllowedDuplicates)
			}
			continue
		}
		expect(t, r, map[AnomalyType]int{Duplicate: 1})
		names(t, r.Of(Duplicate)[0], w, rd)
	}
}

func TestPollSkip(t *testing.T) {
	b := &hist{}
	b.send("p", p0, "a", 0, OK)
	b.send("p", p0, "b", 1, OK)
	b.send("p", p0, "c", 2, OK)
	r1 := b.poll("c", true, rec(p0, 0, "a"))
	r2 := b.poll("c", true, rec(p0, 2, "c"))
	b.poll("d", true, rec(p0, 1, "b")) // b exists; c skipped it
	r := check(t, b, false)
	expect(t, r, map[AnomalyType]int{PollSkip: 1})
	a := r.Of(PollSkip)[0]
	names(t, a, r1, r2)

	// A seek or a rebalance between the polls makes the jump legal.
	for _, between := range []Op{
		{Process: "c", Kind: KindSeek, Positions: []Position{{p0, 2}}},
		{Process: "c", Kind: KindRebalance, Partitions: []TP{p0}},
	} {
		b := &hist{}
		b.send("p", p0, "a", 0, OK)
		b.send("p", p0, "b", 1, OK)
		b.send("p", p0, "c", 2, OK)
		b.poll("c", true, rec(p0, 0, "a"))
		b.add(between)
		b.poll("c", true, rec(p0, 2, "c"))
		b.poll("d", true, rec(p0, 1, "b"))
		expect(t, check(t, b, false), nil)
	}

	// A seek to a position, then a read past a known record: skip.
	b = &hist{}
	b.send("p", p0, "a", 0, OK)
	b.send("p", p0, "b", 1, OK)
	b.add(Op{Process: "c", Kind: KindAssign, Positions: []Position{{p0, 0}}})
	b.poll("c", true, rec(p0, 1, "b"))
	b.poll("d", true, rec(p0, 0, "a"))
	expect(t, check(t, b, false), map[AnomalyType]int{PollSkip: 1})
}

func TestPollSkipIgnoresAbortedForReadCommitted(t *testing.T) {
	b := &hist{}
	b.send("p", p0, "a", 0, OK)
	b.add(Op{Process: "tx", Kind: KindTxn, Status: Fail, Idempotent: true, Sends: []Send{{TP: p0, Value: "x", Offset: 1}}})
	b.send("p", p0, "c", 3, OK) // offset 2 is the abort marker
	b.poll("rc", true, rec(p0, 0, "a"), rec(p0, 3, "c"))
	b.poll("ru", false, rec(p0, 0, "a"), rec(p0, 1, "x"), rec(p0, 3, "c"))
	expect(t, check(t, b, true), nil)

	// A read-uncommitted session that jumps over the aborted record skipped it.
	b.poll("ru2", false, rec(p0, 0, "a"), rec(p0, 3, "c"))
	expect(t, check(t, b, true), map[AnomalyType]int{PollSkip: 1})
}

func TestPollNonmonotonic(t *testing.T) {
	b := &hist{}
	b.send("p", p0, "a", 0, OK)
	b.send("p", p0, "b", 1, OK)
	r1 := b.poll("c", true, rec(p0, 0, "a"), rec(p0, 1, "b"))
	r2 := b.poll("c", true, rec(p0, 1, "b"))
	r := check(t, b, false)
	expect(t, r, map[AnomalyType]int{PollNonmonotonic: 1})
	names(t, r.Of(PollNonmonotonic)[0], r1, r2)

	// Within one poll too.
	b = &hist{}
	b.send("p", p0, "a", 0, OK)
	b.send("p", p0, "b", 1, OK)
	b.poll("c", true, rec(p0, 1, "b"), rec(p0, 0, "a"))
	expect(t, check(t, b, false), map[AnomalyType]int{PollNonmonotonic: 1})
}

func TestAbortedRead(t *testing.T) {
	b := &hist{}
	tx := b.add(Op{Process: "tx", Kind: KindTxn, Status: Fail, Idempotent: true, EndStart: 5,
		Sends: []Send{{TP: p0, Value: "x", Offset: 0}}})
	rd := b.poll("rc", true, rec(p0, 0, "x"))
	b.poll("ru", false, rec(p0, 0, "x")) // allowed
	r := check(t, b, false)
	expect(t, r, map[AnomalyType]int{AbortedRead: 1})
	names(t, r.Of(AbortedRead)[0], tx, rd)

	// A send that definitely failed yet is read.
	b = &hist{}
	w := b.send("p", p0, "y", NoOffset, Fail)
	rd = b.poll("ru", false, rec(p0, 0, "y"))
	r = check(t, b, false)
	expect(t, r, map[AnomalyType]int{AbortedRead: 1})
	names(t, r.Of(AbortedRead)[0], w, rd)
}

func TestUncommittedRead(t *testing.T) {
	b := &hist{}
	tx := b.add(Op{Process: "tx", Kind: KindTxn, Status: OK, Commit: true, Start: 10, EndStart: 100, End: 120,
		Sends: []Send{{TP: p0, Value: "x", Offset: 0}}})
	rd := b.add(Op{Process: "rc", Kind: KindPoll, ReadCommitted: true, Start: 30, End: 50, Reads: []Record{rec(p0, 0, "x")}})
	b.add(Op{Process: "ok", Kind: KindPoll, ReadCommitted: true, Start: 90, End: 130, Reads: []Record{rec(p0, 0, "x")}})
	r := check(t, b, true)
	expect(t, r, map[AnomalyType]int{UncommittedRead: 1})
	names(t, r.Of(UncommittedRead)[0], tx, rd)
}

func TestNonAtomicTxn(t *testing.T) {
	b := &hist{}
	tx := b.add(Op{Process: "tx", Kind: KindTxn, Status: OK, Commit: true, EndStart: 5, Idempotent: true,
		Sends: []Send{{TP: p0, Value: "x", Offset: 0}, {TP: p1, Value: "y", Offset: 0}}})
	b.add(Op{Process: "d", Kind: KindAssign, Positions: []Position{{p0, 0}, {p1, 0}}})
	rd := b.poll("d", true, rec(p0, 0, "x"))
	r := check(t, b, true)
	expect(t, r, map[AnomalyType]int{NonAtomicTxn: 1, UnseenWrite: 1})
	a := r.Of(NonAtomicTxn)[0]
	names(t, a, tx, rd)
	if a.Values[0] != "y" {
		t.Fatalf("%+v", a)
	}
	// Unknown outcome, partly visible: also non-atomic (no unseen: not acked).
	b.h.Ops[tx].Status = Unknown
	expect(t, check(t, b, true), map[AnomalyType]int{NonAtomicTxn: 1})
	// Without a drain, nothing can be said.
	b.h.Ops[tx].Status = OK
	expect(t, check(t, b, false), nil)
}

func TestDoubleProcessing(t *testing.T) {
	in := TP{"in", 0}
	b := &hist{}
	b.send("src", in, "i0", 0, OK)
	t1 := b.add(Op{Process: "etl", Kind: KindTxn, Status: OK, Commit: true, EndStart: 1, Group: "g", ReadCommitted: true,
		Reads: []Record{rec(in, 0, "i0")}, Sends: []Send{{TP: p0, Value: "o1", Offset: 0}},
		OffsetCommits: []Position{{in, 1}}})
	b.add(Op{Process: "etl2", Kind: KindAssign, Positions: []Position{{in, 0}}})
	t2 := b.add(Op{Process: "etl2", Kind: KindTxn, Status: OK, Commit: true, EndStart: 2, Group: "g", ReadCommitted: true,
		Reads: []Record{rec(in, 0, "i0")}, Sends: []Send{{TP: p0, Value: "o2", Offset: 2}},
		OffsetCommits: []Position{{in, 1}}})
	b.poll("d", true, rec(p0, 0, "o1"), rec(p0, 2, "o2"))
	r := check(t, b, true)
	expect(t, r, map[AnomalyType]int{DoubleProcessed: 1})
	names(t, r.Of(DoubleProcessed)[0], t1, t2)
}

func TestSendReorder(t *testing.T) {
	b := &hist{}
	w1 := b.send("p", p0, "a", 5, OK)
	w2 := b.send("p", p0, "b", 3, OK)
	b.poll("c", true, rec(p0, 3, "b"), rec(p0, 5, "a"))
	r := check(t, b, true)
	// b began after a was acknowledged at 5: offset order too.
	expect(t, r, map[AnomalyType]int{SendReorder: 1, OffsetOrder: 1})
	names(t, r.Of(SendReorder)[0], w1, w2)
	names(t, r.Of(OffsetOrder)[0], w1, w2)
}

func TestPhantomRead(t *testing.T) {
	b := &hist{}
	rd := b.poll("c", true, rec(p0, 0, "ghost"))
	r := check(t, b, false)
	expect(t, r, map[AnomalyType]int{PhantomRead: 1})
	names(t, r.Of(PhantomRead)[0], rd)
}

func TestOffsetOrderAndPorcupine(t *testing.T) {
	// Acknowledged at offset 5, then a later send gets offset 2: the log went
	// back (what a broker that lost its log and restarted does).
	b := &hist{}
	w1 := b.send("p", p0, "a", 5, OK)
	w2 := b.send("q", p0, "b", 2, OK)
	b.poll("c", true, rec(p0, 2, "b"))
	b.poll("d", true, rec(p0, 5, "a"))
	r := check(t, b, false)
	expect(t, r, map[AnomalyType]int{OffsetOrder: 1})
	names(t, r.Of(OffsetOrder)[0], w1, w2)
	if v, pv := r.Stats.Linearizability[p0.String()], r.Stats.Porcupine[p0.String()]; v != "Illegal" || pv != "Illegal" {
		t.Fatalf("exact check said %s, porcupine %s", v, pv)
	}

	// Only the whole search sees this one: a (still in flight) reached
	// offset 3 before the poll ended, the poll ended before b began, yet b
	// got offset 1.
	b = &hist{}
	b.add(Op{Process: "p", Kind: KindSend, Status: OK, Start: 0, End: 100, Sends: []Send{{TP: p0, Value: "a", Offset: 3}}})
	b.add(Op{Process: "c", Kind: KindPoll, Start: 10, End: 20, ReadCommitted: true, Reads: []Record{rec(p0, 3, "a")}})
	b.add(Op{Process: "q", Kind: KindSend, Status: OK, Start: 30, End: 40, Sends: []Send{{TP: p0, Value: "b", Offset: 1}}})
	b.add(Op{Process: "d", Kind: KindPoll, Start: 200, End: 210, ReadCommitted: true, Reads: []Record{rec(p0, 1, "b"), rec(p0, 3, "a")}})
	r = check(t, b, true)
	expect(t, r, map[AnomalyType]int{NonLinearizable: 1})
	if v := r.Stats.Porcupine[p0.String()]; v != "Illegal" {
		t.Fatalf("porcupine said %s", v)
	}

	// And the same with b concurrent to the poll is fine.
	b.h.Ops[2].Start = 15
	expect(t, check(t, b, true), nil)
}

func TestJSONLRoundTripAndReport(t *testing.T) {
	b := &hist{}
	b.send("p", p0, "a", 0, OK)
	b.send("p", p0, "b", 1, OK)
	b.add(Op{Process: "n", Kind: KindNemesis, Note: "kill broker 1"})
	b.poll("c", true, rec(p0, 1, "b"))
	var buf bytes.Buffer
	if err := b.h.WriteJSONL(&buf); err != nil {
		t.Fatal(err)
	}
	h, err := ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	r := Check(h, Options{Drained: true})
	expect(t, r, map[AnomalyType]int{LostWrite: 1})
	r.Note("workload", "hand-built")
	var rep bytes.Buffer
	if err := r.WriteReport(&rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"INVALID: 1 anomalies", "lost-write", "#0 p send ok", "kill broker 1", "workload: hand-built"} {
		if !strings.Contains(rep.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, rep.String())
		}
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil || !strings.Contains(js.String(), `"lost-write"`) {
		t.Fatalf("json %v %s", err, js.String())
	}
}
