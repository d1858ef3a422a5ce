package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionKillClients: three broker processes, RF=3
// (min.insync.replicas=2), and for each client library with a
// transactional producer (sarama, confluent-kafka-python, kafkajs) a
// consume-transform-produce pipeline: a group member reading "in" at
// READ_COMMITTED copies each batch to "out" in one transaction that also
// commits the batch's offsets for its group (sendOffsetsToTransaction).
// Midway the broker coordinating its transactional id (the leader of its
// __transaction_state partition) is killed with SIGKILL and restarted; the
// coordinator moves with that leadership and completes or aborts what it
// inherits (Kafka's TransactionStateManager loading, then
// TransactionMarkerChannelManager writing the markers to partition leaders
// on the other brokers). A pipeline whose transaction fails exits and is
// started again, as an application would: its new producer fences the
// old one (InitProducerId) and the group resumes from the offsets that
// committed transactions committed. Checked: a READ_COMMITTED read of "out"
// holds every input record exactly once (committed transactions whole,
// aborted ones invisible), the group ends committed at the end of "in", and
// every partition of "out" has its last stable offset at its end (no
// transaction left hanging). The killed broker also leads a third of the
// partitions, so partition leaders move too.
//
// One kill per client; STRATA_LONG=1 also kills the leader of a partition
// of "out" that is not the transaction coordinator, then the group
// coordinator, with more records.
func TestTransactionKillClients(t *testing.T) {
	t.Parallel()
	total := 60
	if long() {
		total = 300
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	procs, addrs := replicatedCluster(t, ctx, "--group.initial.rebalance.delay.ms", "0")
	admin := newAdmin(t, addrs)
	clients := []faultClient{saramaFaults(), confluentFaults(t), kafkajsFaults(t)}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			in, out := "in-"+c.name, "out-"+c.name
			group, txnID := "pipeline-"+c.name, "txn-"+c.name
			createTopics(t, ctx, admin, 3, in, out)
			var vals []string
			for i := 0; i < total; i++ {
				vals = append(vals, fmt.Sprintf("%s-%d", c.name, i))
			}
			produceValues(t, ctx, addrs, in, vals)
			log := &eventLog{}
			sup := newSupervisor(t, log)
			sup.run("pipeline", c.pipeline(clientOp{Bootstrap: strings.Join(addrs, ","), Group: group, Topic: in, Out: out, TransactionalID: txnID}))
			k := &killer{t: t, procs: procs}
			moved := func() int {
				n := 0
				for _, ev := range log.snapshot() {
					if ev.Event == "txn" {
						n += ev.Count
					}
				}
				return n
			}
			after := func(n int) {
				waitUntil(t, ctx, "the pipeline moves records", func() error {
					if m := moved(); m < n {
						return fmt.Errorf("%d records moved by committed transactions, want %d", m, n)
					}
					return nil
				})
			}
			after(total / 4)
			tc := findCoordinator(t, ctx, addrs, 1, txnID)
			k.kill(ctx, tc, "coordinator of transactional id "+txnID)
			k.wait()
			if long() {
				after(total / 2)
				tc = findCoordinator(t, ctx, addrs, 1, txnID)
				victim := -1
				for p := int32(0); p < 3 && victim < 0; p++ {
					if l := leaderOf(ctx, addrs, out, p); l >= 0 && l != tc {
						victim = l
					}
				}
				if victim >= 0 {
					k.kill(ctx, victim, "leader of a partition of "+out+", not the transaction coordinator")
					k.wait()
				}
				after(3 * total / 4)
				k.kill(ctx, findCoordinator(t, ctx, addrs, 0, group), "coordinator of group "+group)
				k.wait()
			}
			waitUntil(t, ctx, "the group commits the end of "+in, func() error { return caughtUp(ctx, admin, group, in) })
			sup.stop()
			t.Logf("%d records moved by committed transactions; pipeline restarts: %v", moved(), sup.restarts())
			checkExactlyOnce(t, ctx, addrs, admin, out, vals)
		})
	}
}

// checkExactlyOnce reads topic at READ_COMMITTED and checks it holds each
// of want exactly once, then that every partition's last stable offset
// reaches its end.
func checkExactlyOnce(t *testing.T, ctx context.Context, addrs []string, admin *kadm.Client, topic string, want []string) {
	t.Helper()
	waitUntil(t, ctx, "no transaction left hanging on "+topic, func() error { return stableAtEnd(ctx, admin, topic) })
	ends, err := endOffsets(ctx, admin, topic)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]int{}
	next := map[int32]int64{}
	var layout []string // partition@offset=value, for a failure
	done := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	// Control records and aborted batches are never returned: a partition is
	// done when the read passed its end or nothing more arrives.
	quiet := time.Now()
	for !done() && time.Since(quiet) < 5*time.Second {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cons.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			quiet = time.Now()
			seen[string(r.Value)]++
			next[r.Partition] = r.Offset + 1
			layout = append(layout, fmt.Sprintf("%d@%d=%s", r.Partition, r.Offset, r.Value))
		})
	}
	var missing []string
	for _, v := range want {
		switch seen[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			t.Errorf("%s read %d times from %s (READ_COMMITTED)", v, seen[v], topic)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d records missing from %s (READ_COMMITTED): %v", len(missing), len(want), topic, missing)
	}
	if extra := len(seen) - (len(want) - len(missing)); extra > 0 {
		t.Errorf("%d values in %s that were never sent", extra, topic)
	}
	if t.Failed() {
		t.Logf("%s at READ_COMMITTED: %v", topic, layout)
	}
}
