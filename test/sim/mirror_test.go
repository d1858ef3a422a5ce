package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/replica"
)

// TestMirroredRulesMatchReplica holds the simulation's glue to the real
// replica layer where the simulation does not run it: a broker taking a
// reopened log over and applying the partition's state (sim.start +
// applyMeta against replica.Manager.Apply: Log.StartReplication, then
// NewLeader from the log's high watermark or a follower's high watermark)
// and serving a consumer fetch (readable against the leader's epoch check
// and Replica.CheckFollowerRead). Both sides open copies of one crash
// image of a log that was appended, fsynced in part and checkpointed; the
// real replica runs under a Manager closed before use (no fetcher, no
// loop). For every log state (kill -9 or power cut, durable acks or not)
// and partition state (leader this broker, another or none; in the
// replica set or not) the high watermark, the leadership and the answer
// to a consumer fetch at each leader epoch must agree.
func TestMirroredRulesMatchReplica(t *testing.T) {
	states := []meta.PartitionState{
		{Leader: 1, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
		{Leader: 1, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1}},
		{Leader: 2, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
		{Leader: 2, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}},
		{Leader: meta.NoLeader, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1}},
		{Leader: 2, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{2, 3, 4}, ISR: []int32{2, 3}},
	}
	for _, durable := range []bool{false, true} {
		for _, power := range []bool{false, true} {
			for i, qst := range states {
				t.Run(fmt.Sprintf("durable=%v/power=%v/state%d", durable, power, i), func(t *testing.T) {
					checkMirrored(t, durable, power, qst)
				})
			}
		}
	}
}

func checkMirrored(t *testing.T, durable, power bool, qst meta.PartitionState) {
	// One history: 30 records at epoch 0, 20 fsynced, high watermark 15
	// checkpointed, then 25 set but not checkpointed; a crash.
	var h rlog
	if err := h.open(); err != nil {
		t.Fatal(err)
	}
	h.startReplication()
	if err := h.assign(0); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 30 {
		ids = append(ids, fmt.Sprintf("r%d", i))
	}
	if err := h.appendLeader(ids[:20], 0); err != nil {
		t.Fatal(err)
	}
	if err := h.flush(); err != nil {
		t.Fatal(err)
	}
	h.setHW(15)
	if err := h.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := h.appendLeader(ids[20:], 0); err != nil {
		t.Fatal(err)
	}
	h.setHW(25)
	h.crash(power)
	img := h.fs

	// The simulation: broker 1 starts on a copy and applies qst.
	s := newSim(1, params{brokers: 3, minISR: 2, durable: durable, lagMs: 1000, sessionMs: 3000, maxDelay: 5})
	n := s.nodes[1]
	n.log.crash(false)
	n.log = rlog{fs: img.Clone()}
	s.start(n)
	n.registered = true
	s.qs = qst
	s.rev++
	brokers := s.brokers()
	s.applyMeta(n, qst, s.rev, brokers)
	// (The other brokers' logs are empty here: the cluster invariants may
	// fire and are not the subject; a storage error is.)
	if strings.Contains(s.violation, "storage:") {
		t.Fatalf("simulation: %s", s.violation)
	}

	// The replica layer on another copy.
	var real rlog
	real.fs = img.Clone()
	if err := real.open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { real.crash(false) })
	m := replica.NewManager(replica.ManagerConfig{Local: 1, Durable: durable, LagTimeMax: 1000 * 1e6,
		BrokerEpoch: func() int64 { return n.epoch }, Logger: quietLog})
	m.Close() // before use: Apply starts no fetcher
	m.SetBrokers(brokers)
	r := m.Apply(replica.TP{Topic: "t", Partition: 0}, real.l, replica.FromMeta(qst), 2)

	_, leads := r.Leading()
	if (n.leader != nil) != leads {
		t.Fatalf("simulation leads %v, replica %v", n.leader != nil, leads)
	}
	if got, want := n.log.hw(), real.l.HighWatermark(); got != want {
		t.Fatalf("simulation's high watermark %d, replica's %d (log end %d, fsynced %d)", got, want, real.l.LogEndOffset(), real.l.DurableEnd())
	}
	for epoch := int32(-1); epoch <= qst.LeaderEpoch+1; epoch++ {
		simOK, _ := readable(n, epoch)
		var err error
		if leads {
			err = replica.CheckLeaderEpoch(epoch, r.State().LeaderEpoch)
		} else {
			err = r.CheckFollowerRead(epoch)
		}
		if simOK != (err == nil) {
			t.Errorf("consumer fetch at leader epoch %d: simulation serves %v, replica answers %v", epoch, simOK, err)
		}
	}
}
