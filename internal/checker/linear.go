package checker

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The claim checked for linearizability: each partition is one log whose
// offsets grow in real time. An append (a send that took effect) that
// started after another append to the same partition was acknowledged gets a
// higher offset; a poll never returns an offset that no append had reached
// by the time the poll returned. The model's state is the partition's end
// offset (one past the highest offset appended), so porcupine's search stays
// small even with many concurrent clients.

// logInput is one operation of the partition-log model.
type logInput struct {
	append bool
	offset int64 // append: the offset it got; read: the highest offset the poll returned
	op     int   // index into the history (for reports)
}

// PartitionLogModel is the porcupine model of one partition's offsets.
// Inputs are produced by LogOperations.
var PartitionLogModel = porcupine.Model{
	Init: func() interface{} { return int64(0) },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		end := state.(int64)
		in := input.(logInput)
		if in.append {
			if in.offset < end {
				return false, end
			}
			return true, in.offset + 1
		}
		return in.offset < end, end
	},
	Equal: func(a, b interface{}) bool { return a.(int64) == b.(int64) },
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(logInput)
		if in.append {
			return fmt.Sprintf("op %d append -> %d", in.op, in.offset)
		}
		return fmt.Sprintf("op %d poll up to %d", in.op, in.offset)
	},
	DescribeState: func(state interface{}) string { return fmt.Sprintf("end=%d", state.(int64)) },
}

// LogOperations turns the history into porcupine operations per partition:
// appends are sends that took effect with a known offset (an acknowledged
// send, or one of unknown fate whose record was read: then it returned by
// the time the first read of it did); reads are polls, by the highest offset they returned of a
// record some append wrote.
func (a *analysis) logOperations() map[TP][]porcupine.Operation {
	out := map[TP][]porcupine.Operation{}
	// appendAt[value] is the offset of the value's append in the model. Each
	// offset has one append: a second value at an offset is an
	// inconsistent offset, and a value at a second offset a duplicate, both
	// reported by their own analyses; the model judges only the order.
	appendAt := map[string]Record{}
	taken := map[TP]map[int64]bool{}
	for _, pass := range []Status{OK, Unknown} {
		for i := range a.h.Ops {
			op := a.op(i)
			if op.Status != pass {
				continue
			}
			for j, s := range op.Sends {
				if !a.mustHaveCommitted(op, j) {
					continue
				}
				offset := s.Offset
				if offset < 0 {
					if offs := a.offsetsOf[s.Value]; len(offs) == 1 {
						offset = firstOffset(offs)
					}
				}
				if offset < 0 || taken[s.TP][offset] {
					continue
				}
				if taken[s.TP] == nil {
					taken[s.TP] = map[int64]bool{}
				}
				taken[s.TP][offset] = true
				ret := op.End
				if op.Status != OK {
					// Unknown fate, but read: it took effect before the
					// first read of it returned.
					ret = math.MaxInt64
					for _, r := range a.readersOf[s.Value] {
						if e := a.op(r.op).End; e < ret {
							ret = e
						}
					}
				}
				appendAt[s.Value] = Record{TP: s.TP, Offset: offset}
				out[s.TP] = append(out[s.TP], porcupine.Operation{
					ClientId: i, Call: op.Start, Return: ret,
					Input: logInput{append: true, offset: offset, op: i},
				})
			}
		}
	}
	for i := range a.h.Ops {
		op := a.op(i)
		maxOff := map[TP]int64{}
		for _, r := range op.Reads {
			if at, ok := appendAt[r.Value]; !ok || at.TP != r.TP || at.Offset != r.Offset {
				continue
			}
			if m, ok := maxOff[r.TP]; !ok || r.Offset > m {
				maxOff[r.TP] = r.Offset
			}
		}
		for tp, m := range maxOff {
			out[tp] = append(out[tp], porcupine.Operation{
				ClientId: i, Call: op.Start, Return: op.End,
				Input: logInput{offset: m, op: i},
			})
		}
	}
	return out
}

// linearizability runs the pairwise offset-order check (which names the two
// operations) and porcupine per partition.
func (a *analysis) linearizability(timeout time.Duration) {
	ops := a.logOperations()
	for _, tp := range sortedTPs(ops) {
		found := a.offsetOrder(tp, ops[tp])
		if timeout < 0 {
			a.res.Stats.Linearizability[tp.String()] = "skipped"
			continue
		}
		if timeout == 0 {
			timeout = 30 * time.Second
		}
		res, info := porcupine.CheckOperationsVerbose(PartitionLogModel, ops[tp], timeout)
		a.res.Stats.Linearizability[tp.String()] = string(res)
		if res == porcupine.Illegal && !found {
			// Name the operations of the longest partial linearization's
			// frontier: where the search got stuck.
			var named []int
			for _, part := range info.PartialLinearizationsOperations() {
				for _, lin := range part {
					if len(lin) > 0 {
						named = append(named, lin[len(lin)-1].Input.(logInput).op)
					}
				}
			}
			a.res.add(Anomaly{Type: NonLinearizable, TP: tp, Offset: NoOffset, Ops: dedupe(named),
				Detail: "porcupine: the partition's appends and polls have no real-time order consistent with one log"})
		}
	}
}

// offsetOrder reports pairs that break the model directly: an append that
// got an offset at or below one acknowledged before it began, and a poll that
// returned an offset before any append of it began. It reports whether it
// found any.
func (a *analysis) offsetOrder(tp TP, ops []porcupine.Operation) bool {
	var appends []porcupine.Operation
	for _, o := range ops {
		if o.Input.(logInput).append {
			appends = append(appends, o)
		}
	}
	byReturn := append([]porcupine.Operation(nil), appends...)
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].Return < byReturn[j].Return })
	// prefixMax[i]: the append with the highest offset among byReturn[:i+1].
	prefixMax := make([]int, len(byReturn))
	for i := range byReturn {
		prefixMax[i] = i
		if i > 0 && byReturn[prefixMax[i-1]].Input.(logInput).offset > byReturn[i].Input.(logInput).offset {
			prefixMax[i] = prefixMax[i-1]
		}
	}
	found := false
	for _, b := range appends {
		n := sort.Search(len(byReturn), func(i int) bool { return byReturn[i].Return >= b.Call })
		if n == 0 {
			continue
		}
		prev := byReturn[prefixMax[n-1]]
		pin, bin := prev.Input.(logInput), b.Input.(logInput)
		if bin.offset <= pin.offset {
			found = true
			a.res.add(Anomaly{Type: OffsetOrder, TP: tp, Offset: bin.offset, Ops: []int{pin.op, bin.op},
				Detail: fmt.Sprintf("op %d was acknowledged with offset %d before op %d began, which got offset %d",
					pin.op, pin.offset, bin.op, bin.offset)})
		}
	}
	// A poll returning offset m must not end before the first append at or
	// past m began.
	byCall := append([]porcupine.Operation(nil), appends...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
	maxByCall := make([]int64, len(byCall)) // highest offset among byCall[:i+1]
	for i, w := range byCall {
		maxByCall[i] = w.Input.(logInput).offset
		if i > 0 && maxByCall[i-1] > maxByCall[i] {
			maxByCall[i] = maxByCall[i-1]
		}
	}
	for _, r := range ops {
		rin := r.Input.(logInput)
		if rin.append {
			continue
		}
		n := sort.Search(len(byCall), func(i int) bool { return byCall[i].Call > r.Return })
		if n == 0 || maxByCall[n-1] < rin.offset {
			found = true
			a.res.add(Anomaly{Type: OffsetOrder, TP: tp, Offset: rin.offset, Ops: []int{rin.op},
				Detail: fmt.Sprintf("op %d returned offset %d before any send that reached that offset began", rin.op, rin.offset)})
		}
	}
	return found
}
