package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/controller"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/replica"
)

// Endpoints of the simulated network besides the brokers (1..n).
const (
	quorum int32 = 0  // the metadata store and the controller, as one
	client int32 = -1 // the producer
)

// params are one run's settings, drawn from its seed.
type params struct {
	brokers   int
	minISR    int
	durable   bool  // strata.durable.acks
	lagMs     int64 // replica.lag.time.max.ms
	sessionMs int64 // broker.session.timeout.ms
	drop      float64
	dup       float64
	maxDelay  int64   // ms, most messages
	faultRate float64 // probability per nemesis tick (every 250 ms) of a new fault
	faultMs   int64   // simulated time with faults
	quietMs   int64   // simulated time healed, without new produces, before the final check
	// restartKeepsEpoch: a broker restarting within its session keeps its
	// leaderships at the same leader epoch (the controller never sees its
	// registration gone).
	restartKeepsEpoch bool
	// segmentBytes is the replicas' segment.bytes (0: logConfig's 16 KiB).
	// With durable acks off a roll leaves the rolled segment's tail to the
	// syncer's next round, a goroutine outside the simulation's clock: a
	// scenario that needs unsynced records at a chosen instant keeps
	// rolls out with large segments.
	segmentBytes int64
	// checkpointMs is how often a broker writes its log dir's high
	// watermark checkpoint (replica.high.watermark.checkpoint.interval.ms,
	// 5000 by default).
	checkpointMs int64
	// unsyncedPowerCuts: with Kafka's semantics (durable acks off) a
	// follower may lose power too, dropping its unsynced tail (records it
	// had fetched and the high watermark counted). Kafka promises those
	// records survive while another ISR member keeps them, so such a
	// follower must not stay in the ISR when it comes back within its
	// session (KIP-903 per-member broker epochs, meta.PartitionState
	// ISREpochs). The leader is not cut: as the only sure holder of what it
	// acknowledged, its unsynced loss is outside Kafka's promise.
	unsyncedPowerCuts bool
	// legacyLeaders: leaders do not echo replica.DurableEndTag (a broker
	// from before pipelined follower fsyncs), so followers under durable
	// acks fetch only from their fsynced end (replica.PlanFetch without
	// the echo). Otherwise followers pipeline: they fetch from their log
	// end and report their fsynced end apart, and the leader's high
	// watermark counts the reported ends (Leader.FollowerFetchDurable).
	legacyLeaders bool
}

// counts are what one run did.
type counts struct {
	events, msgs, dropped, duplicated              int
	crashes, powerCuts, pauses, cuts, quorumLosses int
	produced, acked, elections, truncations        int
	reads, allCrashes                              int
}

func (c *counts) add(o counts) {
	c.events += o.events
	c.msgs += o.msgs
	c.dropped += o.dropped
	c.duplicated += o.duplicated
	c.crashes += o.crashes
	c.powerCuts += o.powerCuts
	c.pauses += o.pauses
	c.cuts += o.cuts
	c.quorumLosses += o.quorumLosses
	c.produced += o.produced
	c.acked += o.acked
	c.elections += o.elections
	c.truncations += o.truncations
	c.reads += o.reads
	c.allCrashes += o.allCrashes
}

type entry struct {
	id    string
	epoch int32
}

type pendingAck struct {
	req         int
	first, last int64
	ids         []string
}

type node struct {
	id          int32
	up, paused  bool
	incarnation int
	deferred    []func() // events that reached it while paused
	epoch       int64    // broker epoch of its registration (0: none yet)
	registered  bool
	// unclean: a stop lost unsynced records and the broker has not been
	// back in the ISR since (its log may miss acknowledged records); it
	// registers so (KIP-966 unclean shutdown: it leaves the ELR).
	unclean  bool
	log      rlog
	seen     replica.State
	seenRev  int64
	brokers  map[int32]replica.Broker
	leader   *replica.Leader
	leaderHW int64 // of the last fetch response
	lastHW   int64 // the Leader's high watermark last seen (monotone per Leader)
	fetchAt  int64 // when the fetch in flight was sent (-1: none)
	// pipelined and drained are the follower's fetch state
	// (replica.PlanFetch): its leader echoed DurableEndTag at this leader
	// epoch; a no-wait fetch came back empty while an fsync was pending.
	pipelined, drained bool
	alterAt            int64 // when the ISR change in flight was last sent
	acks               []pendingAck
}

type event struct {
	at  int64
	seq uint64
	fn  func()
}

type events []*event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(*event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

type lease struct {
	epoch   int64
	expires int64
	unclean bool
}

// sim is one seeded run.
type sim struct {
	p     params
	r     *rand.Rand
	now   int64
	seq   uint64
	queue events

	nodes map[int32]*node
	ids   []int32

	// The quorum: the partition's metadata key and the registrations.
	qs        meta.PartitionState
	partRev   int64 // the partition key's mod revision
	rev       int64 // the store's revision: every write (registrations too) bumps it
	quorumUp  bool
	leases    map[int32]lease
	nextEpoch int64

	cut map[[2]int32]int // directed paths dropped (a count: faults overlap)

	faulting bool
	nextRec  int
	nextReq  int
	acked    map[int64]string // offset -> record acknowledged there
	visible  map[int64]string // offset -> record once below the true leader's high watermark
	reads    map[int64]string // offset -> record a consumer read there
	maxRead  int64            // the highest offset read
	leaderOf map[int32]int32  // leader epoch -> the broker that led it

	c         counts
	trace     []string // the last lines, for a failure
	fullTrace bool     // keep every line (STRATA_SIM_TRACE)
	hash      uint64
	violation string
}

func newSim(seed uint64, p params) *sim {
	if p.checkpointMs == 0 {
		p.checkpointMs = 5000
	}
	s := &sim{p: p, r: rand.New(rand.NewPCG(seed, 0x5eed)), nodes: map[int32]*node{}, leases: map[int32]lease{},
		cut: map[[2]int32]int{}, acked: map[int64]string{}, visible: map[int64]string{}, reads: map[int64]string{}, leaderOf: map[int32]int32{},
		quorumUp: true, hash: 14695981039346656037}
	for i := 1; i <= p.brokers; i++ {
		id := int32(i)
		s.ids = append(s.ids, id)
		s.nodes[id] = &node{id: id, fetchAt: -1, log: rlog{segBytes: p.segmentBytes}}
	}
	// The partition as CreateTopics leaves it: every replica in the ISR,
	// the first leading at epoch 0.
	s.qs = meta.PartitionState{Leader: s.ids[0], Replicas: slices.Clone(s.ids), ISR: slices.Clone(s.ids)}
	s.rev, s.partRev = 1, 1
	s.leaderOf[0] = s.ids[0]
	for _, id := range s.ids {
		s.start(s.nodes[id])
	}
	s.every(quorum, 0, 100, s.quorumTick)
	s.every(client, 0, 20, s.produce)
	s.every(client, 10, 25, s.consume)
	s.every(quorum, 0, 250, s.nemesis)
	return s
}

// say records a trace line (kept for a failure, hashed for determinism).
func (s *sim) say(format string, args ...any) {
	line := fmt.Sprintf("%6d ", s.now) + fmt.Sprintf(format, args...)
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s", s.hash, line)
	s.hash = h.Sum64()
	s.trace = append(s.trace, line)
	if !s.fullTrace && len(s.trace) > 400 {
		s.trace = s.trace[len(s.trace)-300:]
	}
}

// must fails the run on a storage error (a broken simulated disk).
func (s *sim) must(err error) {
	if err != nil {
		s.fail("storage: %v", err)
	}
}

func (s *sim) fail(format string, args ...any) {
	if s.violation == "" {
		s.violation = fmt.Sprintf("t=%d ms: ", s.now) + fmt.Sprintf(format, args...)
		s.say("VIOLATION: %s", s.violation)
	}
}

func (s *sim) at(t int64, fn func()) {
	s.seq++
	heap.Push(&s.queue, &event{at: t, seq: s.seq, fn: fn})
}

// onNode runs fn at time t on node id's incarnation inc: dropped if that
// incarnation is gone, deferred while the node is paused.
func (s *sim) onNode(t int64, id int32, inc int, fn func()) {
	s.at(t, func() {
		n := s.nodes[id]
		if !n.up || n.incarnation != inc {
			return
		}
		if n.paused {
			n.deferred = append(n.deferred, fn)
			return
		}
		fn()
	})
}

// every runs fn every period ms from first on (a broker's timers belong to
// its incarnation).
func (s *sim) every(who int32, first, period int64, fn func()) {
	if who > 0 {
		n := s.nodes[who]
		inc := n.incarnation
		var tick func()
		tick = func() {
			fn()
			s.onNode(s.now+period, who, inc, tick)
		}
		s.onNode(s.now+first, who, inc, tick)
		return
	}
	var tick func()
	tick = func() {
		fn()
		s.at(s.now+period, tick)
	}
	s.at(s.now+first, tick)
}

// send puts a message from -> to on the simulated network: dropped when
// the path is cut (when sent or when it arrives) or at random, sometimes
// duplicated, delayed at random (so messages overtake each other).
func (s *sim) send(from, to int32, what string, deliver func()) {
	s.c.msgs++
	if s.cut[[2]int32{from, to}] > 0 || s.r.Float64() < s.p.drop {
		s.c.dropped++
		return
	}
	copies := 1
	if s.r.Float64() < s.p.dup {
		copies = 2
		s.c.duplicated++
	}
	for i := 0; i < copies; i++ {
		d := 1 + s.r.Int64N(s.p.maxDelay)
		if s.r.IntN(20) == 0 {
			d += s.r.Int64N(10 * s.p.maxDelay) // a slow path
		}
		arrive := func() {
			if s.cut[[2]int32{from, to}] > 0 {
				s.c.dropped++
				return
			}
			deliver()
		}
		if to > 0 {
			n := s.nodes[to]
			s.at(s.now+d, func() {
				// A message reaches whatever incarnation runs then; a paused
				// process reads it when it resumes.
				if !n.up {
					return
				}
				if n.paused {
					n.deferred = append(n.deferred, arrive)
					return
				}
				arrive()
			})
		} else {
			s.at(s.now+d, func() {
				if to == quorum && !s.quorumUp {
					return // no quorum: nothing is committed or answered
				}
				arrive()
			})
		}
	}
	_ = what
}

// start runs a broker (again): a new incarnation registers with a new
// broker epoch, learns the metadata afresh and runs its timers.
func (s *sim) start(n *node) {
	n.up, n.paused, n.deferred = true, false, nil
	n.incarnation++
	n.leader, n.acks, n.registered, n.fetchAt = nil, nil, false, -1
	n.pipelined, n.drained = false, false
	n.leaderHW, n.lastHW = 0, 0
	if n.log.l == nil { // the first start; a restart opens the log at the crash (rlog.crash)
		s.must(n.log.open())
	}
	n.log.startReplication()
	n.seen = replica.State{Leader: -1, LeaderEpoch: -1, PartitionEpoch: -1}
	n.seenRev = 0
	s.register(n)
	s.every(n.id, 1+s.r.Int64N(50), 50, func() { s.fetch(n) })
	s.every(n.id, 1+s.r.Int64N(100), 20+s.r.Int64N(80), func() { s.fsync(n) })
	s.every(n.id, 1+s.r.Int64N(100), 100, func() { s.leaderTick(n) })
	s.every(n.id, 1+s.r.Int64N(300), s.p.sessionMs/4, func() { s.heartbeat(n) })
	s.every(n.id, 1+s.r.Int64N(s.p.checkpointMs), s.p.checkpointMs, func() { s.must(n.log.checkpoint()) })
	s.say("%d: started (incarnation %d), log %d entries, %d fsynced, high watermark %d", n.id, n.incarnation, n.log.end(), n.log.durable(), n.log.hw())
}

func (s *sim) register(n *node) {
	s.nextEpoch++
	n.epoch = s.nextEpoch
	epoch, unclean, inc := n.epoch, n.unclean, n.incarnation
	s.send(n.id, quorum, "register", func() {
		if old, ok := s.leases[n.id]; ok && old.epoch > epoch {
			return
		} else if ok && old.epoch != epoch && !s.p.restartKeepsEpoch {
			// A new incarnation replaces the old registration: the
			// controller sees the old one leave first (Kafka fences a
			// re-registering broker: its leaderships get a new leader
			// epoch). restartKeepsEpoch models a controller that only sees
			// the broker still registered (docs/reliability.md, the
			// same-epoch restart).
			delete(s.leases, n.id)
			s.rev++
			s.say("quorum: %d's old registration (broker epoch %d) replaced", n.id, old.epoch)
			s.reconcile()
		}
		s.leases[n.id] = lease{epoch: epoch, expires: s.now + s.p.sessionMs, unclean: unclean}
		s.rev++
		s.say("quorum: %d registered at broker epoch %d", n.id, epoch)
		s.reconcile()
		s.publish()
		s.send(quorum, n.id, "registered", func() {
			if n.incarnation == inc && n.epoch == epoch {
				n.registered = true
			}
		})
	})
}

func (s *sim) heartbeat(n *node) {
	if !n.registered {
		// Registration lost in the network: ask again.
		s.register(n)
		return
	}
	epoch, inc := n.epoch, n.incarnation
	s.send(n.id, quorum, "heartbeat", func() {
		l, ok := s.leases[n.id]
		lost := !ok || l.epoch != epoch
		if !lost {
			l.expires = s.now + s.p.sessionMs
			s.leases[n.id] = l
		}
		// The answer carries the metadata as the store holds it (a
		// broker's watch catches up with every revision it missed).
		st, rev, brokers := s.qs.Clone(), s.rev, s.brokers()
		s.send(quorum, n.id, "heartbeat-answer", func() {
			if n.incarnation != inc || n.epoch != epoch {
				return
			}
			if !lost {
				s.applyMeta(n, st, rev, brokers)
				return
			}
			// Definitive evidence (docs/cluster.md "Fencing"): the session
			// is gone; stop leading, register again with a new epoch.
			s.say("%d: session lost at broker epoch %d", n.id, epoch)
			s.dropLeader(n, "session lost")
			n.registered = false
			s.register(n)
		})
	})
}

// quorumTick expires leases (only while the store has a quorum: without
// one no lease expires, and etcd's new leader extends every lease by a
// full TTL when it returns).
func (s *sim) quorumTick() {
	s.checkISR()
	if !s.quorumUp {
		return
	}
	changed := false
	for _, id := range s.ids {
		if l, ok := s.leases[id]; ok && l.expires <= s.now {
			delete(s.leases, id)
			s.rev++
			s.say("quorum: %d's session expired", id)
			changed = true
		}
	}
	if changed {
		s.reconcile()
		s.publish()
	}
}

func (s *sim) brokers() map[int32]replica.Broker {
	b := map[int32]replica.Broker{}
	for id, l := range s.leases {
		b[id] = replica.Broker{Epoch: l.epoch}
	}
	return b
}

// reconcile is internal/controller's reaction to the registrations.
func (s *sim) reconcile() {
	st := &controller.State{Brokers: map[int32]controller.BrokerInfo{}, Topics: map[string]*controller.TopicInfo{}}
	for id, l := range s.leases {
		st.Brokers[id] = controller.BrokerInfo{ID: id, UncleanShutdown: l.unclean && !s.p.durable, Epoch: l.epoch}
	}
	tp := meta.TopicPartition{TopicID: "t", Partition: 0}
	st.Topics["t"] = &controller.TopicInfo{Name: "t", ID: "t", Policy: controller.Policy{MinISR: s.p.minISR},
		Parts: []meta.Partition{{TopicPartition: tp, State: s.qs.Clone(), ModRevision: s.partRev}}}
	for _, d := range st.Reconcile() {
		if d.Expect != s.partRev {
			continue
		}
		s.write(d.New, "controller: "+d.Reason)
	}
}

// write commits a new partition state.
func (s *sim) write(st meta.PartitionState, why string) {
	if st.LeaderEpoch < s.qs.LeaderEpoch || st.PartitionEpoch <= s.qs.PartitionEpoch {
		s.fail("the metadata went backwards: %s after %s", st, s.qs)
	}
	if st.LeaderEpoch != s.qs.LeaderEpoch {
		s.c.elections++
	}
	for _, id := range st.ISR {
		if !slices.Contains(s.qs.ISR, id) && s.nodes[id].up {
			s.nodes[id].unclean = false // caught up again: its log holds what is committed
		}
	}
	s.qs = st
	s.rev++
	s.partRev = s.rev
	s.say("%s; now %s (rev %d)", why, st, s.rev)
}

// publish sends the metadata to every broker (each gets it after its own
// delay, or never if its path is cut; the next publication repairs that).
func (s *sim) publish() {
	st, rev, brokers := s.qs.Clone(), s.rev, s.brokers()
	for _, id := range s.ids {
		n := s.nodes[id]
		s.send(quorum, id, "metadata", func() { s.applyMeta(n, st, rev, brokers) })
	}
}

// applyMeta is a broker's reaction to new metadata (Kafka's makeLeader /
// makeFollower).
func (s *sim) applyMeta(n *node, qst meta.PartitionState, rev int64, brokers map[int32]replica.Broker) {
	if rev <= n.seenRev {
		return
	}
	if qst.Leader == n.id && !n.registered {
		return // leads only once registered (its broker epoch is part of every ISR change); a later copy applies
	}
	n.seenRev = rev
	n.brokers = brokers
	st := replica.FromMeta(qst)
	if n.leader != nil {
		n.leader.SetBrokers(brokers)
	}
	if st.Leader == n.id {
		if n.leader != nil {
			_, newEpoch, err := n.leader.Update(st, s.now)
			if err == nil {
				if newEpoch {
					s.must(n.log.assign(st.LeaderEpoch))
					s.becameLeader(n, st.LeaderEpoch)
				}
				n.seen = st
				s.localChanged(n)
				return
			}
			s.dropLeader(n, "update: "+code(err))
		}
		s.must(n.log.assign(st.LeaderEpoch))
		// The high watermark the log holds now (replica.Replica.Apply).
		l, err := replica.NewLeader(replica.Config{Local: n.id, BrokerEpoch: n.epoch, MinISR: s.p.minISR,
			LagTimeMaxMs: s.p.lagMs, Durable: s.p.durable}, st, brokers, n.log.local(), n.log.hw(), s.now)
		if err != nil {
			s.say("%d: cannot lead: %v", n.id, err)
			n.seen = st
			return
		}
		n.leader, n.seen, n.lastHW, n.alterAt = l, st, l.HighWatermark(), 0
		n.log.setHW(l.HighWatermark())
		s.becameLeader(n, st.LeaderEpoch)
		s.say("%d: leads at epoch %d from offset %d, hw %d", n.id, st.LeaderEpoch, l.EpochStart(), l.HighWatermark())
		s.localChanged(n)
		return
	}
	if n.leader != nil {
		s.dropLeader(n, fmt.Sprintf("follows %d at epoch %d", st.Leader, st.LeaderEpoch))
	}
	if st.LeaderEpoch > n.seen.LeaderEpoch || st.Leader != n.seen.Leader {
		// A new leader: whether it counts reported fsynced ends is
		// unknown again (replica.Replica.apply).
		n.pipelined, n.drained = false, false
	}
	n.seen = st
	n.log.setHW(replica.FollowerHighWatermark(n.leaderHW, n.log.local(), s.p.durable))
	n.fetchAt = -1 // a new leader: fetch from it now
}

// becameLeader checks that one epoch has one leader.
func (s *sim) becameLeader(n *node, epoch int32) {
	if prev, ok := s.leaderOf[epoch]; ok && prev != n.id {
		s.fail("two leaders at leader epoch %d: %d and %d", epoch, prev, n.id)
	}
	s.leaderOf[epoch] = n.id
	s.checkTrueLeader()
}

func (s *sim) dropLeader(n *node, why string) {
	if n.leader == nil {
		return
	}
	s.say("%d: stops leading (%s)", n.id, why)
	n.leader = nil
	for _, a := range n.acks {
		s.answer(n, a, kerr.NotLeaderForPartition)
	}
	n.acks = nil
}

func (s *sim) localChanged(n *node) {
	if n.leader != nil {
		n.leader.LocalChanged(n.log.local(), s.now)
		s.leaderHW(n)
		return
	}
	n.log.setHW(replica.FollowerHighWatermark(n.leaderHW, n.log.local(), s.p.durable))
}

// leaderHW takes the Leader's high watermark into the log, checks it never
// goes back, and answers the produces it completes.
func (s *sim) leaderHW(n *node) {
	hw := n.leader.HighWatermark()
	if hw < n.lastHW {
		s.fail("leader %d's high watermark went back from %d to %d at epoch %d", n.id, n.lastHW, hw, n.seen.LeaderEpoch)
	}
	n.lastHW = hw
	n.log.setHW(hw)
	s.settle(n)
	s.checkHW()
}

func (s *sim) fsync(n *node) {
	if n.log.durable() == n.log.end() {
		return
	}
	s.must(n.log.flush())
	s.localChanged(n)
}

func (s *sim) leaderTick(n *node) {
	if n.leader == nil {
		return
	}
	if ch := n.leader.Tick(s.now); ch != nil {
		s.alter(n, ch)
		return
	}
	// An ISR change whose answer was lost is sent again (Kafka's
	// AlterPartition retry); the compare-and-set makes a repeat harmless.
	if ch := n.leader.Pending(); ch != nil && s.now-n.alterAt > 1000 {
		s.alter(n, ch)
	}
}

// alter sends an ISR change to the quorum, which commits it as the shell
// does: AlterPartition on the state it holds, refused unless the leader's
// and every added replica's registrations are the incarnations named.
func (s *sim) alter(n *node, ch *replica.IsrChange) {
	n.alterAt = s.now
	inc := n.incarnation
	s.say("%d: proposes %s", n.id, ch)
	s.send(n.id, quorum, "alter", func() {
		ns, err := replica.AlterPartition(s.qs, n.id, ch, s.p.minISR)
		if l, ok := s.leases[n.id]; err == nil && (!ok || l.epoch != ch.LeaderBrokerEpoch) {
			err = fmt.Errorf("leader %d is not registered at broker epoch %d", n.id, ch.LeaderBrokerEpoch)
		}
		for id, e := range ch.AddedEpochs {
			if l, ok := s.leases[id]; err == nil && (!ok || l.epoch != e) {
				err = fmt.Errorf("broker %d is not registered at epoch %d", id, e)
			}
		}
		if err != nil {
			s.say("quorum: %s from %d refused (%s)", ch, n.id, code(err))
			if errors.Is(err, kerr.InvalidUpdateVersion) || errors.Is(err, kerr.FencedLeaderEpoch) {
				// The partition changed meanwhile (the shell's ErrStale):
				// the change stays in flight until the leader learns the
				// new state; only a refused registration check fails it
				// (ErrIneligible -> AlterFailed), as replica.Manager does.
				return
			}
			s.send(quorum, n.id, "alter-refused", func() {
				if n.incarnation == inc && n.leader != nil && n.leader.Pending() == ch {
					n.leader.AlterFailed(ch)
				}
			})
			return
		}
		s.write(ns, fmt.Sprintf("quorum: %s from %d committed", ch, n.id))
		s.publish()
	})
}

// fetch sends follower n's Fetch to the broker it believes leads.
func (s *sim) fetch(n *node) {
	if n.leader != nil || n.seen.Leader < 0 || n.seen.Leader == n.id {
		return
	}
	if n.fetchAt >= 0 && s.now-n.fetchAt < 1000 {
		return // one fetch in flight; a lost one times out after 1 s
	}
	local := n.log.local()
	if local.Durable >= local.End {
		n.drained = false
	}
	plan := replica.PlanFetch(local, s.p.durable, n.pipelined, n.drained)
	if !plan.Ready {
		return // waits for its fsync
	}
	off := plan.Offset
	n.fetchAt = s.now
	lid, lastEpoch, leaderEpoch, brokerEpoch, inc := n.seen.Leader, n.log.latestEpoch(), n.seen.LeaderEpoch, n.epoch, n.incarnation
	ln := s.nodes[lid]
	s.send(n.id, lid, "fetch", func() {
		resp := s.serveFetch(ln, n.id, brokerEpoch, off, plan.Durable, lastEpoch, leaderEpoch)
		s.send(lid, n.id, "fetch-answer", func() {
			if n.incarnation != inc || n.leader != nil || n.seen.LeaderEpoch != leaderEpoch || n.seen.Leader != lid {
				return // an answer to an earlier incarnation or leadership
			}
			if n.log.end() != off {
				return // a duplicate or overtaken answer: the log moved since
			}
			n.fetchAt = -1
			if resp.err == nil && resp.reset == nil {
				// replica.Replica.fetched: the echo says the leader counts
				// the reported fsynced end; an empty no-wait answer means
				// wait for the fsync before fetching again.
				n.pipelined = resp.echoed
				n.drained = plan.NoWait && len(resp.entries) == 0
			}
			s.fetched(n, lid, off, resp)
		})
	})
}

// fetchMax bounds the records of one fetch answer (a few KiB: a small
// replica.fetch.max.bytes, below the simulated segment size).
const fetchMax = 100

type fetchAnswer struct {
	err      error
	reset    *replica.Reset
	div      *replica.EpochEnd
	entries  []entry
	hw       int64
	leaderID int32
	echoed   bool // the leader echoed the reported fsynced end (DurableEndTag)
}

// serveFetch is the leader side of a follower's Fetch (the shell's order:
// leader epoch, diverging epoch, then the fetch state).
func (s *sim) serveFetch(ln *node, from int32, brokerEpoch, off, durableEnd int64, lastEpoch, leaderEpoch int32) fetchAnswer {
	if ln.leader == nil {
		return fetchAnswer{err: kerr.NotLeaderForPartition}
	}
	if err := replica.CheckLeaderEpoch(leaderEpoch, ln.seen.LeaderEpoch); err != nil {
		return fetchAnswer{err: err}
	}
	local := ln.log.local()
	hw := ln.leader.HighWatermark()
	div, err := replica.Divergence(lastEpoch, off, local.Start, ln.log.lookup)
	if err != nil {
		r := replica.OutOfRange(0, local.Start, local.End) // the follower fills in its own end
		return fetchAnswer{err: err, reset: &r}
	}
	if div != nil {
		return fetchAnswer{div: div, hw: hw}
	}
	// The fetch's reported fsynced end (replica.Replica.ServeFetch): a
	// legacy leader ignores the tag and counts the fetch offset.
	durable := replica.NoOffset
	if durableEnd >= 0 && !s.p.legacyLeaders {
		durable = max(durableEnd, 0)
	}
	res, err := ln.leader.FollowerFetchDurable(from, brokerEpoch, off, durable, 0, local, s.now)
	if err != nil {
		return fetchAnswer{err: err}
	}
	// At most fetchMax records an answer (replica.fetch.max.bytes).
	got := slices.Clone(ln.log.entries[off:min(ln.log.end(), off+fetchMax)])
	if res.HWChanged {
		s.leaderHW(ln)
	}
	if res.Change != nil {
		s.alter(ln, res.Change)
	}
	return fetchAnswer{entries: got, hw: ln.leader.HighWatermark(), echoed: durable >= 0}
}

// fetched applies a fetch answer on the follower.
func (s *sim) fetched(n *node, lid int32, off int64, a fetchAnswer) {
	switch {
	case a.reset != nil:
		ln := s.nodes[lid]
		r := replica.OutOfRange(n.log.end(), 0, ln.log.end())
		if r.TruncateTo >= 0 && r.TruncateTo < n.log.end() {
			s.say("%d: out of range at %d; truncates to %d", n.id, off, r.TruncateTo)
			s.c.truncations++
			s.must(n.log.truncate(r.TruncateTo))
		}
	case a.err != nil:
	case a.div != nil:
		tr := replica.Truncate(*a.div, n.log.end(), n.log.lookup)
		if tr.Offset < n.log.end() {
			s.say("%d: diverging epoch %d ends at %d; truncates to %d", n.id, a.div.Epoch, a.div.EndOffset, tr.Offset)
			s.c.truncations++
		}
		// Always, as replica.Replica.fetched: a cut at or past the log end
		// still drops leader epochs that start there (an epoch this
		// replica led without appending), or the follower would send the
		// same last fetched epoch and get the same answer forever
		// (storage.Log.TruncateTo; found by seed 1984 of a 2000-seed run).
		s.must(n.log.truncate(tr.Offset))
	default:
		s.must(n.log.appendFollower(a.entries))
		n.leaderHW = a.hw
		n.log.setHW(replica.FollowerHighWatermark(a.hw, n.log.local(), s.p.durable))
	}
	s.checkHW()
}

// produce is the client: a batch of 1..3 records with acks=all to the
// broker it believes leads (the metadata, sometimes stale: a random one).
func (s *sim) produce() {
	if !s.faulting && s.now > s.p.faultMs {
		return
	}
	to := s.qs.Leader
	if to < 0 || s.r.IntN(5) == 0 {
		to = s.ids[s.r.IntN(len(s.ids))]
	}
	var ids []string
	for i := 0; i <= s.r.IntN(3); i++ {
		s.nextRec++
		ids = append(ids, fmt.Sprintf("r%d", s.nextRec))
	}
	s.nextReq++
	req := s.nextReq
	s.c.produced += len(ids)
	n := s.nodes[to]
	s.send(client, to, "produce", func() {
		if n.leader == nil {
			s.send(to, client, "produce-answer", func() {})
			return
		}
		if err := n.leader.CheckAppend(-1); err != nil {
			s.send(to, client, "produce-answer", func() {})
			return
		}
		first := n.log.end()
		s.must(n.log.appendLeader(ids, n.seen.LeaderEpoch))
		n.acks = append(n.acks, pendingAck{req: req, first: first, last: n.log.end() - 1, ids: ids})
		s.localChanged(n)
	})
}

// settle answers the acks=all produces leader n can answer.
func (s *sim) settle(n *node) {
	kept := n.acks[:0]
	for _, a := range n.acks {
		done, err := n.leader.Acked(a.last + 1)
		switch {
		case !done:
			kept = append(kept, a)
		default:
			s.answer(n, a, err)
		}
	}
	n.acks = kept
}

func (s *sim) answer(n *node, a pendingAck, err error) {
	s.send(n.id, client, "produce-answer", func() {
		if err != nil {
			return
		}
		for i, id := range a.ids {
			off := a.first + int64(i)
			if prev, ok := s.acked[off]; ok && prev != id {
				s.fail("offset %d acknowledged for %s and for %s", off, prev, id)
			}
			if r, ok := s.reads[off]; ok && r != id {
				s.fail("offset %d acknowledged for %s but read as %s", off, id, r)
			}
			s.acked[off] = id
			s.c.acked++
		}
		s.say("client: acked %s at %d-%d by %d", strings.Join(a.ids, " "), a.first, a.last, n.id)
		s.checkTrueLeader()
	})
}

// trueLeader is the broker the quorum names, if it runs and leads at the
// quorum's epoch.
func (s *sim) trueLeader() *node {
	if s.qs.Leader < 0 {
		return nil
	}
	n := s.nodes[s.qs.Leader]
	if !n.up || n.leader == nil || n.seen.LeaderEpoch != s.qs.LeaderEpoch {
		return nil
	}
	return n
}

// checkTrueLeader: every acknowledged record, and every record that was
// ever below the true leader's high watermark, is in the true leader's log
// at its offset.
func (s *sim) checkTrueLeader() {
	n := s.trueLeader()
	if n == nil {
		return
	}
	for off, id := range s.acked {
		if off >= n.log.end() || n.log.entries[off].id != id {
			s.fail("acknowledged %s at offset %d missing from the leader %d (epoch %d, log end %d)", id, off, n.id, s.qs.LeaderEpoch, n.log.end())
			return
		}
	}
	for off, id := range s.visible {
		if off >= n.log.end() || n.log.entries[off].id != id {
			s.fail("%s at offset %d, once below a high watermark, missing from the leader %d", id, off, n.id)
			return
		}
	}
	for off := int64(len(s.visible)); off <= s.maxRead; off++ {
		if id, ok := s.reads[off]; ok && (off >= n.log.end() || n.log.entries[off].id != id) {
			s.fail("%s, read at offset %d, missing from the leader %d (epoch %d, log end %d)", id, off, n.id, s.qs.LeaderEpoch, n.log.end())
			return
		}
	}
}

// checkHW: the true leader's high watermark is never beyond the fsynced
// end (durable acks) or the end (Kafka's semantics) of any member of the
// committed ISR; records below it become visible.
func (s *sim) checkHW() {
	n := s.trueLeader()
	if n == nil {
		return
	}
	hw := n.leader.HighWatermark()
	for _, r := range s.qs.ISR {
		m := s.nodes[r]
		if !s.p.durable && (!m.up || s.qs.StaleISRMember(r, m.epoch)) {
			// Without durable acks a member that lost power is behind
			// until the controller drops it from the ISR when it
			// re-registers (KIP-903); what counts is that the acknowledged
			// records survive (checkTrueLeader).
			continue
		}
		end := m.log.end()
		if s.p.durable {
			end = m.log.durable()
		}
		if hw > end {
			s.say("leader %d followers %+v pending %v state %+v", n.id, n.leader.Followers(), n.leader.Pending(), n.leader.State())
			s.fail("leader %d's high watermark %d is beyond ISR member %d's %s end %d", n.id, hw, r, map[bool]string{true: "fsynced", false: "log"}[s.p.durable], end)
			return
		}
	}
	need := min(s.p.minISR, len(s.qs.Replicas))
	for off := int64(len(s.visible)); off < hw && off < n.log.end(); off++ {
		if _, ok := s.visible[off]; !ok {
			id := n.log.entries[off].id
			if r, ok := s.reads[off]; ok && r != id {
				s.fail("offset %d read as %s, now %s below the leader %d's high watermark %d", off, r, id, n.id, hw)
			}
			// KIP-966: a record is committed once min.insync.replicas
			// replicas hold it durably (with durable acks; without them a
			// follower's power cut may take records the leader counted).
			if held := s.holders(off, id); s.p.durable && held < need {
				s.fail("leader %d's high watermark %d exposes %s at offset %d, held by %d replicas, below min.insync.replicas=%d", n.id, hw, id, off, held, s.p.minISR)
			}
			s.visible[off] = id
		}
	}
}

// holders counts the replicas whose log holds id at off (in its fsynced
// part with durable acks).
func (s *sim) holders(off int64, id string) int {
	held := 0
	for _, r := range s.ids {
		m := s.nodes[r]
		end := m.log.end()
		if s.p.durable {
			end = m.log.durable()
		}
		if off < end && m.log.entries[off].id == id {
			held++
		}
	}
	return held
}

// crash ends a broker's process; power also drops what it had not fsynced.
func (s *sim) crash(n *node, power bool) {
	n.up = false
	n.incarnation++
	n.leader, n.acks = nil, nil
	// A power cut's loss stays until the broker is back in the ISR: a kill
	// of a later incarnation does not make its log whole again (Kafka
	// counts every restart without a clean shutdown as unclean).
	n.unclean = n.unclean || power
	if power {
		s.c.powerCuts++
	} else {
		s.c.crashes++
	}
	// What the disk holds now is what the next start opens: the log is
	// opened (crash recovery) at once, so a stopped broker's ISR checks
	// see it; nothing touches the disk until the start.
	n.log.crash(power)
	s.must(n.log.open())
	s.say("%d: %s; log %d entries", n.id, map[bool]string{true: "power cut", false: "killed"}[power], n.log.end())
	s.checkTrueLeader()
}

// nemesis injects a random fault now and then while faulting; each heals
// by itself.
func (s *sim) nemesis() {
	if !s.faulting || s.r.Float64() >= s.p.faultRate {
		return
	}
	n := s.nodes[s.ids[s.r.IntN(len(s.ids))]]
	lasts := 200 + s.r.Int64N(2*s.p.sessionMs)
	switch k := s.r.IntN(100); {
	case k < 20: // process death
		if !n.up {
			return
		}
		s.crash(n, false)
		s.at(s.now+lasts, func() {
			if !n.up && s.faulting {
				s.start(n)
			}
		})
	case k < 32: // power loss (durable acks; without them only a follower: unsyncedPowerCuts)
		if !n.up || (!s.p.durable && !(s.p.unsyncedPowerCuts && s.qs.Leader != meta.NoLeader && s.qs.Leader != n.id)) {
			return
		}
		s.crash(n, true)
		s.at(s.now+lasts, func() {
			if !n.up && s.faulting {
				s.start(n)
			}
		})
	case k < 45: // pause (SIGSTOP), often past the session
		if !n.up || n.paused {
			return
		}
		s.c.pauses++
		n.paused = true
		inc := n.incarnation
		s.say("%d: paused for %d ms", n.id, lasts)
		s.at(s.now+lasts, func() { s.resume(n, inc) })
	case k < 85: // a network cut: one way, both ways, or isolation
		var paths [][2]int32
		other := s.ids[s.r.IntN(len(s.ids))]
		for other == n.id {
			other = s.ids[s.r.IntN(len(s.ids))]
		}
		switch s.r.IntN(4) {
		case 0:
			paths = [][2]int32{{n.id, other}}
		case 1:
			paths = [][2]int32{{n.id, other}, {other, n.id}}
		case 2: // cut from the quorum (etcd and the controller)
			paths = [][2]int32{{n.id, quorum}, {quorum, n.id}}
		default: // isolated from everyone but the client
			for _, o := range append(slices.Clone(s.ids), quorum) {
				if o != n.id {
					paths = append(paths, [2]int32{n.id, o}, [2]int32{o, n.id})
				}
			}
		}
		s.c.cuts++
		for _, p := range paths {
			s.cut[p]++
		}
		s.say("cut %v for %d ms", paths, lasts)
		s.at(s.now+lasts, func() {
			for _, p := range paths {
				s.cut[p]--
			}
		})
	case k < 90: // every broker at once (the fault matrix's kill-all; power-cut-all with durable acks)
		power := s.p.durable && s.r.IntN(2) == 0
		if !slices.ContainsFunc(s.ids, func(id int32) bool { return s.nodes[id].up }) {
			return
		}
		s.c.allCrashes++
		s.say("every broker %s", map[bool]string{true: "loses power", false: "is killed"}[power])
		for _, id := range s.ids {
			if m := s.nodes[id]; m.up {
				s.crash(m, power)
			}
		}
		s.at(s.now+lasts, func() {
			for _, id := range s.ids {
				if m := s.nodes[id]; !m.up && s.faulting {
					s.start(m)
				}
			}
		})
	default: // the metadata store loses its quorum
		if !s.quorumUp {
			return
		}
		s.c.quorumLosses++
		s.quorumUp = false
		s.say("quorum lost for %d ms", lasts)
		s.at(s.now+lasts, s.quorumBack)
	}
}

// consumeWindow is how many records below a replica's high watermark a
// consumer fetch reads.
const consumeWindow = 20

// consume is a consumer fetch from a random replica at the leader epoch
// the client knows (the quorum's): the leader, or a follower (KIP-392:
// Fetch v11+ reads from any replica, up to that replica's high watermark;
// replica.Replica.CheckFollowerRead), answering the records just below its
// log's high watermark. What it reads is checked (read).
func (s *sim) consume() {
	n := s.nodes[s.ids[s.r.IntN(len(s.ids))]]
	epoch := s.qs.LeaderEpoch
	s.send(client, n.id, "consumer-fetch", func() {
		ok, leads := readable(n, epoch)
		if !ok {
			return
		}
		hw := n.log.hw()
		from := max(0, hw-consumeWindow)
		got := slices.Clone(n.log.entries[from:hw])
		s.send(n.id, client, "consumer-answer", func() { s.read(n.id, leads, from, got) })
	})
}

// readable reports whether broker n serves a consumer fetch at the leader
// epoch the client knows, and whether as the leader: the leader checks the
// epoch (KIP-320); a follower serves it (KIP-392) when it does not lead,
// is in the replica set and the epoch matches
// (replica.Replica.CheckFollowerRead; a leader may be unknown). A node
// whose Leader could not be made (the simulation keeps the state it
// refused) serves nothing. TestMirroredRulesMatchReplica holds this to
// the real Replica.
func readable(n *node, epoch int32) (ok, leads bool) {
	leads = n.leader != nil
	if !leads && (n.seen.Leader == n.id || !slices.Contains(n.seen.Replicas, n.id)) {
		return false, false
	}
	return replica.CheckLeaderEpoch(epoch, n.seen.LeaderEpoch) == nil, leads
}

// read checks what a consumer read from broker id: one offset never reads
// two values, nor a value other than the one acknowledged or once below
// the true leader's high watermark there.
func (s *sim) read(id int32, leader bool, from int64, es []entry) {
	who := map[bool]string{true: "leader", false: "follower"}[leader]
	for i, e := range es {
		off := from + int64(i)
		if prev, ok := s.reads[off]; ok && prev != e.id {
			s.fail("offset %d read as %s, then as %s from the %s %d", off, prev, e.id, who, id)
			return
		}
		if a, ok := s.acked[off]; ok && a != e.id {
			s.fail("offset %d acknowledged for %s, read as %s from the %s %d", off, a, e.id, who, id)
			return
		}
		if v, ok := s.visible[off]; ok && v != e.id {
			s.fail("offset %d was %s below a leader's high watermark, read as %s from the %s %d", off, v, e.id, who, id)
			return
		}
		s.reads[off] = e.id
		s.maxRead = max(s.maxRead, off)
		s.c.reads++
	}
}

// checkISR: every acknowledged record is in the log of every member of
// the committed ISR, at its offset (without durable acks a member that
// lost power counts again once it is back in sync, as in checkHW).
func (s *sim) checkISR() {
	for _, r := range s.qs.ISR {
		m := s.nodes[r]
		if !s.p.durable && (!m.up || m.unclean || s.qs.StaleISRMember(r, m.epoch)) {
			continue
		}
		for off, id := range s.acked {
			if off >= m.log.end() || m.log.entries[off].id != id {
				s.fail("acknowledged %s at offset %d missing from ISR member %d (log end %d, ISR %v)", id, off, r, m.log.end(), s.qs.ISR)
				return
			}
		}
	}
}

func (s *sim) resume(n *node, inc int) {
	if !n.up || n.incarnation != inc || !n.paused {
		return
	}
	n.paused = false
	s.say("%d: resumed (%d deferred events)", n.id, len(n.deferred))
	d := n.deferred
	n.deferred = nil
	for _, fn := range d {
		if n.up && n.incarnation == inc && !n.paused {
			fn()
		}
	}
}

func (s *sim) quorumBack() {
	if s.quorumUp {
		return
	}
	s.quorumUp = true
	for id, l := range s.leases {
		l.expires = s.now + s.p.sessionMs // etcd's lessor.Promote
		s.leases[id] = l
	}
	s.say("quorum back")
}

// heal ends every fault: paths restored, the quorum back, every broker
// running.
func (s *sim) heal() {
	s.faulting = false
	s.cut = map[[2]int32]int{}
	s.quorumBack()
	for _, id := range s.ids {
		n := s.nodes[id]
		if n.paused {
			s.resume(n, n.incarnation)
		}
		if !n.up {
			s.start(n)
		}
	}
	s.say("healed")
}

// run plays the whole seed: faults, then a healed quiet stretch, then the
// final checks. It returns the violation, if any.
func (s *sim) run() string {
	s.faulting = true
	s.at(s.p.faultMs, s.heal)
	end := s.p.faultMs + s.p.quietMs
	for s.queue.Len() > 0 && s.violation == "" {
		e := heap.Pop(&s.queue).(*event)
		if e.at > end {
			break
		}
		s.now = e.at
		s.c.events++
		e.fn()
	}
	if s.violation == "" {
		s.final()
	}
	return s.violation
}

// final: after the quiet stretch one broker leads at the quorum's epoch,
// holds every acknowledged record, and every running ISR member agrees
// with it below the high watermark.
func (s *sim) final() {
	n := s.trueLeader()
	if n == nil {
		s.fail("no leader after %d ms of health (quorum %s)", s.p.quietMs, s.qs)
		return
	}
	s.checkTrueLeader()
	hw := n.leader.HighWatermark()
	for off := range s.acked {
		if off >= hw {
			s.fail("acknowledged offset %d not below the final high watermark %d", off, hw)
		}
	}
	for _, r := range s.qs.ISR {
		m := s.nodes[r]
		for off := int64(0); off < hw; off++ {
			if off >= m.log.end() || m.log.entries[off] != n.log.entries[off] {
				s.fail("ISR member %d differs from the leader %d at offset %d below the high watermark %d", r, n.id, off, hw)
				return
			}
		}
	}
}

func code(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}
