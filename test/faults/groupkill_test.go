package faults

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestGroupCoordinatorKillClients: three broker processes, RF=3
// (min.insync.replicas=2), and for each client library (sarama,
// confluent-kafka-python, kafkajs, franz-go) a group of three consumers
// reading a six-partition topic and committing each record synchronously
// after reading it. Once they have committed some records the broker
// coordinating their group (the leader of the group's __consumer_offsets
// partition) is killed with SIGKILL and restarted while more records are
// written. The coordinator moves with that partition's leadership (Kafka's
// GroupCoordinator onElection/onResignation); the members find it again,
// rejoin and go on. Checked, from what the clients printed (each event
// stamped with the shared wall clock):
//   - nothing committed is lost or rolled back: every committed offset
//     read back (OffsetFetch, sampled all along) is at least the highest
//     offset the coordinator acknowledged to a member before the kill, and
//     never goes backwards;
//   - members continue from the committed offsets: after each assignment,
//     a member's first record of a partition is at or after the highest
//     commit acknowledged (to anyone) before that assignment, so nothing is
//     consumed twice beyond the uncommitted window;
//   - every record is consumed, and the group ends committed at the end of
//     every partition.
//
// CI's default run: one kill under sarama members, then one under
// kafkajs members (the coordinator's failover is the same whatever the
// client; confluent-kafka-python's consumer group also lives through a
// broker kill in TestTransactionKillClients' pipelines). sarama keeps its
// session through a coordinator move (the generation is kept, as Kafka
// keeps it), so its members must retry a commit the moving coordinator
// refused (saramaMemberHandler.commitRetrying). STRATA_LONG=1: sarama,
// confluent-kafka-python, kafkajs and franz-go (classic group) in turn,
// the coordinator killed three times each with more records.
func TestGroupCoordinatorKillClients(t *testing.T) {
	t.Parallel()
	if !long() {
		runGroupKills(t, saramaFaults(), kafkajsFaults(t))
		return
	}
	runGroupKills(t, saramaFaults(), confluentFaults(t), kafkajsFaults(t), kgoClassicFaults())
}

// TestGroupCoordinatorKillKafkaGo is TestGroupCoordinatorKillClients with
// kafka-go members (its ConsumerGroup, commits bound to the generation).
func TestGroupCoordinatorKillKafkaGo(t *testing.T) {
	t.Parallel()
	runGroupKills(t, kafkaGoFaults())
}

// TestGroupCoordinatorKillConsumerProtocol is TestGroupCoordinatorKillClients
// with franz-go members of a KIP-848 group (the consumer protocol:
// ConsumerGroupHeartbeat, the coordinator assigns), which must stay a
// consumer-protocol group through the kill.
func TestGroupCoordinatorKillConsumerProtocol(t *testing.T) {
	t.Parallel()
	runGroupKills(t, kgoConsumerProtocolFaults())
}

// runGroupKills runs the group kill scenario of
// TestGroupCoordinatorKillClients for each client in turn on one cluster.
func runGroupKills(t *testing.T, clients ...faultClient) {
	kills, perPhase := 1, 60
	if long() {
		kills, perPhase = 3, 300
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(clients))*(time.Duration(kills)*time.Minute+time.Minute)+2*time.Minute)
	defer cancel()
	procs, addrs := replicatedCluster(t, ctx, "--group.initial.rebalance.delay.ms", "0")
	admin := newAdmin(t, addrs)
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			topic, group := "members-"+c.name, "group-"+c.name
			createTopics(t, ctx, admin, 6, topic)
			total := 0
			produce := func(n int) {
				var vals []string
				for i := 0; i < n; i++ {
					vals = append(vals, fmt.Sprintf("%s-%d", c.name, total+i))
				}
				total += n
				produceValues(t, ctx, addrs, topic, vals)
			}
			produce(perPhase)
			log := &eventLog{}
			sup := newSupervisor(t, log)
			for i := 1; i <= 3; i++ {
				sup.run(fmt.Sprintf("member-%d", i), c.member(clientOp{Bootstrap: strings.Join(addrs, ","), Group: group, Topic: topic}))
			}
			samples := sampleCommits(t, ctx, admin, group, topic)
			k := &killer{t: t, procs: procs}
			var killAt []int64
			for round := 0; round < kills; round++ {
				acked := log.count("committed")
				waitUntil(t, ctx, "members commit", func() error {
					if n := log.count("committed"); n < acked+perPhase/2 {
						return fmt.Errorf("%d commits acknowledged, want %d", n, acked+perPhase/2)
					}
					return nil
				})
				if c.groupType != "" {
					checkGroupType(t, ctx, admin, group, c.groupType)
				}
				i := findCoordinator(t, ctx, addrs, 0, group)
				killAt = append(killAt, k.kill(ctx, i, "coordinator of group "+group))
				produce(perPhase)
				k.wait()
			}
			waitUntil(t, ctx, "the group consumes and commits everything", func() error {
				if n := distinctValues(log.snapshot()); n < total {
					return fmt.Errorf("read %d of %d records", n, total)
				}
				return caughtUp(ctx, admin, group, topic)
			})
			if c.groupType != "" {
				checkGroupType(t, ctx, admin, group, c.groupType)
			}
			sup.stop()
			hist := samples.stop()
			evs := log.snapshot()
			if r := sup.restarts(); len(r) > 0 {
				t.Logf("member restarts: %v", r)
			}
			checkGroupRun(t, evs, hist, killAt, total)
		})
	}
}

// checkGroupType waits until ListGroups (v5, KIP-848's type filter) lists
// group as a group of type typ ("classic", "consumer").
func checkGroupType(t *testing.T, ctx context.Context, admin *kadm.Client, group, typ string) {
	t.Helper()
	waitUntil(t, ctx, "group "+group+" listed as a "+typ+" group", func() error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		gs, err := admin.ListGroupsByType(qctx, []string{typ})
		if err != nil {
			return err
		}
		if _, ok := gs[group]; !ok {
			return fmt.Errorf("ListGroups of type %s: %v", typ, gs.Groups())
		}
		return nil
	})
}

// commitSample is one OffsetFetch of the group's committed offsets.
type commitSample struct {
	at   int64 // wall clock (µs) when the request was sent
	offs map[int32]int64
}

type commitSampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	all    []commitSample
}

// sampleCommits reads the group's committed offsets every 200 ms until
// stop (errors while the coordinator moves are skipped).
func sampleCommits(t *testing.T, ctx context.Context, admin *kadm.Client, group, topic string) *commitSampler {
	sctx, cancel := context.WithCancel(ctx)
	s := &commitSampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for sctx.Err() == nil {
			qctx, qcancel := context.WithTimeout(sctx, 5*time.Second)
			sent := nowMicros()
			offs, err := groupOffsets(qctx, admin, group, topic)
			qcancel()
			if err == nil {
				s.mu.Lock()
				s.all = append(s.all, commitSample{at: sent, offs: offs})
				s.mu.Unlock()
			}
			select {
			case <-sctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *commitSampler) stop() []commitSample {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all
}

// distinctValues counts the distinct record values read.
func distinctValues(evs []event) int {
	seen := map[string]bool{}
	for _, ev := range evs {
		if ev.Event == "record" {
			seen[ev.Value] = true
		}
	}
	return len(seen)
}

// checkGroupRun checks a group run's events and commit samples (see
// TestGroupCoordinatorKillClients).
func checkGroupRun(t *testing.T, evs []event, samples []commitSample, killAt []int64, total int) {
	t.Helper()
	// Acknowledged commits in time order.
	var commits []event
	for _, ev := range evs {
		if ev.Event == "committed" {
			commits = append(commits, ev)
		}
	}
	sort.SliceStable(commits, func(i, j int) bool { return commits[i].TS < commits[j].TS })
	// highestBefore is the highest commit of each partition acknowledged
	// before ts.
	highestBefore := func(ts int64) map[int32]int64 {
		out := map[int32]int64{}
		for _, c := range commits {
			if c.TS >= ts {
				break
			}
			if c.Offset > out[c.Partition] {
				out[c.Partition] = c.Offset
			}
		}
		return out
	}
	// Nothing committed lost or rolled back.
	for _, at := range killAt {
		before := highestBefore(at)
		for _, s := range samples {
			if s.at <= at {
				continue
			}
			for p, o := range before {
				if got, ok := s.offs[p]; ok && got < o {
					t.Errorf("partition %d: committed offset read back as %d after the kill, but %d was acknowledged before it", p, got, o)
				}
			}
		}
	}
	last := map[int32]int64{}
	for _, s := range samples {
		for p, o := range s.offs {
			if o < last[p] {
				t.Errorf("partition %d: committed offset went back from %d to %d", p, last[p], o)
			}
			last[p] = o
		}
	}
	// Members continue from the committed offsets.
	type key struct {
		who string
		p   int32
	}
	assignedAt := map[key]int64{} // a partition assigned and not read since
	reads, reread := 0, 0
	seen := map[string]int{}
	for _, ev := range evs {
		switch ev.Event {
		case "assigned":
			for _, p := range ev.Partitions {
				assignedAt[key{ev.who, p}] = ev.TS
			}
		case "record":
			reads++
			seen[ev.Value]++
			if seen[ev.Value] == 2 {
				reread++
			}
			k := key{ev.who, ev.Partition}
			at, ok := assignedAt[k]
			if !ok {
				continue
			}
			delete(assignedAt, k)
			if c := highestBefore(at)[ev.Partition]; ev.Offset < c {
				t.Errorf("%s: first record of partition %d after its assignment is at offset %d, but offset %d was committed before the assignment",
					ev.who, ev.Partition, ev.Offset, c)
			}
		}
	}
	if len(seen) != total {
		t.Errorf("read %d distinct records, want %d", len(seen), total)
	}
	t.Logf("%d commits acknowledged, %d records read (%d distinct, %d read again within the uncommitted window), %d samples of the committed offsets",
		len(commits), reads, len(seen), reread, len(samples))
}
