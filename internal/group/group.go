package group

import (
	"bytes"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// state is a classic group's state, named as Kafka names them.
type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s state) String() string { return stateNames[s] }

// joinResult is what a waiting JoinGroup request receives.
type joinResult struct {
	err            int16
	generation     int32
	protocolType   string
	protocol       string
	leader         string
	memberID       string
	members        []kmsg.JoinGroupResponseMember
	skipAssignment bool
}

// syncResult is what a waiting SyncGroup request receives.
type syncResult struct {
	err        int16
	assignment []byte
}

// protocol is one (name, metadata) entry of a member's JoinGroup.
type protocol struct {
	name     string
	metadata []byte
}

// member is one classic group member.
type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocols        []protocol
	assignment       []byte
	joinVersion      int16
	// isNew is set from a member's first JoinGroup until its first join
	// completes: its session is then newMemberJoinTimeout and waiting in
	// JoinGroup does not keep it alive (Kafka's ClassicGroupMember.isNew).
	isNew bool

	joinCh chan joinResult // set while a JoinGroup waits
	syncCh chan syncResult // set while a SyncGroup waits

	hbTimer Timer
	hbSeq   uint64
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

func sameProtocols(a, b []protocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || !bytes.Equal(a[i].metadata, b[i].metadata) {
			return false
		}
	}
	return true
}

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// offset is one committed offset.
type offset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitMs    int64
	expireMs    int64 // -1 = expiry by group retention rules
	// order is the commit's position in its __consumer_offsets partition
	// (increasing in log order): when a transaction commits, its offset
	// replaces a plain commit only if it was written later (Kafka's rule).
	order int64
}

// group is one group's state. Every field is guarded by mu. Methods never do
// I/O; they may schedule timers through env and set dirty when the group
// metadata record must be written.
type group struct {
	mu  sync.Mutex
	env *env
	id  string

	state        state
	stateTime    time.Time // when the current state was entered (Kafka's currentStateTimestamp)
	protocolType string    // "" for groups that only commit offsets
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	static       map[string]string // group.instance.id -> member id
	pending      map[string]Timer  // member ids handed out with MEMBER_ID_REQUIRED

	// syncingGen is the generation whose leader assignment is in the log
	// but not yet durable (0: none). The group is Stable from the append
	// on (see appendedAssignment); the SyncGroup answers of that
	// generation wait for the write.
	syncingGen int32

	joinTimer Timer
	joinSeq   uint64
	// pendingSync holds the members of the current generation that have
	// not sent their SyncGroup yet; syncTimer removes them when the
	// rebalance timeout passes (Kafka's pendingSyncMembers, KIP-814 era).
	pendingSync    map[string]bool
	syncTimer      Timer
	syncSeq        uint64
	initialDelay   bool // the initial-rebalance-delay window is open
	newMemberAdded bool

	offsets map[tp]offset
	// txn holds transactional offsets written but not yet committed or
	// aborted, by producer id (Kafka's pending transactional offsets):
	// invisible to OffsetFetch until the transaction's marker.
	txn map[int64]map[tp]offset

	// consumer is set for KIP-848 ("consumer" protocol) groups; members,
	// static and pending then stay empty.
	consumer *consumerGroup

	// dirty is set when the group metadata record must be (re)written.
	dirty bool
	// stored is the group metadata last written durably (nil: none), to
	// which a failed write reloads the group; writeEpoch counts those
	// reloads (see write.go).
	stored     *kmsg.GroupMetadataValue
	writeEpoch uint64
	// cwritten holds the KIP-848 records (consumer_persist.go) appended
	// for the group, by key: what its __consumer_offsets partition will
	// hold once the writes in flight are durable; cstored those known
	// durable (a failed write reloads the group from them), cseq numbers
	// the writes.
	cwritten map[string][]byte
	cstored  map[string]storedRecord
	cseq     uint64
}

// env is what a group needs from its coordinator: time, the tunables and a
// way to run timer callbacks under the group's lock.
type env struct {
	clock        Clock
	initialDelay time.Duration
	minSession   time.Duration
	maxSession   time.Duration
	maxSize      int // group.max.size (0: no limit)
	consumerMax  int // group.consumer.max.size (0: no limit)
	newMemberID  func(prefix string) string
	runLocked    func(g *group, f func()) // locks g, runs f, then persists dirty state
	rebalanced   func()                   // counts a completed rebalance (metrics)
}

func newGroup(id string, e *env) *group {
	return &group{
		env:         e,
		id:          id,
		state:       stateEmpty,
		stateTime:   e.clock.Now(),
		members:     map[string]*member{},
		static:      map[string]string{},
		pending:     map[string]Timer{},
		pendingSync: map[string]bool{},
		offsets:     map[tp]offset{},
	}
}

func (g *group) setState(s state) {
	g.state = s
	g.stateTime = g.env.clock.Now()
}

// after schedules f under the group lock after d.
func (g *group) after(d time.Duration, f func()) Timer {
	return g.env.clock.AfterFunc(d, func() { g.env.runLocked(g, f) })
}

// isEmpty reports whether the group has no members at all.
func (g *group) isEmpty() bool {
	if g.consumer != nil && len(g.consumer.members) > 0 {
		return false
	}
	return len(g.members) == 0 && len(g.pending) == 0
}

// typeName is the group type ListGroups v5 reports.
func (g *group) typeName() string {
	if g.consumer != nil {
		return "consumer"
	}
	return "classic"
}

// stateName is the state as clients see it.
func (g *group) stateName() string {
	if g.consumer != nil && g.state != stateDead {
		return g.consumer.stateName()
	}
	return g.state.String()
}

// supportsProtocols is Kafka's check that a joining member can be part of
// the group: same protocol type and at least one protocol every member has.
func (g *group) supportsProtocols(ptype string, protos []protocol) bool {
	if len(g.members) == 0 {
		return ptype != "" && len(protos) > 0
	}
	if ptype != g.protocolType {
		return false
	}
	cands := g.candidateProtocols()
	for _, p := range protos {
		if cands[p.name] {
			return true
		}
	}
	return false
}

// candidateProtocols are the protocol names every member supports.
func (g *group) candidateProtocols() map[string]bool {
	count := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			count[p.name]++
		}
	}
	out := map[string]bool{}
	for name, n := range count {
		if n == len(g.members) {
			out[name] = true
		}
	}
	return out
}

// selectProtocol picks the candidate most members prefer (Kafka's vote),
// breaking ties by the leader's preference order.
func (g *group) selectProtocol() string {
	cands := g.candidateProtocols()
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if cands[p.name] {
				votes[p.name]++
				break
			}
		}
	}
	var order []protocol
	if l := g.members[g.leader]; l != nil {
		order = l.protocols
	} else {
		for _, m := range g.members {
			order = m.protocols
			break
		}
	}
	best, bestVotes := "", -1
	for _, p := range order {
		if cands[p.name] && votes[p.name] > bestVotes {
			best, bestVotes = p.name, votes[p.name]
		}
	}
	return best
}

// rebalanceTimeout is the largest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		if m.rebalanceTimeout > d {
			d = m.rebalanceTimeout
		}
	}
	return d
}

// subscribedTopics returns the topics the members of a "consumer" group
// subscribe to, and false when they cannot be known.
func (g *group) subscribedTopics() (map[string]bool, bool) {
	if g.consumer != nil {
		return g.consumer.consumerSubscribed(), true
	}
	if g.protocolType != "consumer" {
		return nil, false
	}
	out := map[string]bool{}
	for _, m := range g.members {
		meta := m.metadataFor(g.protocol)
		if g.protocol == "" && len(m.protocols) > 0 {
			meta = m.protocols[0].metadata
		}
		var cm kmsg.ConsumerMemberMetadata
		if err := cm.ReadFrom(meta); err != nil {
			return nil, false
		}
		for _, t := range cm.Topics {
			out[t] = true
		}
	}
	return out, true
}
