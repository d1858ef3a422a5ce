package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// validateCommit is Kafka's OffsetCommit group check. It returns 0 when the
// commit may proceed.
func (g *group) validateCommit(version int16, memberID string, instanceID *string, generation int32) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if cg := g.consumer; cg != nil {
		// KIP-848 group (Kafka's ConsumerGroup.validateOffsetCommit): the
		// generation field carries the member epoch; -1 commits to a group
		// without members (an admin client, a consumer without group
		// management); a member must use OffsetCommit v9+.
		if generation < 0 && len(cg.members) == 0 {
			return 0
		}
		m := cg.members[memberID]
		if m == nil {
			return kerr.UnknownMemberID.Code
		}
		if version < 9 {
			return kerr.UnsupportedVersion.Code
		}
		if generation != m.epoch {
			return kerr.StaleMemberEpoch.Code
		}
		return 0
	}
	if generation < 0 && g.state == stateEmpty {
		// Kafka's ClassicGroup.validateOffsetCommit: generation -1 is an
		// admin client or a consumer without group management, and it may
		// commit to an empty group whatever member id it sends (librdkafka's
		// KIP-848 consumer, using assign(), sends its own generated member
		// id with epoch -1: librdkafka tests 0030, 0051).
		return 0
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		m, code := g.validateMember(memberID, instanceID)
		if code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
		if g.state == stateCompletingRebalance {
			return kerr.RebalanceInProgress.Code
		}
		g.heartbeat(m)
		return 0
	}
	if g.state != stateEmpty {
		// Only members may commit to a group that has members.
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// applyCommit records committed offsets after they are stored; order is
// their position in the log (see offset.order).
func (g *group) applyCommit(offs map[tp]offset, order int64) {
	for k, o := range offs {
		if cur, ok := g.offsets[k]; ok && cur.order > order {
			continue // a later commit of the partition became durable first
		}
		o.order = order
		g.offsets[k] = o
	}
}

// expiredOffsets lists the offsets past offsets.retention.minutes, following
// Kafka (KIP-211, KIP-496): an explicit expire timestamp wins; offsets of a
// group that only commits (no protocol type) expire retention after their
// commit; offsets of an Empty group expire retention after it became Empty;
// offsets of a consumer group for topics no member subscribes to expire
// retention after their commit.
func (g *group) expiredOffsets(now time.Time, retention time.Duration) []tp {
	nowMs := now.UnixMilli()
	ret := retention.Milliseconds()
	var subscribed map[string]bool
	subsKnown := false
	if g.state == stateStable {
		subscribed, subsKnown = g.subscribedTopics()
	}
	var out []tp
	for k, o := range g.offsets {
		var expired bool
		switch {
		case o.expireMs >= 0:
			expired = nowMs >= o.expireMs
		case g.protocolType == "":
			expired = nowMs >= o.commitMs+ret
		case g.state == stateEmpty:
			expired = nowMs >= g.stateTime.UnixMilli()+ret
		case subsKnown && !subscribed[k.topic]:
			expired = nowMs >= o.commitMs+ret
		}
		// An offset with a pending transactional commit stays until the
		// transaction ends (Kafka).
		if expired && !g.hasPending(k) {
			out = append(out, k)
		}
	}
	return out
}

// removable reports whether the group can be dropped entirely: Empty, no
// members, no offsets and no pending transactional offsets left.
func (g *group) removable() bool {
	return g.state == stateEmpty && g.isEmpty() && len(g.offsets) == 0 && len(g.txn) == 0
}

// validateFetch is Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch
// v9+): a KIP-848 member fetching with its member id must be a member at
// that epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); a fetch without
// member id and epoch (an admin client) is not checked, nor one of a
// classic group.
func (g *group) validateFetch(memberID *string, epoch int32) int16 {
	cg := g.consumer
	if cg == nil || (memberID == nil && epoch < 0) {
		return 0
	}
	var m *cmember
	if memberID != nil {
		m = cg.members[*memberID]
	}
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if epoch != m.epoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}
