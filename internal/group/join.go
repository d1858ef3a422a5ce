package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinParams is a validated JoinGroup request.
type joinParams struct {
	version          int16
	memberID         string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []protocol
}

// join handles a JoinGroup. It returns either an immediate result or a
// channel that receives the result when the rebalance completes.
func (g *group) join(p joinParams) (*joinResult, <-chan joinResult) {
	if g.state == stateDead {
		return &joinResult{err: kerr.CoordinatorNotAvailable.Code, memberID: p.memberID}, nil
	}
	if g.consumer != nil {
		if len(g.consumer.members) > 0 {
			// A live KIP-848 group does not take classic members.
			return &joinResult{err: kerr.InconsistentGroupProtocol.Code, memberID: p.memberID}, nil
		}
		g.consumer = nil
	}
	if !g.acceptJoiningMember(p.memberID) {
		// Kafka's classicGroupJoin: the member is removed (it may be one
		// that has not rejoined yet) and answered without a member id.
		if m := g.members[p.memberID]; m != nil {
			g.removeMember(m)
			g.maybeCompleteJoin()
		}
		return &joinResult{err: kerr.GroupMaxSizeReached.Code}, nil
	}
	if !g.supportsProtocols(p.protocolType, p.protocols) {
		return &joinResult{err: kerr.InconsistentGroupProtocol.Code, memberID: p.memberID}, nil
	}
	if p.memberID == "" {
		return g.joinUnknown(p)
	}
	return g.joinKnown(p)
}

func (g *group) joinUnknown(p joinParams) (*joinResult, <-chan joinResult) {
	if p.instanceID != nil {
		newID := g.env.newMemberID(*p.instanceID)
		if old, ok := g.static[*p.instanceID]; ok && g.members[old] != nil {
			return g.replaceStatic(old, newID, p)
		}
		return nil, g.addMemberAndRebalance(newID, p)
	}
	newID := g.env.newMemberID(p.clientID)
	if p.version >= 4 {
		// KIP-394: hand out the id and make the client rejoin with it.
		g.pending[newID] = g.after(p.sessionTimeout, func() { g.expirePending(newID) })
		return &joinResult{err: kerr.MemberIDRequired.Code, memberID: newID, generation: -1}, nil
	}
	return nil, g.addMemberAndRebalance(newID, p)
}

func (g *group) joinKnown(p joinParams) (*joinResult, <-chan joinResult) {
	if t, ok := g.pending[p.memberID]; ok {
		stopTimer(t)
		delete(g.pending, p.memberID)
		return nil, g.addMemberAndRebalance(p.memberID, p)
	}
	// Kafka's ClassicGroup.validateMember: a known instance id mapped to
	// another member is fenced before the member id is looked up.
	m, code := g.validateMember(p.memberID, p.instanceID)
	if code != 0 {
		return &joinResult{err: code, memberID: p.memberID}, nil
	}
	switch g.state {
	case statePreparingRebalance:
		g.updateMember(m, p)
		ch := g.awaitJoin(m)
		g.maybeCompleteJoin()
		return nil, ch
	case stateCompletingRebalance:
		if sameProtocols(m.protocols, p.protocols) {
			// The member missed the JoinGroup response: send it again.
			return g.currentJoinResult(m, false), nil
		}
		g.updateMember(m, p)
		ch := g.awaitJoin(m)
		g.prepareRebalance()
		return nil, ch
	case stateStable:
		if g.leader == m.id || !sameProtocols(m.protocols, p.protocols) {
			g.updateMember(m, p)
			ch := g.awaitJoin(m)
			g.prepareRebalance()
			return nil, ch
		}
		g.heartbeat(m)
		return g.currentJoinResult(m, false), nil
	default:
		return &joinResult{err: kerr.UnknownMemberID.Code, memberID: p.memberID}, nil
	}
}

// replaceStatic gives a restarted static member a new member id in place of
// the old one (KIP-345). In a Stable group with unchanged protocols the
// member keeps its assignment and no rebalance happens.
func (g *group) replaceStatic(oldID, newID string, p joinParams) (*joinResult, <-chan joinResult) {
	m := g.members[oldID]
	fenced := joinResult{err: kerr.FencedInstanceID.Code, memberID: oldID}
	if m.joinCh != nil {
		m.joinCh <- fenced
		m.joinCh = nil
	}
	if m.syncCh != nil {
		m.syncCh <- syncResult{err: kerr.FencedInstanceID.Code}
		m.syncCh = nil
	}
	oldLeader := g.leader
	delete(g.members, oldID)
	if g.pendingSync[oldID] {
		// Kafka's replaceStaticMember leaves the old id in
		// pendingSyncMembers, so the expiry then rebalances whatever the
		// new member does; here the new member inherits the duty to sync.
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	m.id = newID
	m.clientID, m.clientHost = p.clientID, p.clientHost
	m.sessionTimeout, m.rebalanceTimeout = p.sessionTimeout, p.rebalanceTimeout
	m.joinVersion = p.version
	g.members[newID] = m
	g.static[*p.instanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	switch g.state {
	case stateStable:
		// As Kafka: no rebalance unless the new protocols change the
		// protocol the group would select (the assignment is kept even if
		// the subscription changed; KIP-345).
		m.protocols = p.protocols
		if g.selectProtocol() == g.protocol {
			g.heartbeat(m)
			g.dirty = true
			r := g.currentJoinResult(m, p.version >= 9)
			if p.version < 9 {
				// Without KIP-814 the old leader id is returned so a
				// restarted leader does not run a useless assignment.
				r.leader = oldLeader
			}
			return r, nil
		}
		ch := g.awaitJoin(m)
		g.prepareRebalance()
		return nil, ch
	case stateCompletingRebalance:
		m.protocols = p.protocols
		ch := g.awaitJoin(m)
		g.prepareRebalance()
		return nil, ch
	default: // PreparingRebalance
		m.protocols = p.protocols
		ch := g.awaitJoin(m)
		g.maybeCompleteJoin()
		return nil, ch
	}
}

// currentJoinResult answers a JoinGroup from the current generation. The
// leader gets the member list only when it must (re)assign or, with
// skipAssignment (JoinGroup v9+), to learn the members without assigning.
func (g *group) currentJoinResult(m *member, skipAssignment bool) *joinResult {
	r := &joinResult{
		generation:   g.generation,
		protocolType: g.protocolType,
		protocol:     g.protocol,
		leader:       g.leader,
		memberID:     m.id,
	}
	if g.leader == m.id && (g.state == stateCompletingRebalance || skipAssignment) {
		r.members = g.memberList()
		r.skipAssignment = skipAssignment
	}
	return r
}

func (g *group) memberList() []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.members))
	for _, m := range g.members {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = m.instanceID
		jm.ProtocolMetadata = m.metadataFor(g.protocol)
		out = append(out, jm)
	}
	return out
}

func (g *group) updateMember(m *member, p joinParams) {
	m.protocols = p.protocols
	m.clientID, m.clientHost = p.clientID, p.clientHost
	m.sessionTimeout, m.rebalanceTimeout = p.sessionTimeout, p.rebalanceTimeout
	m.joinVersion = p.version
}

// awaitJoin parks the member's JoinGroup until the rebalance completes. A
// JoinGroup already parked for it is answered with REBALANCE_IN_PROGRESS.
func (g *group) awaitJoin(m *member) <-chan joinResult {
	if m.joinCh != nil {
		m.joinCh <- joinResult{err: kerr.RebalanceInProgress.Code, memberID: m.id}
	}
	m.joinCh = make(chan joinResult, 1)
	return m.joinCh
}

// newMemberJoinTimeout bounds how long a new member may wait in its first
// JoinGroup (Kafka's CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS, not a
// setting): its session timeout does not apply, since it has no member id
// to heartbeat with, and a client that gave up and retried leaves a
// defunct member behind that would otherwise hold the rebalance until the
// rebalance timeout, each retry adding another.
const newMemberJoinTimeout = 5 * time.Minute

func (g *group) addMemberAndRebalance(id string, p joinParams) <-chan joinResult {
	m := &member{id: id, instanceID: p.instanceID, isNew: true}
	g.updateMember(m, p)
	g.members[id] = m
	g.armHeartbeat(m, newMemberJoinTimeout)
	if p.instanceID != nil {
		g.static[*p.instanceID] = id
	}
	if len(g.members) == 1 {
		g.protocolType = p.protocolType
	}
	if g.leader == "" {
		g.leader = id
	}
	// Kafka's addMemberAndRebalance: only a member joining a brand-new
	// group (generation 0) during its initial delay extends the delay; a
	// group that emptied after earlier generations waits one window.
	if g.state == statePreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	ch := g.awaitJoin(m)
	if g.state == statePreparingRebalance {
		g.maybeCompleteJoin()
	} else {
		g.prepareRebalance()
	}
	return ch
}

// prepareRebalance moves the group to PreparingRebalance and arms the join
// deadline: the largest rebalance timeout, or, for a group leaving Empty,
// group.initial.rebalance.delay.ms extended while new members keep joining.
func (g *group) prepareRebalance() {
	if g.state == stateCompletingRebalance {
		g.failSyncs(kerr.RebalanceInProgress.Code)
	}
	g.clearPendingSync()
	fromEmpty := g.state == stateEmpty
	g.setState(statePreparingRebalance)
	stopTimer(g.joinTimer)
	g.joinSeq++
	seq := g.joinSeq
	rt := g.rebalanceTimeout()
	if fromEmpty && g.env.initialDelay > 0 {
		// As Kafka: the first window is the whole initial delay, whatever
		// the rebalance timeout; what is left of the rebalance timeout
		// after it bounds the extensions.
		g.initialDelay = true
		g.newMemberAdded = false
		d := g.env.initialDelay
		g.joinTimer = g.after(d, func() { g.initialDelayExpired(seq, d, max(rt-d, 0)) })
		return
	}
	g.joinTimer = g.after(rt, func() { g.joinDeadline(seq) })
	g.maybeCompleteJoin()
}

func (g *group) initialDelayExpired(seq uint64, delay, remaining time.Duration) {
	if seq != g.joinSeq || g.state != statePreparingRebalance {
		return
	}
	if g.newMemberAdded && remaining > 0 {
		// Kafka's tryCompleteInitialRebalanceElseSchedule: the next window
		// is min(initial delay, remaining) and the remaining time shrinks by
		// the window that just ended.
		g.newMemberAdded = false
		d := min(g.env.initialDelay, remaining)
		r := max(remaining-delay, 0)
		g.joinTimer = g.after(d, func() { g.initialDelayExpired(seq, d, r) })
		return
	}
	g.initialDelay = false
	g.completeJoin()
}

func (g *group) joinDeadline(seq uint64) {
	if seq != g.joinSeq || g.state != statePreparingRebalance {
		return
	}
	g.completeJoin()
}

// maybeCompleteJoin ends PreparingRebalance early once every member has
// rejoined and no MEMBER_ID_REQUIRED member is outstanding.
func (g *group) maybeCompleteJoin() {
	if g.state != statePreparingRebalance || g.initialDelay || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.joinCh == nil {
			return
		}
	}
	g.completeJoin()
}

// completeJoin ends PreparingRebalance: dynamic members that did not rejoin
// are dropped, the generation advances and every waiting JoinGroup is
// answered (the leader with the member list).
func (g *group) completeJoin() {
	stopTimer(g.joinTimer)
	g.joinTimer = nil
	g.joinSeq++
	g.initialDelay = false
	for _, m := range g.members {
		if m.joinCh == nil && m.instanceID == nil {
			g.removeMember(m)
		}
	}
	if len(g.members) == 0 {
		g.clearPendingSync()
		g.generation++
		g.protocol = ""
		g.leader = ""
		g.setState(stateEmpty)
		g.dirty = true
		return
	}
	if l := g.members[g.leader]; l == nil || l.joinCh == nil {
		g.leader = ""
		for _, m := range g.members {
			if m.joinCh != nil {
				g.leader = m.id
				break
			}
		}
		if g.leader == "" {
			// Only static members that have not rejoined remain: wait
			// another round for them to rejoin or for their sessions to end.
			seq := g.joinSeq
			g.joinTimer = g.after(g.rebalanceTimeout(), func() { g.joinDeadline(seq) })
			return
		}
	}
	// SyncGroups still waiting for the previous generation's assignment
	// to be durable belong to a generation that is over.
	for _, m := range g.members {
		if m.syncCh != nil {
			m.syncCh <- syncResult{err: kerr.RebalanceInProgress.Code}
			m.syncCh = nil
		}
	}
	g.syncingGen = 0
	g.generation++
	g.protocol = g.selectProtocol()
	g.setState(stateCompletingRebalance)
	if g.env.rebalanced != nil {
		g.env.rebalanced()
	}
	g.schedulePendingSync()
	for _, m := range g.members {
		m.assignment = nil
		if m.joinCh == nil {
			continue
		}
		r := joinResult{
			generation:   g.generation,
			protocolType: g.protocolType,
			protocol:     g.protocol,
			leader:       g.leader,
			memberID:     m.id,
		}
		if m.id == g.leader {
			r.members = g.memberList()
		}
		m.joinCh <- r
		m.joinCh = nil
		m.isNew = false
		g.heartbeat(m)
	}
}

// heartbeat restarts the member's session timer.
func (g *group) heartbeat(m *member) {
	g.armHeartbeat(m, m.sessionTimeout)
}

// armHeartbeat expires the member after d unless it heartbeats meanwhile.
func (g *group) armHeartbeat(m *member, d time.Duration) {
	stopTimer(m.hbTimer)
	m.hbSeq++
	seq := m.hbSeq
	m.hbTimer = g.after(d, func() { g.sessionExpired(m, seq) })
}

func (g *group) sessionExpired(m *member, seq uint64) {
	if g.members[m.id] != m || m.hbSeq != seq {
		return
	}
	if !m.isNew && (m.joinCh != nil || m.syncCh != nil) {
		// A member waiting in JoinGroup or SyncGroup is alive (Kafka's
		// hasSatisfiedHeartbeat), unless it is new.
		g.heartbeat(m)
		return
	}
	g.removeMembers([]*member{m})
}

func (g *group) expirePending(id string) {
	if _, ok := g.pending[id]; !ok {
		return
	}
	delete(g.pending, id)
	g.maybeCompleteJoin()
}

// removeMember drops a member without triggering a rebalance.
func (g *group) removeMember(m *member) {
	stopTimer(m.hbTimer)
	m.hbSeq++
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if m.joinCh != nil {
		m.joinCh <- joinResult{err: kerr.UnknownMemberID.Code, memberID: m.id}
		m.joinCh = nil
	}
	if m.syncCh != nil {
		m.syncCh <- syncResult{err: kerr.UnknownMemberID.Code}
		m.syncCh = nil
	}
	if g.leader == m.id {
		g.leader = ""
		for _, o := range g.members {
			g.leader = o.id
			break
		}
	}
}

// removeMembers removes members that left or expired and rebalances.
func (g *group) removeMembers(ms []*member) {
	for _, m := range ms {
		g.removeMember(m)
	}
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.prepareRebalance()
	case statePreparingRebalance:
		g.maybeCompleteJoin()
	}
}

// schedulePendingSync marks every member of the generation that just
// completed its join as owing a SyncGroup and arms the deadline: Kafka's
// GroupMetadataManager.completeClassicGroupJoin adds each member to the
// group's pendingSyncMembers and schedulePendingSync expires them after
// the group's rebalance timeout (the largest of its members').
func (g *group) schedulePendingSync() {
	g.clearPendingSync()
	for id := range g.members {
		g.pendingSync[id] = true
	}
	seq, gen := g.syncSeq, g.generation
	g.syncTimer = g.after(g.rebalanceTimeout(), func() { g.expirePendingSync(seq, gen) })
}

// clearPendingSync forgets the members owing a SyncGroup and stops their
// deadline (Kafka's removeSyncExpiration, run when a rebalance starts and,
// through initNextGeneration, when a generation ends).
func (g *group) clearPendingSync() {
	clear(g.pendingSync)
	stopTimer(g.syncTimer)
	g.syncTimer = nil
	g.syncSeq++
}

// synced notes that member id sent its SyncGroup; the deadline stops once
// every member has (Kafka's removePendingSyncMember).
func (g *group) synced(id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		stopTimer(g.syncTimer)
		g.syncTimer = nil
		g.syncSeq++
	}
}

// expirePendingSync removes the members of generation gen that sent no
// SyncGroup within the rebalance timeout and rebalances, as Kafka's
// expirePendingSync: only while the group is still CompletingRebalance or
// Stable in that generation (prepareRebalance cancels it otherwise).
// Static members are removed too: Kafka makes no exception for them here.
func (g *group) expirePendingSync(seq uint64, gen int32) {
	if seq != g.syncSeq || gen != g.generation || len(g.pendingSync) == 0 {
		return
	}
	if g.state != stateCompletingRebalance && g.state != stateStable {
		return
	}
	for id := range g.pendingSync {
		if m := g.members[id]; m != nil {
			g.removeMember(m)
		}
	}
	g.prepareRebalance()
}

// acceptJoiningMember is Kafka's check of group.max.size on a JoinGroup
// (GroupMetadataManager.acceptJoiningMember): an Empty group takes anyone;
// while preparing a rebalance a member already waiting in JoinGroup is
// accepted and others while fewer than the maximum are waiting (so the
// last members to rejoin a group over a lowered maximum are turned away);
// otherwise a member of the group is accepted and new ones while it has
// fewer members than the maximum.
func (g *group) acceptJoiningMember(id string) bool {
	limit := g.env.maxSize
	if limit <= 0 {
		return true
	}
	switch g.state {
	case statePreparingRebalance:
		if m := g.members[id]; m != nil && m.joinCh != nil {
			return true
		}
		waiting := 0
		for _, m := range g.members {
			if m.joinCh != nil {
				waiting++
			}
		}
		return waiting < limit
	case stateCompletingRebalance, stateStable:
		return g.members[id] != nil || len(g.members) < limit
	}
	return true
}

// overCapacity reports whether a classic group has more members than
// group.max.size allows (the setting was lowered): a group loaded so is
// rebalanced at once, as Kafka's onLoaded does, so the members over the
// limit are turned away when they rejoin.
func (g *group) overCapacity() bool {
	return g.env.maxSize > 0 && len(g.members) > g.env.maxSize
}
