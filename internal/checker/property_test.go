package checker

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"
)

// simLog is a correct partition for the generator: every entry at its
// offset, control markers taking offsets of their own.
type simEntry struct {
	offset    int64
	value     string
	txn       bool
	committed bool // for transactional entries: their transaction committed
}

type simPart struct {
	entries []simEntry
	next    int64
}

// genHistory simulates a correct Kafka-like system (idempotent and plain
// producers, transactions that commit, abort or end in doubt, consumer
// sessions at both isolation levels that seek and rebalance) and returns its
// history, ending with a full drain. Operations take effect one at a time,
// 10 ns apart; each one's interval straddles its effect so that intervals
// overlap as in a real run.
func genHistory(t *rapid.T) *History {
	nParts := rapid.IntRange(1, 3).Draw(t, "partitions")
	parts := make([]*simPart, nParts)
	for i := range parts {
		parts[i] = &simPart{}
	}
	tp := func(i int) TP { return TP{"t", int32(i)} }
	rec := NewRecorder()
	var ops []Op
	clock := int64(100)
	span := func(label string) (int64, int64, int64) {
		clock += 20
		return clock - int64(rapid.IntRange(0, 9).Draw(t, label+"-pre")), clock, clock + int64(rapid.IntRange(0, 9).Draw(t, label+"-post"))
	}
	add := func(op Op) {
		op.Index = len(ops)
		ops = append(ops, op)
	}
	values := 0
	newValue := func() string { values++; return fmt.Sprintf("v%d", values) }

	type session struct {
		name string
		rc   bool
		pos  map[int]int64
	}
	var sessions []*session
	newSession := func(rc bool) *session {
		s := &session{name: fmt.Sprintf("c%d", len(sessions)), rc: rc, pos: map[int]int64{}}
		sessions = append(sessions, s)
		var positions []Position
		for i := range parts {
			s.pos[i] = 0
			positions = append(positions, Position{TP: tp(i), Offset: 0})
		}
		start, _, end := span("assign")
		add(Op{Process: s.name, Kind: KindAssign, Status: OK, Start: start, End: end, Positions: positions})
		return s
	}
	// readFrom returns up to n records a reader at pos sees, and the new
	// position.
	readFrom := func(p *simPart, pos int64, rc bool, n int) ([]simEntry, int64) {
		if n == 0 {
			return nil, pos
		}
		var out []simEntry
		for _, e := range p.entries {
			if e.offset < pos || len(out) == n {
				continue
			}
			if rc && e.txn && !e.committed {
				continue
			}
			out = append(out, e)
		}
		if len(out) == n && n > 0 {
			return out, out[len(out)-1].offset + 1
		}
		return out, p.next // read to the end (markers and aborted skipped)
	}

	steps := rapid.IntRange(1, 60).Draw(t, "steps")
	for i := 0; i < steps; i++ {
		switch rapid.IntRange(0, 5).Draw(t, "action") {
		case 0, 1: // send
			pi := rapid.IntRange(0, nParts-1).Draw(t, "part")
			p := parts[pi]
			proc := fmt.Sprintf("p%d", rapid.IntRange(0, 2).Draw(t, "producer"))
			v := newValue()
			start, _, end := span("send")
			op := Op{Process: proc, Kind: KindSend, Start: start, End: end, Idempotent: proc != "p2"}
			switch rapid.IntRange(0, 5).Draw(t, "fate") {
			case 0: // failed before writing
				op.Status = Fail
				op.Sends = []Send{{TP: tp(pi), Value: v, Offset: NoOffset}}
			case 1: // unknown, not written
				op.Status = Unknown
				op.Sends = []Send{{TP: tp(pi), Value: v, Offset: NoOffset}}
			case 2: // unknown, written
				p.entries = append(p.entries, simEntry{offset: p.next, value: v})
				p.next++
				op.Status = Unknown
				op.Sends = []Send{{TP: tp(pi), Value: v, Offset: NoOffset}}
			default:
				p.entries = append(p.entries, simEntry{offset: p.next, value: v})
				op.Status = OK
				op.Sends = []Send{{TP: tp(pi), Value: v, Offset: p.next}}
				p.next++
			}
			add(op)
		case 2: // transaction
			start, eff, end := span("txn")
			op := Op{Process: fmt.Sprintf("tx%d", rapid.IntRange(0, 1).Draw(t, "txproducer")), Kind: KindTxn,
				Start: start, End: end, EndStart: eff, Idempotent: true}
			fate := rapid.IntRange(0, 3).Draw(t, "txfate") // 0 commit ok, 1 abort ok, 2 unknown committed, 3 unknown aborted
			committed := fate == 0 || fate == 2
			touched := map[int]bool{}
			n := rapid.IntRange(1, 3).Draw(t, "txsends")
			var pending []*simEntry
			for j := 0; j < n; j++ {
				pi := rapid.IntRange(0, nParts-1).Draw(t, "txpart")
				p := parts[pi]
				v := newValue()
				p.entries = append(p.entries, simEntry{offset: p.next, value: v, txn: true, committed: committed})
				pending = append(pending, &p.entries[len(p.entries)-1])
				op.Sends = append(op.Sends, Send{TP: tp(pi), Value: v, Offset: p.next})
				p.next++
				touched[pi] = true
			}
			for pi := range touched {
				parts[pi].next++ // the commit or abort marker
			}
			switch fate {
			case 0:
				op.Status, op.Commit = OK, true
			case 1:
				op.Status = Fail
			case 2:
				op.Status, op.Commit = Unknown, true
			case 3:
				op.Status, op.Commit = Unknown, rapid.Bool().Draw(t, "askedcommit")
			}
			add(op)
		case 3: // poll
			if len(sessions) == 0 || rapid.IntRange(0, 4).Draw(t, "newsession") == 0 {
				newSession(rapid.Bool().Draw(t, "rc"))
				continue
			}
			s := sessions[rapid.IntRange(0, len(sessions)-1).Draw(t, "session")]
			start, _, end := span("poll")
			op := Op{Process: s.name, Kind: KindPoll, Status: OK, Start: start, End: end, ReadCommitted: s.rc}
			for pi, p := range parts {
				got, next := readFrom(p, s.pos[pi], s.rc, rapid.IntRange(0, 4).Draw(t, "max"))
				for _, e := range got {
					op.Reads = append(op.Reads, Record{TP: tp(pi), Offset: e.offset, Value: e.value})
				}
				s.pos[pi] = next
			}
			add(op)
		case 4: // seek
			if len(sessions) == 0 {
				continue
			}
			s := sessions[rapid.IntRange(0, len(sessions)-1).Draw(t, "session")]
			pi := rapid.IntRange(0, nParts-1).Draw(t, "seekpart")
			to := rapid.Int64Range(0, parts[pi].next).Draw(t, "to")
			start, _, end := span("seek")
			s.pos[pi] = to
			add(Op{Process: s.name, Kind: KindSeek, Status: OK, Start: start, End: end, Positions: []Position{{TP: tp(pi), Offset: to}}})
		case 5: // rebalance: the group's committed offset is anywhere
			if len(sessions) == 0 {
				continue
			}
			s := sessions[rapid.IntRange(0, len(sessions)-1).Draw(t, "session")]
			pi := rapid.IntRange(0, nParts-1).Draw(t, "rebpart")
			s.pos[pi] = rapid.Int64Range(0, parts[pi].next).Draw(t, "committed")
			start, _, end := span("rebalance")
			add(Op{Process: s.name, Kind: KindRebalance, Status: OK, Start: start, End: end, Partitions: []TP{tp(pi)}})
		}
	}
	// The drain: one READ_COMMITTED session reads every partition to its end.
	d := newSession(true)
	d.name = "drain"
	ops[len(ops)-1].Process = "drain"
	for pi, p := range parts {
		got, _ := readFrom(p, 0, true, -1)
		start, _, end := span("drain")
		op := Op{Process: "drain", Kind: KindPoll, Status: OK, Start: start, End: end, ReadCommitted: true}
		for _, e := range got {
			op.Reads = append(op.Reads, Record{TP: tp(pi), Offset: e.offset, Value: e.value})
		}
		add(op)
	}
	for _, op := range ops {
		rec.Add(op)
	}
	return rec.History()
}

// TestValidHistoriesNeverFire: no history of a correct system is flagged.
func TestValidHistoriesNeverFire(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHistory(t)
		if err := h.Validate(); err != nil {
			t.Fatal(err)
		}
		r := Check(h, Options{Drained: true, LinearizabilityTimeout: 0})
		if !r.Valid() {
			var buf bytes.Buffer
			_ = r.WriteReport(&buf)
			_ = h.WriteJSONL(&buf)
			t.Fatalf("valid history flagged:\n%s", buf.String())
		}
		for tp, v := range r.Stats.Linearizability {
			if v != "Ok" {
				t.Fatalf("%s: porcupine %s", tp, v)
			}
		}
	})
}

// TestLosingAnAcknowledgedRecordFires: remove every read of one acknowledged
// record from a valid history (as a broker that lost it would) and the
// checker reports it, as lost or unseen.
func TestLosingAnAcknowledgedRecordFires(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHistory(t)
		var acked []string
		for i := range h.Ops {
			op := &h.Ops[i]
			if op.Status == OK && (op.Kind == KindSend || (op.Kind == KindTxn && op.Commit)) {
				for _, s := range op.Sends {
					acked = append(acked, s.Value)
				}
			}
		}
		if len(acked) == 0 {
			t.Skip("no acknowledged record")
		}
		victim := rapid.SampledFrom(acked).Draw(t, "victim")
		for i := range h.Ops {
			op := &h.Ops[i]
			kept := op.Reads[:0]
			for _, r := range op.Reads {
				if r.Value != victim {
					kept = append(kept, r)
				}
			}
			op.Reads = kept
		}
		r := Check(h, Options{Drained: true, LinearizabilityTimeout: -1})
		found := false
		for _, a := range append(r.Of(LostWrite), r.Of(UnseenWrite)...) {
			if a.Values[0] == victim {
				found = true
			}
		}
		if !found {
			var buf bytes.Buffer
			_ = r.WriteReport(&buf)
			t.Fatalf("losing %s went unreported:\n%s", victim, buf.String())
		}
	})
}

// TestRewritingAnOffsetFires: give one read record another value already
// stored elsewhere and the checker reports it: an inconsistent offset when
// the offset's own value is known elsewhere, otherwise a duplicate (the moved
// value now at two offsets), a phantom (a value read in a partition it was
// not sent to) or a broken session order.
func TestRewritingAnOffsetFires(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHistory(t)
		type loc struct{ op, rec int }
		var reads []loc
		for i := range h.Ops {
			for j := range h.Ops[i].Reads {
				reads = append(reads, loc{i, j})
			}
		}
		if len(reads) < 2 {
			t.Skip("too few reads")
		}
		a := rapid.SampledFrom(reads).Draw(t, "a")
		b := rapid.SampledFrom(reads).Draw(t, "b")
		ra, rb := &h.Ops[a.op].Reads[a.rec], h.Ops[b.op].Reads[b.rec]
		if ra.Value == rb.Value {
			t.Skip("same record")
		}
		for i := range h.Ops {
			for _, s := range h.Ops[i].Sends {
				if s.Value == rb.Value && h.Ops[i].Kind == KindSend && !h.Ops[i].Idempotent {
					t.Skip("a plain producer may store a record twice")
				}
			}
		}
		ra.Value = rb.Value
		r := Check(h, Options{Drained: true, LinearizabilityTimeout: -1})
		if r.Valid() {
			var buf bytes.Buffer
			_ = r.WriteReport(&buf)
			t.Fatalf("rewritten offset went unreported:\n%s", buf.String())
		}
	})
}

// TestGreedyAgreesWithPorcupine: on small random partition histories, valid
// or not, the exact greedy decision and porcupine's search agree.
func TestGreedyAgreesWithPorcupine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "ops")
		offsets := rapid.Permutation([]int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}).Draw(t, "offsets")
		var ops []porcupine.Operation
		for i := 0; i < n; i++ {
			call := rapid.Int64Range(0, 50).Draw(t, "call")
			ret := call + rapid.Int64Range(0, 20).Draw(t, "len")
			in := logInput{op: i}
			if rapid.Bool().Draw(t, "append") {
				in.append, in.offset = true, offsets[i]
				in.last = in.offset
			} else {
				in.offset = rapid.Int64Range(0, 9).Draw(t, "read")
			}
			ops = append(ops, porcupine.Operation{ClientId: i, Call: call, Return: ret, Input: in})
		}
		greedy, _ := greedyLinearizable(ops)
		if pc := porcupine.CheckOperations(PartitionLogModel, ops); pc != greedy {
			t.Fatalf("greedy %v, porcupine %v on %+v", greedy, pc, ops)
		}
	})
}
