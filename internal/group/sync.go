package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// syncParams is a SyncGroup request.
type syncParams struct {
	memberID     string
	instanceID   *string
	generation   int32
	protocolType *string
	protocol     *string
	assignments  map[string][]byte
}

// validateMember is Kafka's validateCurrentMember: the member exists and,
// for static members, the instance id still maps to it.
func (g *group) validateMember(memberID string, instanceID *string) (*member, int16) {
	if instanceID != nil {
		id, ok := g.static[*instanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code
		}
		if id != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// sync handles a SyncGroup. It returns an immediate result, or a channel to
// wait on; leaderSync is true when the caller must persist the leader's
// assignment (then call finishSync).
func (g *group) sync(p syncParams) (res *syncResult, wait <-chan syncResult, leaderSync bool) {
	if g.state == stateDead {
		return &syncResult{err: kerr.CoordinatorNotAvailable.Code}, nil, false
	}
	m, code := g.validateMember(p.memberID, p.instanceID)
	if code != 0 {
		return &syncResult{err: code}, nil, false
	}
	if p.generation != g.generation {
		return &syncResult{err: kerr.IllegalGeneration.Code}, nil, false
	}
	if (p.protocolType != nil && *p.protocolType != g.protocolType) || (p.protocol != nil && *p.protocol != g.protocol) {
		return &syncResult{err: kerr.InconsistentGroupProtocol.Code}, nil, false
	}
	switch g.state {
	case statePreparingRebalance:
		return &syncResult{err: kerr.RebalanceInProgress.Code}, nil, false
	case stateCompletingRebalance:
		if m.syncCh != nil {
			m.syncCh <- syncResult{err: kerr.RebalanceInProgress.Code}
		}
		m.syncCh = make(chan syncResult, 1)
		g.heartbeat(m)
		g.synced(m.id)
		if m.id == g.leader {
			for id, mm := range g.members {
				mm.assignment = p.assignments[id]
			}
			return nil, m.syncCh, true
		}
		return nil, m.syncCh, false
	case stateStable:
		g.heartbeat(m)
		g.synced(m.id)
		if g.syncingGen == g.generation {
			// The assignment is in the log, not yet durable: answer
			// once it is (finishSync).
			if m.syncCh != nil {
				m.syncCh <- syncResult{err: kerr.RebalanceInProgress.Code}
			}
			m.syncCh = make(chan syncResult, 1)
			return nil, m.syncCh, false
		}
		return &syncResult{assignment: m.assignment}, nil, false
	default:
		return &syncResult{err: kerr.UnknownMemberID.Code}, nil, false
	}
}

// appendedAssignment moves the group of generation to Stable once the
// leader's assignment record is appended to the log (nothing when the group
// moved on meanwhile). Kafka's group becomes Stable when that record is
// committed, which on Kafka's single replica is the append itself (no
// fsync: the high watermark follows the log end); Strata also waits for the
// fsync, so the state follows the log order as Kafka's does and only the
// SyncGroup answers wait for the fsync (finishSync). A member that joins
// meanwhile therefore finds the group Stable, as it would on Kafka, and the
// members learn of the new rebalance from their heartbeats; it no longer
// fails the generation's SyncGroups for as long as an fsync takes.
func (g *group) appendedAssignment(generation int32) {
	if g.state != stateCompletingRebalance || g.generation != generation {
		return
	}
	g.setState(stateStable)
	g.syncingGen = generation
}

// finishSync answers the SyncGroups of generation once the leader's
// assignment is durable (nothing when the group moved on meanwhile: they
// were answered then).
func (g *group) finishSync(generation int32) {
	if g.syncingGen != generation || g.generation != generation {
		return
	}
	g.syncingGen = 0
	for _, m := range g.members {
		if m.syncCh != nil {
			m.syncCh <- syncResult{assignment: m.assignment}
			m.syncCh = nil
		}
	}
}

// failSyncs clears the assignment and answers every waiting SyncGroup.
func (g *group) failSyncs(code int16) {
	for _, m := range g.members {
		m.assignment = nil
		if m.syncCh != nil {
			m.syncCh <- syncResult{err: code}
			m.syncCh = nil
		}
	}
}

// heartbeatReq handles a Heartbeat.
func (g *group) heartbeatReq(memberID string, instanceID *string, generation int32) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	m, code := g.validateMember(memberID, instanceID)
	if code != 0 {
		return code
	}
	if g.state == stateEmpty {
		return kerr.UnknownMemberID.Code
	}
	// Kafka's GroupCoordinator.validateHeartbeat checks the generation
	// before the state: a heartbeat of another generation is
	// ILLEGAL_GENERATION in every state, CompletingRebalance and
	// PreparingRebalance included (and it does not keep the member alive).
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	g.heartbeat(m)
	if g.state == statePreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0 // Stable, or CompletingRebalance (members may heartbeat once they have their JoinGroup answer)
}

// leaveMember identifies one member leaving.
type leaveMember struct {
	memberID   string
	instanceID *string
}

// leave handles a LeaveGroup: per-member error codes, then one rebalance.
func (g *group) leave(ls []leaveMember) []int16 {
	codes := make([]int16, len(ls))
	var gone []*member
	pendingGone := false
	for i, l := range ls {
		if l.instanceID != nil {
			id, ok := g.static[*l.instanceID]
			switch {
			case !ok:
				codes[i] = kerr.UnknownMemberID.Code
			case l.memberID != "" && l.memberID != id:
				codes[i] = kerr.FencedInstanceID.Code
			default:
				if m := g.members[id]; m != nil {
					gone = append(gone, m)
				}
			}
			continue
		}
		if t, ok := g.pending[l.memberID]; ok {
			stopTimer(t)
			delete(g.pending, l.memberID)
			pendingGone = true
			continue
		}
		m := g.members[l.memberID]
		if m == nil {
			codes[i] = kerr.UnknownMemberID.Code
			continue
		}
		gone = append(gone, m)
	}
	if len(gone) > 0 {
		g.removeMembers(uniqueMembers(gone))
	} else if pendingGone {
		g.maybeCompleteJoin()
	}
	return codes
}

func uniqueMembers(ms []*member) []*member {
	seen := map[*member]bool{}
	out := ms[:0]
	for _, m := range ms {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}
