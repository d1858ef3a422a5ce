package checker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// TP names one partition of one topic.
type TP struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp TP) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Kind is what an operation did.
type Kind string

const (
	// KindSend is a non-transactional produce of one or more records.
	KindSend Kind = "send"
	// KindPoll is one poll of a consumer session: the records it returned.
	KindPoll Kind = "poll"
	// KindTxn is one producer transaction: its sends, and for a
	// consume-transform-produce transaction the records it consumed (Reads)
	// and the offsets it committed (OffsetCommits).
	KindTxn Kind = "txn"
	// KindAssign replaces a consumer session's whole assignment with
	// Positions (Kafka's assign(), or the first poll position of a
	// session).
	KindAssign Kind = "assign"
	// KindSeek moves the listed partitions of a session to Positions; the
	// others keep their position.
	KindSeek Kind = "seek"
	// KindRebalance records a group rebalance of a session: every partition
	// in Partitions was assigned, revoked or lost, so where the session reads
	// it next is the group's committed offset, unknown to the checker.
	KindRebalance Kind = "rebalance"
	// KindNemesis records a fault being injected or healed. The analyses
	// ignore it; reports list it as a timeline.
	KindNemesis Kind = "nemesis"
)

// Status is how an operation ended, as the client saw it.
type Status string

const (
	// OK: the operation definitely took effect (a send was acknowledged, a
	// transaction's commit returned success).
	OK Status = "ok"
	// Fail: the operation definitely did not take effect (a transaction
	// whose abort succeeded, a send refused before it could be written).
	Fail Status = "fail"
	// Unknown: it may or may not have taken effect (timeouts, connections
	// lost mid-request, a commit whose answer never came).
	Unknown Status = "unknown"
)

// NoOffset marks an offset the client does not know.
const NoOffset int64 = -1

// Send is one record a producer sent. Values are unique across a history:
// the checker identifies records by value.
type Send struct {
	TP     TP     `json:"tp"`
	Value  string `json:"value"`
	Offset int64  `json:"offset"` // NoOffset unless acknowledged with an offset
}

// Record is one record a consumer saw.
type Record struct {
	TP     TP     `json:"tp"`
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
}

// Position is where a session reads a partition next (KindAssign,
// KindSeek), or an offset a transaction committed for its group.
type Position struct {
	TP     TP    `json:"tp"`
	Offset int64 `json:"offset"` // NoOffset: not known to the client
}

// Op is one completed client operation. Times are nanoseconds since the
// history began, on a monotonic clock: [Start, End] contains the moment the
// operation took effect, if it did.
type Op struct {
	Index   int    `json:"index"`   // position in the history, set by Recorder.Add
	Process string `json:"process"` // producer or consumer session: its operations are sequential in Index order
	Kind    Kind   `json:"kind"`
	Status  Status `json:"status"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`

	// Idempotent marks sends from an idempotent (or transactional)
	// producer: a record stored twice is then an anomaly.
	Idempotent bool `json:"idempotent,omitempty"`
	// ReadCommitted marks reads made at isolation level READ_COMMITTED.
	ReadCommitted bool `json:"read_committed,omitempty"`

	Sends []Send   `json:"sends,omitempty"`
	Reads []Record `json:"reads,omitempty"` // in the order the client received them

	Positions  []Position `json:"positions,omitempty"`  // KindAssign, KindSeek
	Partitions []TP       `json:"partitions,omitempty"` // KindRebalance

	// Transactions.
	Group         string     `json:"group,omitempty"`          // the consumer group of OffsetCommits / Reads
	OffsetCommits []Position `json:"offset_commits,omitempty"` // offsets committed in the transaction
	Commit        bool       `json:"commit,omitempty"`         // EndTxn was asked to commit (false: abort, or never ended)
	EndStart      int64      `json:"end_start,omitempty"`      // when EndTxn was invoked (0: never)

	Error string `json:"error,omitempty"`
	Note  string `json:"note,omitempty"` // free text (nemesis: what was done)
}

func (o *Op) String() string {
	s := fmt.Sprintf("#%d %s %s %s [%s..%s]", o.Index, o.Process, o.Kind, o.Status,
		time.Duration(o.Start).Round(time.Millisecond), time.Duration(o.End).Round(time.Millisecond))
	if o.Error != "" {
		s += " err=" + o.Error
	}
	if o.Note != "" {
		s += " " + o.Note
	}
	return s
}

// History is every operation of a run, in completion order.
type History struct {
	Ops []Op `json:"ops"`
}

// Op returns operation i.
func (h *History) Op(i int) *Op { return &h.Ops[i] }

// WriteJSONL writes one operation per line.
func (h *History) WriteJSONL(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range h.Ops {
		if err := enc.Encode(&h.Ops[i]); err != nil {
			return fmt.Errorf("encode op %d: %w", i, err)
		}
	}
	return bw.Flush()
}

// ReadJSONL reads a history written by WriteJSONL.
func ReadJSONL(r io.Reader) (*History, error) {
	h := &History{}
	dec := json.NewDecoder(r)
	for {
		var op Op
		if err := dec.Decode(&op); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode op %d: %w", len(h.Ops), err)
		}
		h.Ops = append(h.Ops, op)
	}
	return h, h.Validate()
}

// Validate checks that indexes match positions and statuses and kinds are
// known: the analyses rely on both.
func (h *History) Validate() error {
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Index != i {
			return fmt.Errorf("op at position %d has index %d", i, op.Index)
		}
		switch op.Kind {
		case KindSend, KindPoll, KindTxn, KindAssign, KindSeek, KindRebalance, KindNemesis:
		default:
			return fmt.Errorf("op %d: unknown kind %q", i, op.Kind)
		}
		switch op.Status {
		case OK, Fail, Unknown:
		default:
			return fmt.Errorf("op %d: unknown status %q", i, op.Status)
		}
		if op.End < op.Start {
			return fmt.Errorf("op %d ends (%d) before it starts (%d)", i, op.End, op.Start)
		}
	}
	return nil
}

// Recorder collects operations from concurrent clients. The zero value is
// not usable: call NewRecorder.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewRecorder starts a history whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the history's clock: nanoseconds since NewRecorder, monotonic.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Add appends a completed operation, sets its Index and returns it.
func (r *Recorder) Add(op Op) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = len(r.ops)
	r.ops = append(r.ops, op)
	return op.Index
}

// Len is the number of operations recorded so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// History returns a copy of what was recorded so far.
func (r *Recorder) History() *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &History{Ops: append([]Op(nil), r.ops...)}
}

// sortedTPs returns the keys of m in topic, partition order.
func sortedTPs[V any](m map[TP]V) []TP {
	out := make([]TP, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
