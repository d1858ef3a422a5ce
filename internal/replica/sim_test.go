package replica

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/controller"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/storage"
)

// The simulated cluster of the transcripts: one partition on a few
// replicas, each with an in-memory log (records, fsynced prefix, leader
// epoch history, high watermark), driven by the package's Leader and
// follower functions. The "quorum" stands for the partition's metadata key
// and the controller: ISR changes are compare-and-sets on it, and when a
// broker is fenced or returns it reconciles as internal/controller does
// (leave the ISR, join the ELR below min.insync.replicas, elect ISR ->
// ELR -> unclean when allowed; KafkaReplication.tla ControllerShrinkIsr /
// ControllerElectLeader). Metadata reaches every running, connected
// replica at once, as in the TLA+ model; a paused replica misses it.
//
// After every command the invariants are checked and any violation is
// printed (so a transcript that shows one documents a bug the old rule
// had):
//   - every record acknowledged to an acks=all producer is in the true
//     leader's log at its offset;
//   - every record that was ever below a true leader's high watermark
//     (visible to consumers) is still in the true leader's log at its
//     offset (KafkaReplication.tla StrongIsr, as consumers see it).

type entry struct {
	id    string
	epoch int32
}

type mlog struct {
	entries []entry
	durable int
	epochs  []storage.EpochEntry
	hw      int64
}

func (m *mlog) end() int64 { return int64(len(m.entries)) }

func (m *mlog) local() Local {
	return Local{End: m.end(), Durable: int64(m.durable), Start: 0}
}

// assign is storage's epoch cache rule: only a newer epoch is added.
func (m *mlog) assign(epoch int32, off int64) {
	if n := len(m.epochs); n > 0 && epoch <= m.epochs[n-1].Epoch {
		return
	}
	m.epochs = append(m.epochs, storage.EpochEntry{Epoch: epoch, StartOffset: off})
}

func (m *mlog) lookup(epoch int32) (int32, int64) {
	return storage.EndOffsetFor(m.epochs, epoch, m.end())
}

func (m *mlog) latestEpoch() int32 {
	if len(m.epochs) == 0 {
		return NoEpoch
	}
	return m.epochs[len(m.epochs)-1].Epoch
}

func (m *mlog) truncate(off int64) {
	if off >= m.end() {
		return
	}
	m.entries = m.entries[:off]
	m.durable = min(m.durable, int(off))
	m.hw = min(m.hw, off)
	m.epochs = slices.DeleteFunc(m.epochs, func(e storage.EpochEntry) bool { return e.StartOffset >= off })
}

func (m *mlog) String() string {
	var b strings.Builder
	b.WriteString("[")
	for i, e := range m.entries {
		if i > 0 {
			b.WriteString(" ")
		}
		if i == m.durable {
			b.WriteString("| ")
		}
		fmt.Fprintf(&b, "%s@%d", e.id, e.epoch)
	}
	if m.durable == len(m.entries) && len(m.entries) > 0 {
		b.WriteString(" |")
	}
	b.WriteString("]")
	return b.String()
}

type node struct {
	id     int32
	up     bool
	paused bool
	// stale: running but not yet given the metadata published while it
	// was paused (a zombie).
	stale bool
	// unclean: its last stop lost unsynced bytes (power cut).
	unclean bool
	epoch   int64 // broker epoch of its registration
	log     mlog
	// seen is the partition state this node last received.
	seen State
	// leader is set while this node believes it leads.
	leader *Leader
	// leaderHW is the high watermark of the last fetch response.
	leaderHW int64
}

type pendingAck struct {
	node        int32
	first, last int64
	ids         []string
}

type heldChange struct {
	n  *node
	ch *IsrChange
}

type cluster struct {
	held    []heldChange
	nodes   map[int32]*node
	ids     []int32
	q       meta.PartitionState // the partition's metadata key
	rev     int64               // its mod revision
	minISR  int
	unclean bool
	durable bool
	naive   bool // pre-KIP-101: a follower truncates to its high watermark on leader change
	// pipelined: followers fetch from their log end at any time and
	// report their fsynced end apart (DurableEndTag, PlanFetch).
	pipelined bool
	lagMs     int64
	now       int64
	nextRec   int
	nextEpo   int64
	acks      []pendingAck
	acked     map[int64]string
	visible   map[int64]string
	reported  map[string]bool
}

func newCluster() *cluster { return &cluster{nodes: map[int32]*node{}} }

func (c *cluster) run(t *testing.T, line string) string {
	t.Helper()
	f := strings.Fields(line)
	args := map[string]string{}
	var pos []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	var out []string
	say := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	switch f[0] {
	case "init":
		c.init(t, args)
		say("%s", c.quorumString())
	case "produce":
		c.produce(t, args, say)
	case "sync":
		for _, id := range c.targets(t, pos) {
			n := c.nodes[id]
			n.log.durable = len(n.log.entries)
			c.localChanged(n, say)
		}
	case "fetch":
		times := 1
		if v, ok := args["times"]; ok {
			times = atoi(t, v)
		}
		for i := 0; i < times; i++ {
			for _, id := range c.targets(t, pos) {
				n := c.nodes[id]
				epoch := n.epoch
				if v, ok := args["broker-epoch"]; ok {
					epoch = int64(atoi(t, v)) // a delayed request of an earlier incarnation
				}
				c.fetch(n, epoch, say)
			}
		}
	case "tick":
		c.now += int64(atoi(t, pos[0]))
		for _, id := range c.ids {
			n := c.nodes[id]
			if n.up && !n.paused && n.leader != nil {
				if ch := n.leader.Tick(c.now); ch != nil {
					if args["hold"] == "true" {
						say("%d: proposes %s", n.id, ch)
						c.held = append(c.held, heldChange{n, ch})
						continue
					}
					c.alter(n, ch, say)
				}
			}
		}
	case "commit":
		// The held ISR changes reach the metadata store now.
		held := c.held
		c.held = nil
		for _, h := range held {
			c.alter(h.n, h.ch, say)
		}
	case "stop":
		// The process dies; its lease expires and the controller reacts.
		// power=true: the machine lost power, unsynced records are gone.
		for _, id := range c.targets(t, pos) {
			n := c.nodes[id]
			n.up, n.leader = false, nil
			n.unclean = args["power"] == "true"
			if n.unclean {
				n.log.entries = n.log.entries[:n.log.durable]
				n.log.hw = min(n.log.hw, n.log.end())
				n.log.epochs = slices.DeleteFunc(n.log.epochs, func(e storage.EpochEntry) bool { return e.StartOffset >= n.log.end() })
			}
			say("%d: stopped, log %s", id, n.log.String())
		}
		c.reconcile(say)
	case "restart":
		// The process restarts within its session: the controller sees
		// no change, it re-registers with a new broker epoch and learns
		// the metadata afresh.
		for _, id := range c.targets(t, pos) {
			n := c.nodes[id]
			n.leader = nil
			c.nextEpo++
			n.epoch = c.nextEpo
			n.seen = State{Leader: -1, LeaderEpoch: -1, PartitionEpoch: -1}
			say("%d: restarted, log %s", id, n.log.String())
			c.refreshBrokers()
			c.deliverTo(n, say)
		}
	case "pause":
		// A zombie: it keeps its state but misses metadata; its lease
		// expires and the controller reacts.
		for _, id := range c.targets(t, pos) {
			c.nodes[id].paused = true
		}
		c.reconcile(say)
	case "resume":
		// It runs again and registers anew (a new broker epoch), but acts
		// on what it saw before the pause until deliver.
		for _, id := range c.targets(t, pos) {
			n := c.nodes[id]
			n.paused, n.stale = false, true
			c.nextEpo++
			n.epoch = c.nextEpo
		}
		c.refreshBrokers()
		c.reconcile(say)
	case "deliver":
		for _, id := range c.targets(t, pos) {
			n := c.nodes[id]
			n.stale = false
			c.deliverTo(n, say)
		}
	case "start":
		for _, id := range c.targets(t, pos) {
			n := c.nodes[id]
			n.up, n.paused, n.stale, n.leader = true, false, false, nil
			c.nextEpo++
			n.epoch = c.nextEpo
			n.seen = State{Leader: -1, LeaderEpoch: -1, PartitionEpoch: -1}
			say("%d: started, log %s", id, n.log.String())
		}
		if args["unseen"] != "true" {
			c.refreshBrokers()
			c.reconcile(say)
		}
		for _, id := range c.targets(t, pos) {
			c.deliverTo(c.nodes[id], say)
		}
	case "refresh":
		// The leaders' metadata catches up with the registrations.
		c.refreshBrokers()
		c.reconcile(say)
	case "elect":
		// A controller-initiated election of a given ISR member
		// (preferred leader election; KafkaReplication.tla
		// ControllerElectLeader).
		id := int32(atoi(t, pos[0]))
		if !slices.Contains(c.q.ISR, id) || !c.live(id) {
			say("elect %d refused: not a live ISR member", id)
			break
		}
		c.q.Leader = id
		c.q.LeaderEpoch++
		c.q.PartitionEpoch++
		c.rev++
		say("%s", c.quorumString())
		c.deliver(say)
	case "status":
		for _, id := range c.ids {
			say("%s", c.nodeString(c.nodes[id]))
		}
		say("%s", c.quorumString())
	default:
		t.Fatalf("unknown command %q", f[0])
	}
	c.settleAcks(say)
	c.check(say)
	return strings.Join(out, "\n")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

func (c *cluster) targets(t *testing.T, pos []string) []int32 {
	t.Helper()
	if len(pos) == 1 && pos[0] == "all" {
		var out []int32
		for _, id := range c.ids {
			if c.nodes[id].up {
				out = append(out, id)
			}
		}
		return out
	}
	var out []int32
	for _, p := range pos {
		id := int32(atoi(t, p))
		if c.nodes[id] == nil {
			t.Fatalf("no replica %d", id)
		}
		out = append(out, id)
	}
	return out
}

func (c *cluster) init(t *testing.T, args map[string]string) {
	*c = *newCluster() // a new scenario
	for _, s := range strings.Split(args["replicas"], ",") {
		id := int32(atoi(t, s))
		c.nextEpo++
		c.nodes[id] = &node{id: id, up: true, epoch: c.nextEpo}
		c.ids = append(c.ids, id)
	}
	c.minISR = 1
	if v, ok := args["min-isr"]; ok {
		c.minISR = atoi(t, v)
	}
	c.durable = args["durable"] != "false"
	c.unclean = args["unclean"] == "true"
	c.naive = args["truncate"] == "hw"
	c.pipelined = args["pipeline"] == "true"
	c.lagMs = 30000
	if v, ok := args["lag"]; ok {
		c.lagMs = int64(atoi(t, v))
	}
	c.acked, c.visible, c.reported = map[int64]string{}, map[int64]string{}, map[string]bool{}
	c.q = meta.PartitionState{Leader: c.ids[0], Replicas: slices.Clone(c.ids), ISR: slices.Clone(c.ids)}
	c.rev = 1
	for _, id := range c.ids {
		n := c.nodes[id]
		n.seen = State{Leader: -1, LeaderEpoch: -1, PartitionEpoch: -1}
		c.deliverTo(n, func(string, ...any) {})
	}
}

func (c *cluster) live(id int32) bool {
	n := c.nodes[id]
	return n.up && !n.paused
}

func (c *cluster) brokers() map[int32]Broker {
	b := map[int32]Broker{}
	for _, id := range c.ids {
		if c.live(id) {
			b[id] = Broker{Epoch: c.nodes[id].epoch}
		}
	}
	return b
}

func (c *cluster) cfg(id int32) Config {
	return Config{Local: id, BrokerEpoch: c.nodes[id].epoch, MinISR: c.minISR, LagTimeMaxMs: c.lagMs, Durable: c.durable}
}

// deliver sends the quorum state to every running replica that follows
// the metadata.
func (c *cluster) deliver(say func(string, ...any)) {
	for _, id := range c.ids {
		if c.live(id) && !c.nodes[id].stale {
			c.deliverTo(c.nodes[id], say)
		}
	}
}

// refreshBrokers gives every leader the registered brokers (a broker
// registering is a metadata change too).
func (c *cluster) refreshBrokers() {
	for _, id := range c.ids {
		if n := c.nodes[id]; c.live(id) && !n.stale && n.leader != nil {
			n.leader.SetBrokers(c.brokers())
		}
	}
}

// deliverTo is the replica's reaction to new metadata (Kafka's
// makeLeader / makeFollower).
func (c *cluster) deliverTo(n *node, say func(string, ...any)) {
	st := FromMeta(c.q)
	if n.leader != nil {
		n.leader.SetBrokers(c.brokers())
	}
	if n.seen.LeaderEpoch == st.LeaderEpoch && n.seen.PartitionEpoch == st.PartitionEpoch && (n.leader != nil) == (st.Leader == n.id) {
		return // already known
	}
	if st.Leader == n.id {
		if n.leader != nil {
			_, newEpoch, err := n.leader.Update(st, c.now)
			if err == nil {
				if newEpoch {
					n.log.assign(st.LeaderEpoch, n.leader.EpochStart())
				}
				n.seen = st
				c.localChanged(n, say)
				return
			}
		}
		// Become leader: the epoch starts at the log end (KIP-279).
		n.log.assign(st.LeaderEpoch, n.log.end())
		l, err := NewLeader(c.cfg(n.id), st, c.brokers(), n.log.local(), n.log.hw, c.now)
		if err != nil {
			say("%d: %v", n.id, err)
			return
		}
		n.leader = l
		n.seen = st
		say("%d: leads at epoch %d from offset %d, hw %d", n.id, st.LeaderEpoch, l.EpochStart(), l.HighWatermark())
		c.localChanged(n, say)
		return
	}
	wasLeader := n.leader != nil
	n.leader = nil
	if st.LeaderEpoch != n.seen.LeaderEpoch && c.naive && n.log.hw < n.log.end() {
		// Before KIP-101 a new follower cut its log at its high
		// watermark.
		say("%d: truncates to its high watermark %d (pre-KIP-101)", n.id, n.log.hw)
		n.log.truncate(n.log.hw)
	}
	if wasLeader {
		say("%d: follows %d at epoch %d", n.id, st.Leader, st.LeaderEpoch)
	}
	n.seen = st
}

// localChanged tells a leader about its own log, or recomputes a
// follower's high watermark after an fsync.
func (c *cluster) localChanged(n *node, say func(string, ...any)) {
	if n.leader != nil {
		n.leader.LocalChanged(n.log.local(), c.now)
		n.log.hw = n.leader.HighWatermark()
		return
	}
	n.log.hw = FollowerHighWatermark(n.leaderHW, n.log.local(), c.durable)
}

func (c *cluster) produce(t *testing.T, args map[string]string, say func(string, ...any)) {
	id := c.q.Leader
	if v, ok := args["on"]; ok {
		id = int32(atoi(t, v))
	}
	count := 1
	if v, ok := args["n"]; ok {
		count = atoi(t, v)
	}
	acks := int16(-1)
	if args["acks"] == "1" {
		acks = 1
	}
	n := c.nodes[id]
	if id < 0 || n == nil || !c.live(id) || n.leader == nil {
		say("produce to %d: NOT_LEADER_OR_FOLLOWER", id)
		return
	}
	if err := n.leader.CheckAppend(acks); err != nil {
		say("produce to %d: %s", id, code(err))
		return
	}
	first := n.log.end()
	var ids []string
	for i := 0; i < count; i++ {
		c.nextRec++
		rid := fmt.Sprintf("m%d", c.nextRec)
		ids = append(ids, rid)
		n.log.entries = append(n.log.entries, entry{id: rid, epoch: n.seen.LeaderEpoch})
	}
	last := n.log.end() - 1
	say("%d: appended %s at %d-%d (epoch %d, acks=%d)", id, strings.Join(ids, " "), first, last, n.seen.LeaderEpoch, acks)
	if acks == -1 {
		c.acks = append(c.acks, pendingAck{node: id, first: first, last: last, ids: ids})
	}
	c.localChanged(n, say)
}

// fetch is one Fetch round trip of follower n to the replica it believes
// leads.
func (c *cluster) fetch(n *node, brokerEpoch int64, say func(string, ...any)) {
	if !c.live(n.id) || n.leader != nil {
		return
	}
	lid := n.seen.Leader
	if lid < 0 {
		say("%d: no leader to fetch from", n.id)
		return
	}
	ln := c.nodes[lid]
	off, ready := FetchPosition(n.log.local(), c.durable)
	durable := NoOffset
	if c.pipelined {
		// The leader's strictest view of the pipelining rule: any fetch
		// may come while the follower's fsync is outstanding.
		off, ready, durable = n.log.end(), true, int64(n.log.durable)
	}
	if !ready {
		say("%d: waits for its fsync before fetching (durable end %d < end %d)", n.id, off, n.log.end())
		return
	}
	lastEpoch := n.log.latestEpoch()
	if c.naive {
		lastEpoch = NoEpoch // fetches carried no epoch before KIP-101
	}
	if !c.live(lid) {
		say("%d: fetch from %d at %d: no answer", n.id, lid, off)
		return
	}
	if ln.leader == nil {
		say("%d: fetch from %d at %d: NOT_LEADER_OR_FOLLOWER", n.id, lid, off)
		return
	}
	if err := CheckLeaderEpoch(n.seen.LeaderEpoch, ln.seen.LeaderEpoch); err != nil {
		say("%d: fetch from %d at %d epoch %d: %s", n.id, lid, off, n.seen.LeaderEpoch, code(err))
		return
	}
	local := ln.log.local()
	hw := ln.leader.HighWatermark() // Kafka answers the high watermark read before the fetch is recorded
	div, err := Divergence(lastEpoch, off, local.Start, ln.log.lookup)
	if err != nil {
		// OFFSET_OUT_OF_RANGE: ask the leader for its start and end.
		r := OutOfRange(n.log.end(), local.Start, local.End)
		say("%d: fetch from %d at %d (last epoch %d): %s; resets to %d", n.id, lid, off, lastEpoch, code(err), r.FetchOffset)
		if r.TruncateTo >= 0 {
			n.log.truncate(r.TruncateTo)
		}
		return
	}
	if div != nil {
		tr := Truncate(*div, n.log.end(), n.log.lookup)
		more := ""
		if !tr.Complete {
			more = " and asks again"
		}
		say("%d: fetch from %d at %d (last epoch %d): diverging epoch %d ends at %d; truncates to %d%s", n.id, lid, off, lastEpoch, div.Epoch, div.EndOffset, tr.Offset, more)
		n.log.truncate(tr.Offset)
		return
	}
	res, err := ln.leader.FollowerFetchDurable(n.id, brokerEpoch, off, durable, 0, local, c.now)
	if err != nil {
		say("%d: fetch from %d at %d: %s", n.id, lid, off, code(err))
		return
	}
	got := ln.log.entries[off:]
	for i, e := range got {
		n.log.assign(e.epoch, off+int64(i))
		n.log.entries = append(n.log.entries, e)
	}
	n.leaderHW = hw
	n.log.hw = FollowerHighWatermark(hw, n.log.local(), c.durable)
	ids := make([]string, len(got))
	for i, e := range got {
		ids[i] = e.id
	}
	if len(got) > 0 {
		say("%d: fetched %s from %d at %d, hw %d", n.id, strings.Join(ids, " "), lid, off, n.log.hw)
	} else {
		say("%d: fetched nothing from %d at %d, hw %d", n.id, lid, off, n.log.hw)
	}
	ln.log.hw = ln.leader.HighWatermark()
	if res.HWChanged {
		say("%d: hw %d", lid, ln.log.hw)
	}
	if res.Change != nil {
		c.alter(ln, res.Change, say)
	}
}

// alter commits an ISR change as the shell does: AlterPartition on the
// state read, written by compare-and-set on its mod revision and (KIP-903)
// on the registrations of the added replicas still being the incarnations
// that fetched.
func (c *cluster) alter(n *node, ch *IsrChange, say func(string, ...any)) {
	ns, err := AlterPartition(c.q, n.id, ch, c.minISR)
	if err == nil && (!c.live(n.id) || n.epoch != ch.LeaderBrokerEpoch) {
		err = fmt.Errorf("leader %d is no longer at broker epoch %d", n.id, ch.LeaderBrokerEpoch)
	}
	for id, e := range ch.AddedEpochs {
		if err == nil && (!c.live(id) || c.nodes[id].epoch != e) {
			err = fmt.Errorf("broker %d is no longer at epoch %d", id, e)
		}
	}
	if err != nil {
		say("%d: %s rejected (%s)", n.id, ch, code(err))
		if n.leader != nil {
			n.leader.AlterFailed(ch)
		}
		return
	}
	c.q = ns
	c.rev++
	say("%d: %s committed; %s", n.id, ch, c.quorumString())
	c.deliver(say)
}

// reconcile is the controller's reaction to brokers leaving and returning
// (internal/controller Reconcile): fenced brokers leave the ISR, joining
// the ELR below min.insync.replicas; a leader is elected from the live
// ISR, else the live ELR, else the last known ELR, else (unclean allowed)
// any live replica; a broker that restarted uncleanly without fsynced
// acks leaves the ELR.
func (c *cluster) reconcile(say func(string, ...any)) {
	st := &controller.State{Brokers: map[int32]controller.BrokerInfo{}, Topics: map[string]*controller.TopicInfo{}}
	for _, id := range c.ids {
		if c.live(id) {
			st.Brokers[id] = controller.BrokerInfo{ID: id, UncleanShutdown: c.nodes[id].unclean && !c.durable}
		}
	}
	tp := meta.TopicPartition{TopicID: "t", Partition: 0}
	st.Topics["t"] = &controller.TopicInfo{Name: "t", ID: "t", Policy: controller.Policy{MinISR: c.minISR, Unclean: c.unclean},
		Parts: []meta.Partition{{TopicPartition: tp, State: c.q.Clone(), ModRevision: c.rev}}}
	for _, d := range st.Reconcile() {
		if d.Expect != c.rev {
			continue
		}
		c.q = d.New
		c.rev++
		say("controller: %s; %s", d.Reason, c.quorumString())
		c.deliver(say)
	}
}

// settleAcks answers the acks=all produces that can be answered.
func (c *cluster) settleAcks(say func(string, ...any)) {
	kept := c.acks[:0]
	for _, a := range c.acks {
		n := c.nodes[a.node]
		what := fmt.Sprintf("ack %s (offsets %d-%d)", strings.Join(a.ids, " "), a.first, a.last)
		if !c.live(a.node) || n.leader == nil {
			say("%s: NOT_LEADER_OR_FOLLOWER", what)
			continue
		}
		done, err := n.leader.Acked(a.last + 1)
		switch {
		case !done:
			kept = append(kept, a)
		case err != nil:
			say("%s: %s", what, code(err))
		default:
			say("%s: ok", what)
			for i, id := range a.ids {
				c.acked[a.first+int64(i)] = id
			}
		}
	}
	c.acks = kept
}

// check records what the true leader makes visible and reports any
// acknowledged or visible record the true leader does not hold.
func (c *cluster) check(say func(string, ...any)) {
	lid := c.q.Leader
	if lid < 0 || !c.live(lid) {
		return
	}
	n := c.nodes[lid]
	if n.leader == nil || n.seen.LeaderEpoch != c.q.LeaderEpoch {
		return
	}
	violation := func(kind string, off int64, id string) {
		key := fmt.Sprintf("%s %d %s %d", kind, off, id, c.q.LeaderEpoch)
		if c.reported[key] {
			return
		}
		c.reported[key] = true
		have := "nothing"
		if off < n.log.end() {
			have = n.log.entries[off].id
		}
		say("VIOLATION: %s record %s at offset %d is lost: leader %d has %s there", kind, id, off, lid, have)
	}
	for _, off := range sortedKeys(c.acked) {
		if off >= n.log.end() || n.log.entries[off].id != c.acked[off] {
			violation("acknowledged", off, c.acked[off])
		}
	}
	for _, off := range sortedKeys(c.visible) {
		if off >= n.log.end() || n.log.entries[off].id != c.visible[off] {
			violation("visible", off, c.visible[off])
		}
	}
	for _, r := range c.q.ISR {
		m := c.nodes[r]
		if r == lid || !m.up {
			continue
		}
		for off := int64(0); off < n.leader.HighWatermark() && off < m.log.end(); off++ {
			if m.log.entries[off].id != n.log.entries[off].id {
				key := fmt.Sprintf("diverge %d %d", r, off)
				if !c.reported[key] {
					c.reported[key] = true
					say("VIOLATION: ISR member %d has %s at offset %d below the high watermark, leader %d has %s", r, m.log.entries[off].id, off, lid, n.log.entries[off].id)
				}
				break
			}
		}
	}
	for off := int64(0); off < n.leader.HighWatermark() && off < n.log.end(); off++ {
		if _, ok := c.visible[off]; !ok {
			c.visible[off] = n.log.entries[off].id
		}
	}
}

func sortedKeys(m map[int64]string) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func code(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

func (c *cluster) quorumString() string {
	s := fmt.Sprintf("quorum: leader=%d epoch=%d pepoch=%d isr=%v", c.q.Leader, c.q.LeaderEpoch, c.q.PartitionEpoch, c.q.ISR)
	if len(c.q.ELR) > 0 {
		s += fmt.Sprintf(" elr=%v", c.q.ELR)
	}
	if len(c.q.LastKnownELR) > 0 {
		s += fmt.Sprintf(" last_known_elr=%v", c.q.LastKnownELR)
	}
	if c.q.LeaderRecovery == meta.Recovering {
		s += " recovering"
	}
	return s
}

func (c *cluster) nodeString(n *node) string {
	var role string
	switch {
	case !n.up:
		role = "down"
	case n.leader != nil:
		role = fmt.Sprintf("leader epoch=%d", n.seen.LeaderEpoch)
	default:
		role = fmt.Sprintf("follower of %d epoch=%d", n.seen.Leader, n.seen.LeaderEpoch)
	}
	if n.paused {
		role += " (paused)"
	}
	return fmt.Sprintf("%d: %s hw=%d log=%s", n.id, role, n.log.hw, n.log.String())
}
