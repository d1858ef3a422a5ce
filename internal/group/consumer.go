package group

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// This file is the KIP-848 ("consumer" protocol) group state machine:
// members heartbeat with their subscription and owned partitions, the
// coordinator computes a target assignment (uniform or range) whenever the
// group epoch moves, and each member is reconciled towards its target:
// partitions it must give up are revoked first, and a partition is handed
// to its new owner only once its previous owner has released it.

// TopicInfo describes one topic for server-side assignment.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// topicIndex is a snapshot of the topics, by name and by id.
type topicIndex struct {
	byName map[string]TopicInfo
	byID   map[[16]byte]string
}

func newTopicIndex(ts []TopicInfo) topicIndex {
	ix := topicIndex{byName: make(map[string]TopicInfo, len(ts)), byID: make(map[[16]byte]string, len(ts))}
	for _, t := range ts {
		ix.byName[t.Name] = t
		ix.byID[t.ID] = t.Name
	}
	return ix
}

// sameTopics reports whether two topic snapshots hold the same topics.
func sameTopics(a, b topicIndex) bool {
	if len(a.byName) != len(b.byName) {
		return false
	}
	for name, t := range a.byName {
		if b.byName[name] != t {
			return false
		}
	}
	return true
}

// tpset is a set of topic partitions.
type tpset map[tp]struct{}

func (s tpset) has(k tp) bool { _, ok := s[k]; return ok }

func (s tpset) clone() tpset {
	out := make(tpset, len(s))
	for k := range s {
		out[k] = struct{}{}
	}
	return out
}

func (s tpset) sorted() []tp {
	out := make([]tp, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sortTPs(out)
	return out
}

func (s tpset) key() string {
	var b strings.Builder
	for _, k := range s.sorted() {
		fmt.Fprintf(&b, "%s/%d,", k.topic, k.partition)
	}
	return b.String()
}

// Server-side assignors (group.consumer.assignors).
const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// cmember is one KIP-848 member.
type cmember struct {
	id               string
	instanceID       *string
	rackID           *string
	clientID         string
	clientHost       string
	epoch            int32
	prevEpoch        int32
	rebalanceTimeout time.Duration
	topics           []string // subscribed topic names, sorted
	regex            string   // subscribed topic regex ("" = none)
	assignor         string   // requested server assignor ("" = group default)

	assigned tpset // partitions the member owns as far as the coordinator knows
	owned    tpset // partitions the member last reported owning (nil = never)
	lastSent string

	hbTimer     Timer
	hbSeq       uint64
	revokeTimer Timer
	revokeSeq   uint64
}

// consumerGroup is the KIP-848 state of a group.
type consumerGroup struct {
	epoch           int32
	assignmentEpoch int32
	members         map[string]*cmember
	static          map[string]string // instance id -> member id
	target          map[string]tpset
	// meta is the metadata of the subscribed topics the target was
	// computed on (stored as ConsumerGroupPartitionMetadata), metaKey its
	// fingerprint.
	meta    []consumerTopicMetadata
	metaKey string
	tops    topicIndex

	// changed holds the ids of the members whose records may differ from
	// what was last written (a member removed included); changedAll is set
	// when every member's may (a new target assignment, new topics, a
	// load). consumerChangesLocked encodes only those and clears both.
	changed    map[string]bool
	changedAll bool
}

// touch marks member id's records for the next write.
func (cg *consumerGroup) touch(id string) { cg.changed[id] = true }

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*cmember{}, static: map[string]string{}, target: map[string]tpset{}, changed: map[string]bool{}, changedAll: true}
}

// stateName is the KIP-848 group state.
func (cg *consumerGroup) stateName() string {
	if len(cg.members) == 0 {
		return "Empty"
	}
	if cg.assignmentEpoch < cg.epoch {
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.assigned.key() != cg.target[m.id].key() {
			return "Reconciling"
		}
	}
	return "Stable"
}

// assignorName is the assignor the group uses: the one most members ask
// for, uniform by default.
func (cg *consumerGroup) assignorName() string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best, n := assignorUniform, 0
	for _, name := range []string{assignorUniform, assignorRange} {
		if votes[name] > n {
			best, n = name, votes[name]
		}
	}
	return best
}

// subscription returns the member's subscribed topics that exist.
func (m *cmember) subscription(ix topicIndex) []string {
	set := map[string]bool{}
	for _, t := range m.topics {
		if _, ok := ix.byName[t]; ok {
			set[t] = true
		}
	}
	if m.regex != "" {
		if re, err := regexp.Compile("^(?:" + m.regex + ")$"); err == nil {
			for name := range ix.byName {
				// Like Kafka, every topic is matched, internal ones too.
				if re.MatchString(name) {
					set[name] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// subscribedMetaKey fingerprints the metadata of every subscribed topic so a
// topic created, deleted or grown moves the group epoch.
func (cg *consumerGroup) subscribedMetaKey() string { return metaKeyOf(cg.subscribedMeta()) }

// metaKeyOf fingerprints topic metadata.
func metaKeyOf(ts []consumerTopicMetadata) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "%s:%x:%d;", t.TopicName, t.TopicID, t.NumPartitions)
	}
	return b.String()
}

// subscribedMeta is the metadata of every subscribed topic that exists,
// sorted by name.
func (cg *consumerGroup) subscribedMeta() []consumerTopicMetadata {
	names := map[string]bool{}
	for _, m := range cg.members {
		for _, t := range m.subscription(cg.tops) {
			names[t] = true
		}
	}
	list := make([]string, 0, len(names))
	for t := range names {
		list = append(list, t)
	}
	sort.Strings(list)
	out := make([]consumerTopicMetadata, 0, len(list))
	for _, t := range list {
		ti := cg.tops.byName[t]
		out = append(out, consumerTopicMetadata{TopicID: ti.ID, TopicName: t, NumPartitions: ti.Partitions, PartitionMetadata: []consumerPartitionRacks{}})
	}
	return out
}

// bump advances the group epoch and recomputes the target assignment.
func (g *group) bumpConsumer() {
	cg := g.consumer
	cg.epoch++
	cg.meta = cg.subscribedMeta()
	cg.metaKey = metaKeyOf(cg.meta)
	cg.target = assign(cg.assignorName(), cg.members, cg.tops, cg.target)
	cg.assignmentEpoch = cg.epoch
	cg.changedAll = true
	g.syncConsumerState()
	if g.env.rebalanced != nil {
		g.env.rebalanced()
	}
}

// syncConsumerState keeps the classic state field meaningful for the
// shared code paths (Empty vs. not, expiry, deletion).
func (g *group) syncConsumerState() {
	if len(g.consumer.members) == 0 {
		if g.state != stateEmpty {
			g.setState(stateEmpty)
		}
	} else if g.state != stateStable {
		g.setState(stateStable)
	}
}

// chbParams is a validated ConsumerGroupHeartbeat.
type chbParams struct {
	memberID         string
	epoch            int32
	instanceID       *string
	rackID           *string
	rebalanceTimeout time.Duration // <= 0: unchanged
	topics           []string      // nil: unchanged
	regex            *string       // nil: unchanged
	assignor         *string       // nil: unchanged
	owned            tpset         // nil: unchanged
	clientID         string
	clientHost       string
}

// chbResult is the ConsumerGroupHeartbeat answer.
type chbResult struct {
	err        int16
	msg        string
	memberID   string
	epoch      int32
	assignment tpset // nil: unchanged
}

// consumerHeartbeat runs one ConsumerGroupHeartbeat.
func (g *group) consumerHeartbeat(p chbParams, ix topicIndex, session time.Duration) chbResult {
	cg := g.consumer
	if !sameTopics(cg.tops, ix) {
		// The records name topics by id and leave deleted ones out.
		cg.changedAll = true
	}
	cg.tops = ix
	cg.touch(p.memberID)
	if p.assignor != nil && *p.assignor != assignorUniform && *p.assignor != assignorRange {
		return chbResult{err: kerr.UnsupportedAssignor.Code, msg: "assignor " + *p.assignor + " is not supported (uniform, range)"}
	}
	switch p.epoch {
	case -1, -2:
		m := cg.members[p.memberID]
		if m == nil {
			return chbResult{err: kerr.UnknownMemberID.Code}
		}
		if p.epoch == memberEpochLeftStatic && m.instanceID != nil {
			g.leaveStatic(m)
			return chbResult{memberID: m.id, epoch: memberEpochLeftStatic}
		}
		g.removeCMember(m)
		g.bumpConsumer()
		return chbResult{memberID: p.memberID, epoch: -1}
	}
	// Kafka's throwIfConsumerGroupIsFull (group.consumer.max.size): a full
	// group takes no new member id (a restarted static member's new id
	// included), whatever its epoch.
	if limit := g.env.consumerMax; limit > 0 && len(cg.members) >= limit && cg.members[p.memberID] == nil {
		return chbResult{err: kerr.GroupMaxSizeReached.Code, msg: fmt.Sprintf("the consumer group has reached its maximum capacity of %d members", limit)}
	}
	var m *cmember
	changed := false
	if p.epoch == 0 {
		if p.instanceID != nil {
			if oldID, ok := cg.static[*p.instanceID]; ok && oldID != p.memberID {
				old := cg.members[oldID]
				if old != nil && !old.left() {
					return chbResult{err: kerr.UnreleasedInstanceID.Code, msg: "instance " + *p.instanceID + " is held by member " + oldID}
				}
				if old != nil {
					// The static member restarted: it takes over the
					// old member's assignment and epoch.
					g.replaceCMember(old, p.memberID)
				}
			}
		}
		m = cg.members[p.memberID]
		if m == nil {
			if p.topics == nil && p.regex == nil {
				return chbResult{err: kerr.InvalidRequest.Code, msg: "a joining member must send its subscription"}
			}
			m = &cmember{id: p.memberID, instanceID: p.instanceID, assigned: tpset{}}
			cg.members[m.id] = m
			if p.instanceID != nil {
				cg.static[*p.instanceID] = m.id
			}
			changed = true
		}
		if m.left() {
			// The same member back after its temporary leave: a member
			// at epoch 0, as Kafka's copy of the static member.
			m.epoch, m.prevEpoch = 0, 0
		}
		m.lastSent = "" // a (re)joining member gets its full assignment
	} else {
		m = cg.members[p.memberID]
		if m == nil {
			return chbResult{err: kerr.UnknownMemberID.Code}
		}
		// Kafka's throwIfConsumerGroupMemberEpochIsInvalid: an epoch
		// above the member's is fenced (a static member that left is at
		// -2); a lower one only if it is the previous epoch and the member
		// reports owning no more than it is assigned (a lost response).
		if p.epoch > m.epoch || (p.epoch < m.epoch && !(p.epoch == m.prevEpoch && p.owned != nil && subset(p.owned, m.assigned))) {
			return chbResult{err: kerr.FencedMemberEpoch.Code, msg: fmt.Sprintf("member epoch %d, the coordinator has %d", p.epoch, m.epoch)}
		}
	}
	m.clientID, m.clientHost = p.clientID, p.clientHost
	if p.rackID != nil {
		m.rackID = p.rackID
	}
	if p.rebalanceTimeout > 0 {
		m.rebalanceTimeout = p.rebalanceTimeout
	}
	if p.topics != nil {
		ts := append([]string(nil), p.topics...)
		sort.Strings(ts)
		if strings.Join(ts, "\x00") != strings.Join(m.topics, "\x00") {
			m.topics = ts
			changed = true
		}
	}
	if p.regex != nil && *p.regex != m.regex {
		m.regex = *p.regex
		changed = true
	}
	if p.assignor != nil && *p.assignor != m.assignor {
		m.assignor = *p.assignor
		changed = true
	}
	if p.owned != nil {
		m.owned = p.owned
	}
	g.consumerSession(m, session)
	if changed || cg.subscribedMetaKey() != cg.metaKey {
		g.bumpConsumer()
	}
	g.reconcile(m)
	g.syncConsumerState()
	res := chbResult{memberID: m.id, epoch: m.epoch}
	send := m.assigned.clone()
	for k := range m.assigned {
		if !cg.target[m.id].has(k) {
			delete(send, k) // being revoked
		}
	}
	if key := send.key(); key != m.lastSent || p.owned != nil {
		m.lastSent = key
		res.assignment = send
	}
	return res
}

func subset(a, b tpset) bool {
	for k := range a {
		if !b.has(k) {
			return false
		}
	}
	return true
}

// reconcile moves a member towards its target assignment.
func (g *group) reconcile(m *cmember) {
	cg := g.consumer
	cg.touch(m.id)
	target := cg.target[m.id]
	var revoke []tp
	for k := range m.assigned {
		if !target.has(k) {
			revoke = append(revoke, k)
		}
	}
	if len(revoke) > 0 {
		released := m.owned != nil
		for _, k := range revoke {
			if m.owned.has(k) {
				released = false
			}
		}
		if !released {
			g.armRevokeTimer(m)
			return
		}
		for _, k := range revoke {
			delete(m.assigned, k)
		}
	}
	stopTimer(m.revokeTimer)
	m.revokeSeq++
	if m.epoch != cg.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, cg.assignmentEpoch
	}
	for k := range target {
		if !m.assigned.has(k) && !g.ownedByOther(k, m) {
			m.assigned[k] = struct{}{}
		}
	}
}

func (g *group) ownedByOther(k tp, m *cmember) bool {
	for _, o := range g.consumer.members {
		if o != m && o.assigned.has(k) {
			return true
		}
	}
	return false
}

// armRevokeTimer fences a member that does not release its revoked
// partitions within its rebalance timeout.
func (g *group) armRevokeTimer(m *cmember) {
	if m.revokeTimer != nil {
		return
	}
	m.revokeSeq++
	seq := m.revokeSeq
	d := m.rebalanceTimeout
	if d <= 0 {
		d = 5 * time.Minute
	}
	m.revokeTimer = g.after(d, func() {
		if g.consumer == nil || g.consumer.members[m.id] != m || m.revokeSeq != seq {
			return
		}
		g.removeCMember(m)
		g.bumpConsumer()
	})
}

// consumerSession restarts the member's session timer.
func (g *group) consumerSession(m *cmember, session time.Duration) {
	stopTimer(m.hbTimer)
	m.hbSeq++
	seq := m.hbSeq
	m.hbTimer = g.after(session, func() {
		if g.consumer == nil || g.consumer.members[m.id] != m || m.hbSeq != seq {
			return
		}
		g.removeCMember(m)
		g.bumpConsumer()
	})
}

func (g *group) removeCMember(m *cmember) {
	cg := g.consumer
	stopTimer(m.hbTimer)
	stopTimer(m.revokeTimer)
	m.hbSeq++
	m.revokeSeq++
	m.revokeTimer = nil
	cg.touch(m.id)
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	g.syncConsumerState()
}

// left reports whether m is a static member that left temporarily (member
// epoch -2, Kafka's LEAVE_GROUP_STATIC_MEMBER_EPOCH): it keeps its
// assignment until its session times out or its instance id rejoins.
func (m *cmember) left() bool { return m.epoch == memberEpochLeftStatic }

// leaveStatic is a static member's temporary leave (Kafka's
// consumerGroupStaticMemberGroupLeave): the member stays, at epoch -2 (its
// previous epoch unchanged), with the partitions it was assigned minus
// those being revoked, which are free for their new owners at once.
func (g *group) leaveStatic(m *cmember) {
	g.consumer.touch(m.id)
	target := g.consumer.target[m.id]
	for k := range m.assigned {
		if !target.has(k) {
			delete(m.assigned, k)
		}
	}
	stopTimer(m.revokeTimer)
	m.revokeTimer = nil
	m.revokeSeq++
	m.epoch = memberEpochLeftStatic
}

// replaceCMember gives a restarted static member's state to its new id.
func (g *group) replaceCMember(old *cmember, newID string) {
	cg := g.consumer
	cg.touch(old.id)
	cg.touch(newID)
	delete(cg.members, old.id)
	if t, ok := cg.target[old.id]; ok {
		delete(cg.target, old.id)
		cg.target[newID] = t
	}
	old.id = newID
	// Kafka's getOrMaybeSubscribeStaticConsumerGroupMember copies the
	// member under its new id at epoch 0 (previous epoch 0); reconcile
	// then brings it to the assignment epoch with its partitions.
	old.epoch, old.prevEpoch = 0, 0
	cg.members[newID] = old
	cg.static[*old.instanceID] = newID
}

// stopConsumerTimers stops every KIP-848 member timer.
func (g *group) stopConsumerTimers() {
	if g.consumer == nil {
		return
	}
	for _, m := range g.consumer.members {
		stopTimer(m.hbTimer)
		stopTimer(m.revokeTimer)
		m.hbSeq++
		m.revokeSeq++
	}
}

// consumerSubscribed is the union of the members' subscriptions.
func (cg *consumerGroup) consumerSubscribed() map[string]bool {
	out := map[string]bool{}
	for _, m := range cg.members {
		for _, t := range m.subscription(cg.tops) {
			out[t] = true
		}
		for _, t := range m.topics {
			out[t] = true
		}
	}
	return out
}
