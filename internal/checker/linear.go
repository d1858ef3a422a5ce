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
	offset int64 // append: the lowest offset it got; read: the highest offset the poll returned
	last   int64 // append: the highest offset it got (one operation's records to one partition are appended together)
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
			return true, in.last + 1
		}
		return in.offset < end, end
	},
	Equal: func(a, b interface{}) bool { return a.(int64) == b.(int64) },
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(logInput)
		if in.append {
			if in.last != in.offset {
				return fmt.Sprintf("op %d append -> %d..%d", in.op, in.offset, in.last)
			}
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
	type opTP struct {
		op int
		tp TP
	}
	merged := map[opTP]int{} // index in out[tp] of an operation's append
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
				// One operation's records to one partition are one append
				// of the range they took: they went in together, and
				// modelling them as concurrent appends only makes the
				// search exponential.
				k := opTP{i, s.TP}
				if j, ok := merged[k]; ok {
					in := out[s.TP][j].Input.(logInput)
					in.offset, in.last = min(in.offset, offset), max(in.last, offset)
					if ret < out[s.TP][j].Return {
						out[s.TP][j].Return = ret
					}
					out[s.TP][j].Input = in
					continue
				}
				merged[k] = len(out[s.TP])
				out[s.TP] = append(out[s.TP], porcupine.Operation{
					ClientId: i, Call: op.Start, Return: ret,
					Input: logInput{append: true, offset: offset, last: offset, op: i},
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

// linearizability checks each partition three ways: the pairwise
// offset-order check (which names the two operations), an exact greedy
// decision of the model (PartitionLogModel), and porcupine on the same
// operations. The greedy verdict decides; porcupine, whose search is
// exponential when many appends overlap (a broker that stalls and then
// answers every waiting producer at once), cross-checks it within its
// budget, and a disagreement is reported.
func (a *analysis) linearizability(timeout time.Duration) {
	ops := a.logOperations()
	for _, tp := range sortedTPs(ops) {
		found := a.offsetOrder(tp, ops[tp])
		ok, named := greedyLinearizable(ops[tp])
		verdict := string(porcupine.Ok)
		if !ok {
			verdict = string(porcupine.Illegal)
		}
		a.res.Stats.Linearizability[tp.String()] = verdict
		if !ok && !found {
			a.res.add(Anomaly{Type: NonLinearizable, TP: tp, Offset: NoOffset, Ops: named,
				Detail: "the partition's appends and polls have no real-time order consistent with one log"})
		}
		if timeout < 0 {
			a.res.Stats.Porcupine[tp.String()] = "skipped"
			continue
		}
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		res := porcupine.CheckOperationsTimeout(PartitionLogModel, ops[tp], timeout)
		a.res.Stats.Porcupine[tp.String()] = string(res)
		if res != porcupine.Unknown && string(res) != verdict {
			a.res.Stats.Porcupine[tp.String()] = fmt.Sprintf("%s, DISAGREES with the exact check (%s): a checker bug", res, verdict)
		}
	}
}

// greedyLinearizable decides PartitionLogModel exactly. In any valid
// linearization the appends take effect in offset order; letting each take
// effect as early as its call and its predecessor allow never hurts (polls
// only need the end to be high enough early enough), so the history is
// linearizable iff that schedule meets every append's return and, for every
// poll, the first append reaching its offset took effect by the poll's
// return. On failure it names the operations involved.
func greedyLinearizable(ops []porcupine.Operation) (bool, []int) {
	var apps []porcupine.Operation
	for _, o := range ops {
		if o.Input.(logInput).append {
			apps = append(apps, o)
		}
	}
	sort.Slice(apps, func(i, j int) bool { return apps[i].Input.(logInput).offset < apps[j].Input.(logInput).offset })
	at := make([]int64, len(apps))
	t := int64(math.MinInt64)
	for i, o := range apps {
		if o.Call > t {
			t = o.Call
		}
		if t > o.Return {
			if i == 0 { // returned before it was called: only itself to name
				return false, []int{o.Input.(logInput).op}
			}
			return false, []int{apps[i-1].Input.(logInput).op, o.Input.(logInput).op}
		}
		at[i] = t
	}
	for _, r := range ops {
		in := r.Input.(logInput)
		if in.append {
			continue
		}
		i := sort.Search(len(apps), func(i int) bool { return apps[i].Input.(logInput).last >= in.offset })
		if i == len(apps) {
			return false, []int{in.op}
		}
		if at[i] > r.Return {
			return false, []int{apps[i].Input.(logInput).op, in.op}
		}
	}
	return true, nil
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
		if i > 0 && byReturn[prefixMax[i-1]].Input.(logInput).last > byReturn[i].Input.(logInput).last {
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
		if bin.offset <= pin.last {
			found = true
			a.res.add(Anomaly{Type: OffsetOrder, TP: tp, Offset: bin.offset, Ops: []int{pin.op, bin.op},
				Detail: fmt.Sprintf("op %d was acknowledged with offset %d before op %d began, which got offset %d",
					pin.op, pin.last, bin.op, bin.offset)})
		}
	}
	// A poll returning offset m must not end before the first append at or
	// past m began.
	byCall := append([]porcupine.Operation(nil), appends...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
	maxByCall := make([]int64, len(byCall)) // highest offset among byCall[:i+1]
	for i, w := range byCall {
		maxByCall[i] = w.Input.(logInput).last
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
