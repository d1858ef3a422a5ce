package checker

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Metadata operations (topic administration) and their linearizability.
//
// The claim: topic administration is linearizable per topic name. Each
// answer a client gets from CreateTopics, DeleteTopics, CreatePartitions
// and IncrementalAlterConfigs is consistent with one order of all the
// operations on that name that respects real time, and with a final read
// made after the cluster healed and every broker converged. Reads served
// from a broker's cached view during the faults (Metadata,
// DescribeConfigs) are not part of the claim: brokers serve a cached view,
// as Kafka's do, and such a read is only as of some earlier revision. The
// answers of the writes themselves are the observations: "already exists",
// "unknown topic", "invalid partitions" each reveal the state the
// operation was decided on.
//
// The model per name: absent, present (with its partition count and the
// value of one topic config, written by alters), or deleting (DeleteTopics
// marks the topic; the controller removes it later: a deleting topic may
// turn absent at any moment, which the model expresses by letting every
// step see a deleting topic as either still deleting or already absent).

// ACL administration is checked the same way, per resource: the ACL
// bindings of one literal topic resource (principal, host *, READ, ALLOW)
// form a set; CreateAcls adds a binding (an existing one counts once, as
// in Kafka's AclControlManager); DeleteAcls with a filter (one principal,
// or any) removes what it matches and lists it, so its answer reveals the
// set it was decided on; DescribeAcls made after convergence is the final
// read. DescribeAcls during the faults is served from a broker's cached
// view (as Kafka's brokers serve it from their metadata image) and is not
// part of the claim.

// MetaKind is a topic administration operation.
type MetaKind string

const (
	MetaCreate           MetaKind = "create"            // CreateTopics (Partitions, Value as the config)
	MetaDelete           MetaKind = "delete"            // DeleteTopics
	MetaAlter            MetaKind = "alter"             // IncrementalAlterConfigs SET of the config to Value
	MetaCreatePartitions MetaKind = "create-partitions" // CreatePartitions to Partitions
	MetaRead             MetaKind = "read"              // a read after convergence: Exists, Partitions, Value

	MetaCreateACL MetaKind = "create-acl" // CreateAcls of Principal's binding on the resource Topic
	MetaDeleteACL MetaKind = "delete-acl" // DeleteAcls of Principal's binding (any principal's when empty); Matched: what it listed
	MetaReadACL   MetaKind = "read-acl"   // DescribeAcls of the resource after convergence: Matched
)

// isACL reports whether k is an ACL operation (judged by ACLModel).
func (k MetaKind) isACL() bool { return k == MetaCreateACL || k == MetaDeleteACL || k == MetaReadACL }

// MetaOutcome is what the client was told.
type MetaOutcome string

const (
	MetaOK                MetaOutcome = "ok"
	MetaExists            MetaOutcome = "exists"             // TOPIC_ALREADY_EXISTS
	MetaUnknownTopic      MetaOutcome = "unknown-topic"      // UNKNOWN_TOPIC_OR_PARTITION
	MetaInvalidPartitions MetaOutcome = "invalid-partitions" // INVALID_PARTITIONS: the count is not above the current one
	MetaRefused           MetaOutcome = "refused"            // another definite refusal, decided without effect (e.g. INVALID_REPLICATION_FACTOR)
	MetaIndeterminate     MetaOutcome = "indeterminate"      // timeout, lost connection, retriable error: may or may not have taken effect
)

// MetaOp is one topic or ACL administration operation as a client saw it.
type MetaOp struct {
	Client     int      `json:"client"`
	Broker     int32    `json:"broker"` // the broker it was sent to
	Kind       MetaKind `json:"kind"`
	Topic      string   `json:"topic"`
	Partitions int32    `json:"partitions,omitempty"`
	Value      string   `json:"value,omitempty"`
	Exists     bool     `json:"exists,omitempty"` // read: whether the topic existed
	// Principal is the binding an ACL operation creates or deletes ("":
	// a deletion of any principal's); Matched the principals whose
	// bindings a deletion listed or a final ACL read found.
	Principal string      `json:"principal,omitempty"`
	Matched   []string    `json:"matched,omitempty"`
	Outcome   MetaOutcome `json:"outcome"`
	Error     string      `json:"error,omitempty"`
	Start     int64       `json:"start"` // ns on the history's clock
	End       int64       `json:"end"`
}

func (o MetaOp) String() string {
	s := fmt.Sprintf("client %d via broker %d: %s %s", o.Client, o.Broker, o.Kind, o.Topic)
	switch o.Kind {
	case MetaCreate:
		s += fmt.Sprintf(" (%d partitions, config %s)", o.Partitions, o.Value)
	case MetaAlter:
		s += " config=" + o.Value
	case MetaCreatePartitions:
		s += fmt.Sprintf(" to %d", o.Partitions)
	case MetaCreateACL:
		s += " " + o.Principal
	case MetaDeleteACL:
		if o.Principal == "" {
			s += " any principal"
		} else {
			s += " " + o.Principal
		}
		if o.Outcome == MetaOK {
			return s + fmt.Sprintf(" -> ok, matched %v", o.Matched)
		}
	case MetaReadACL:
		return s + fmt.Sprintf(" -> %v", o.Matched)
	case MetaRead:
		if !o.Exists {
			return s + " -> absent"
		}
		return s + fmt.Sprintf(" -> %d partitions, config %s", o.Partitions, o.Value)
	}
	s += " -> " + string(o.Outcome)
	if o.Error != "" && o.Outcome != MetaOK {
		s += " (" + o.Error + ")"
	}
	return s
}

type metaPhase uint8

const (
	metaAbsent metaPhase = iota
	metaPresent
	metaDeleting
)

// metaState is one topic name's state in the model (comparable).
type metaState struct {
	phase metaPhase
	parts int32
	value string
}

func (s metaState) String() string {
	switch s.phase {
	case metaAbsent:
		return "absent"
	case metaDeleting:
		return "deleting"
	}
	return fmt.Sprintf("present(%d partitions, config %s)", s.parts, s.value)
}

type metaInput struct {
	op MetaOp
	i  int
}

// metaStep is the model's transition: every state the operation may leave,
// none when its answer is impossible from s.
func metaStep(s metaState, op MetaOp) []metaState {
	// A deleting topic may have been removed already.
	if s.phase == metaDeleting {
		return append(metaStep1(s, op), metaStep1(metaState{}, op)...)
	}
	return metaStep1(s, op)
}

func metaStep1(s metaState, op MetaOp) []metaState {
	applied := func() []metaState {
		switch op.Kind {
		case MetaCreate:
			if s.phase == metaAbsent {
				return []metaState{{phase: metaPresent, parts: op.Partitions, value: op.Value}}
			}
		case MetaDelete:
			if s.phase != metaAbsent {
				return []metaState{{phase: metaDeleting}, {}}
			}
		case MetaAlter:
			if s.phase == metaPresent {
				n := s
				n.value = op.Value
				return []metaState{n}
			}
		case MetaCreatePartitions:
			if s.phase == metaPresent && op.Partitions > s.parts {
				n := s
				n.parts = op.Partitions
				return []metaState{n}
			}
		}
		return nil
	}
	switch op.Outcome {
	case MetaIndeterminate:
		return append([]metaState{s}, applied()...)
	case MetaRefused:
		return []metaState{s}
	case MetaOK:
		if op.Kind == MetaRead {
			if op.Exists == (s.phase == metaPresent) && (!op.Exists || (s.parts == op.Partitions && s.value == op.Value)) {
				return []metaState{s}
			}
			return nil
		}
		return applied()
	case MetaExists:
		if op.Kind == MetaCreate && s.phase != metaAbsent {
			return []metaState{s}
		}
	case MetaUnknownTopic:
		if op.Kind != MetaCreate && s.phase != metaPresent {
			return []metaState{s}
		}
	case MetaInvalidPartitions:
		if op.Kind == MetaCreatePartitions && s.phase == metaPresent && op.Partitions <= s.parts {
			return []metaState{s}
		}
	}
	return nil
}

// TopicAdminModel is the porcupine model of one topic name's
// administration (inputs: metaInput).
var TopicAdminModel = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{metaState{}} },
	Step: func(state, input, _ interface{}) []interface{} {
		var out []interface{}
		for _, n := range metaStep(state.(metaState), input.(metaInput).op) {
			out = append(out, n)
		}
		return out
	},
	Equal: func(a, b interface{}) bool { return a.(metaState) == b.(metaState) },
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(metaInput)
		return fmt.Sprintf("op %d %s", in.i, in.op)
	},
	DescribeState: func(state interface{}) string { return state.(metaState).String() },
}

// aclState is one resource's ACL bindings: the principals, sorted and
// joined by commas (comparable).
type aclState string

func aclSet(ps []string) aclState {
	ps = slices.Clone(ps)
	sort.Strings(ps)
	return aclState(strings.Join(slices.Compact(ps), ","))
}

func (s aclState) members() []string {
	if s == "" {
		return nil
	}
	return strings.Split(string(s), ",")
}

// aclStep is ACLModel's transition: every state op may leave, none when
// its answer is impossible from s.
func aclStep(s aclState, op MetaOp) []aclState {
	have := s.members()
	switch op.Kind {
	case MetaCreateACL:
		added := aclSet(append(have, op.Principal))
		switch op.Outcome {
		case MetaOK:
			return []aclState{added}
		case MetaIndeterminate:
			return []aclState{s, added}
		case MetaRefused:
			return []aclState{s}
		}
	case MetaDeleteACL:
		var matched, kept []string
		for _, p := range have {
			if op.Principal == "" || p == op.Principal {
				matched = append(matched, p)
			} else {
				kept = append(kept, p)
			}
		}
		switch op.Outcome {
		case MetaOK:
			if aclSet(op.Matched) == aclSet(matched) {
				return []aclState{aclSet(kept)}
			}
		case MetaIndeterminate:
			// Any part of what it matched may be gone (its bindings
			// are deleted as keys, each on its own).
			var out []aclState
			for mask := 0; mask < 1<<len(matched); mask++ {
				rest := slices.Clone(kept)
				for i, p := range matched {
					if mask&(1<<i) == 0 {
						rest = append(rest, p)
					}
				}
				out = append(out, aclSet(rest))
			}
			return out
		case MetaRefused:
			return []aclState{s}
		}
	case MetaReadACL:
		if op.Outcome == MetaOK && aclSet(op.Matched) == s {
			return []aclState{s}
		}
	}
	return nil
}

// ACLModel is the porcupine model of one resource's ACL bindings (inputs:
// metaInput).
var ACLModel = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{aclState("")} },
	Step: func(state, input, _ interface{}) []interface{} {
		var out []interface{}
		for _, n := range aclStep(state.(aclState), input.(metaInput).op) {
			out = append(out, n)
		}
		return out
	},
	Equal: func(a, b interface{}) bool { return a.(aclState) == b.(aclState) },
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(metaInput)
		return fmt.Sprintf("op %d %s", in.i, in.op)
	},
	DescribeState: func(state interface{}) string { return "acls{" + string(state.(aclState)) + "}" },
}

// MetaResult is the verdict on a metadata history.
type MetaResult struct {
	Ops      int                 `json:"ops"`
	Outcomes map[MetaOutcome]int `json:"outcomes"`
	// Verdict per topic name: "ok", "illegal" (not linearizable) or
	// "unknown" (porcupine ran out of its time budget).
	Verdict map[string]string `json:"verdict"`
	// Illegal lists, per non-linearizable name, the operations of the
	// longest linearizable prefix porcupine found and the ones that could
	// not follow it.
	Illegal map[string][]string `json:"illegal,omitempty"`
}

// Valid reports whether every name was found linearizable.
func (r *MetaResult) Valid() bool {
	for _, v := range r.Verdict {
		if v != "ok" {
			return false
		}
	}
	return true
}

func (r *MetaResult) String() string {
	var b strings.Builder
	names := make([]string, 0, len(r.Verdict))
	for n := range r.Verdict {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "%d metadata operations (topic and ACL administration), outcomes %v\n", r.Ops, r.Outcomes)
	for _, n := range names {
		fmt.Fprintf(&b, "  %s: %s\n", n, r.Verdict[n])
		for _, l := range r.Illegal[n] {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	return b.String()
}

// CheckMetadata checks a history of topic administration operations for
// linearizability per topic name with porcupine (timeout per name; 0: 30
// s). Indeterminate operations never return (their effect may come at any
// time after their call).
func CheckMetadata(ops []MetaOp, timeout time.Duration) *MetaResult {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	res := &MetaResult{Ops: len(ops), Outcomes: map[MetaOutcome]int{}, Verdict: map[string]string{}, Illegal: map[string][]string{}}
	// Topic names and ACL resources are judged apart (an ACL resource's
	// verdict is under "acls:<name>").
	byName := map[string][]porcupine.Operation{}
	for i, op := range ops {
		res.Outcomes[op.Outcome]++
		ret := op.End
		if op.Outcome == MetaIndeterminate {
			ret = math.MaxInt64
		}
		name := op.Topic
		if op.Kind.isACL() {
			name = aclPrefix + name
		}
		byName[name] = append(byName[name], porcupine.Operation{ClientId: op.Client, Call: op.Start, Return: ret,
			Input: metaInput{op: op, i: i}})
	}
	topics, acls := TopicAdminModel.ToModel(), ACLModel.ToModel()
	for name, hist := range byName {
		model := topics
		if strings.HasPrefix(name, aclPrefix) {
			model = acls
		}
		verdict, info := porcupine.CheckOperationsVerbose(model, hist, timeout)
		switch verdict {
		case porcupine.Ok:
			res.Verdict[name] = "ok"
		case porcupine.Illegal:
			res.Verdict[name] = "illegal"
			res.Illegal[name] = describeIllegal(info, hist)
		default:
			res.Verdict[name] = "unknown"
		}
	}
	return res
}

// aclPrefix marks an ACL resource's verdict in MetaResult.
const aclPrefix = "acls:"

// describeIllegal names the operations of the longest partial
// linearization and the operations left out of it.
func describeIllegal(info porcupine.LinearizationInfo, hist []porcupine.Operation) []string {
	var best []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, p := range part {
			if len(p) > len(best) {
				best = p
			}
		}
	}
	in := map[int]bool{}
	var out []string
	for _, o := range best {
		m := o.Input.(metaInput)
		in[m.i] = true
		out = append(out, fmt.Sprintf("ordered: op %d %s", m.i, m.op))
	}
	for _, o := range hist {
		if m := o.Input.(metaInput); !in[m.i] {
			out = append(out, fmt.Sprintf("cannot follow: op %d %s", m.i, m.op))
		}
	}
	return out
}
