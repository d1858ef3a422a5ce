package server

import (
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/strata-io/strata/internal/controller"
	"github.com/strata-io/strata/internal/meta"
)

// Readiness of a cluster node (docs/cluster.md "Readiness"): a node that
// has registered is ready once every partition it holds a replica of has
// the leader the controller can give it now. Right after a restart the
// partitions this node led are still named with its previous
// incarnation's election (meta.PartitionState.LedByEarlierIncarnation) or
// have no leader, until the active controller elects again (at once for
// a one-node cluster); until then a client would get LEADER_NOT_AVAILABLE
// or NOT_LEADER_OR_FOLLOWER from a node /readyz called ready. Kafka's
// broker likewise reaches RUNNING only once the controller has unfenced
// it (BrokerLifecycleManager), which is when the controller elects it
// leader of its partitions (ReplicationControlManager.handleBrokerUnfenced).
//
// A partition no live replica can lead (its eligible replicas are on
// brokers still down) does not hold readiness back: the node could wait
// forever for brokers that an orchestrator starts only once this one is
// ready. It is counted as offline in /readyz's detail.
//
// Readiness is a start gate: once reached it stays (a later failover of
// another broker's partitions does not take this node out of service).

// leaderCounts is the readiness state of this node's partitions.
type leaderCounts struct {
	total   int // partitions this node holds a replica of
	waiting int // with an election to come, or led here but not applied yet
	offline int // no live replica can lead them now
}

// clusterLeaders counts this node's partitions by leadership, on the
// node's current view.
func (s *Server) clusterLeaders(c *cluster) leaderCounts {
	var n leaderCounts
	v := c.cache.View()
	if v == nil {
		return leaderCounts{waiting: 1}
	}
	me := s.broker.NodeID()
	applied := c.applied.Load() >= v.Rev
	var live *controller.State
	for _, name := range v.TopicNames() {
		t := v.Topics[name]
		if t.Deleting {
			continue
		}
		var pol *controller.Policy
		for _, p := range v.Parts[t.ID] {
			st := p.State
			if p.ModRevision == 0 || !slices.Contains(st.Replicas, me) {
				continue
			}
			n.total++
			if b := v.Brokers[st.Leader]; st.Leader != meta.NoLeader && b != nil && !st.LedByEarlierIncarnation(st.Leader, b.Epoch) {
				if st.Leader == me && !applied {
					n.waiting++ // elected here; the local replica does not lead yet
				}
				continue
			}
			if live == nil {
				live = controller.BrokersFromView(v)
			}
			if pol == nil {
				p := s.policy(t)
				pol = &p
			}
			if live.NextLeader(st, *pol) == meta.NoLeader {
				n.offline++
			} else {
				n.waiting++
			}
		}
	}
	return n
}

// leadersReady reports whether the node's partitions have their leaders
// (always true without a cluster); once true it stays true.
func (s *Server) leadersReady() bool {
	if s.leadersSeen.Load() {
		return true
	}
	c := s.cluster
	if c == nil || c.cache == nil {
		return true
	}
	if s.clusterLeaders(c).waiting > 0 {
		return false
	}
	s.leadersSeen.Store(true)
	return true
}

// leadersDetail is /readyz's detail while the node's partitions wait for
// their leaders.
func (s *Server) leadersDetail() string {
	c := s.cluster
	if c == nil || c.cache == nil {
		return ""
	}
	n := s.clusterLeaders(c)
	d := fmt.Sprintf("waiting for leader elections: %d of the %d partitions this node holds have no leader yet", n.waiting, n.total)
	if n.offline > 0 {
		d += fmt.Sprintf(" (%d more are offline: no live replica can lead them)", n.offline)
	}
	return d
}

// freeStartMemory returns the start's transient heap to the operating
// system the first time the node reports ready (Ready, which /readyz
// asks). Loading and recovering 10,000 partitions and applying their first
// elections leave about twice the live heap idle in the process (issue 18:
// RSS 175-194 MB after a start with a 48 MB live heap), which the Go
// runtime's background scavenger gives back only slowly and only down to
// about the next GC goal; one forced collection and release then
// (debug.FreeOSMemory, tens of ms once) takes RSS back to the live heap and
// the binary. It runs in the caller, once: the first ready answer comes
// that much later. A node nobody asks whether it is ready keeps the idle
// heap until the scavenger returns it.
//
// The metadata store's backend map is released at the same moment
// (etcdnode.Node.ReleaseBackendPages: etcd reads its whole file in at
// start).
func (s *Server) freeStartMemory() {
	if s.startFreed.CompareAndSwap(false, true) {
		debug.FreeOSMemory()
		if c := s.cluster; c != nil && c.node != nil {
			c.node.ReleaseBackendPages()
		}
	}
}
