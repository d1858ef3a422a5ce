package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/checker"
	"github.com/strata-io/strata/internal/workload"
)

// TestProduceLeaderKillClients: three broker processes, RF=3
// (min.insync.replicas=2), and for each non-franz-go producer (librdkafka
// through confluent-kafka-python, sarama, kafkajs) an idempotent acks=all producer
// sending records round-robin to three partitions while the leader of
// partition 0 is killed with SIGKILL and restarted. Every record's outcome
// as the client reported it (acknowledged with its offset, failed,
// unknown) and a READ_COMMITTED read of every partition from start to end
// afterwards form a history judged by internal/checker: no acknowledged
// record lost, none stored twice (the idempotent producer's duplicates are
// caught by the new leader: its producer state is rebuilt from the
// replicated log), none reordered, no offset holding two values, the
// partition's log linearizable. One kill per client; STRATA_LONG=1 kills
// the leader three times with more records.
func TestProduceLeaderKillClients(t *testing.T) {
	t.Parallel()
	kills, count := 1, 600
	if long() {
		kills, count = 3, 3000
	}
	clients := []faultClient{confluentFaults(t), saramaFaults(), kafkajsFaults(t)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(clients))*(time.Duration(kills)*time.Minute+time.Minute)+2*time.Minute)
	defer cancel()
	procs, addrs := replicatedCluster(t, ctx)
	admin := newAdmin(t, addrs)
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			topic := "produce-" + c.name
			createTopics(t, ctx, admin, 3, topic)
			log := &eventLog{}
			base := nowMicros()
			// Runs once: a failure here is reported, not restarted (a
			// restarted producer would send the same values again).
			pctx, pcancel := context.WithCancel(ctx)
			perr := make(chan error, 1)
			go func() {
				perr <- c.produce(clientOp{Bootstrap: strings.Join(addrs, ","), Topic: topic, Partitions: 3,
					Count: count, Prefix: c.name, IntervalMs: 5})(pctx, func(ev event) { ev.who = "producer"; log.add(ev) })
			}()
			k := &killer{t: t, procs: procs}
			var killAt []int64
			for round := 0; round < kills; round++ {
				waitUntil(t, ctx, "the producer sends", func() error {
					if n, want := log.count("ack"), (round+1)*count/(kills+2); n < want {
						return fmt.Errorf("%d records answered, want %d", n, want)
					}
					return nil
				})
				i := -1
				waitUntil(t, ctx, "a leader of "+topic+"-0", func() error {
					if i = leaderOf(ctx, addrs, topic, 0); i < 0 {
						return fmt.Errorf("none")
					}
					return nil
				})
				killAt = append(killAt, k.kill(ctx, i, "leader of "+topic+"-0"))
				k.wait()
			}
			waitUntil(t, ctx, "the producer finishes", func() error {
				if log.count("closed") == 0 {
					return fmt.Errorf("%d of %d records answered", log.count("ack"), count)
				}
				return nil
			})
			pcancel()
			if err := <-perr; err != nil {
				t.Fatalf("producer: %v", err)
			}
			errs := map[string]int{}
			for _, ev := range log.snapshot() {
				if ev.Event == "ack" && ev.Status != "ok" {
					errs[ev.Error]++
				}
			}
			if len(errs) > 0 {
				t.Logf("records not acknowledged, by the client's error: %v", errs)
			}
			rec := checker.NewRecorder()
			addProduceHistory(rec, log.snapshot(), topic, base, killAt)
			if err := drainInto(ctx, rec, addrs, topic, 3, base); err != nil {
				t.Fatal(err)
			}
			res := checker.Check(rec.History(), checker.Options{Drained: true})
			res.Note("broker", "strata, three combined nodes, replication factor 3, min.insync.replicas=2")
			res.Note("client", c.name+", idempotent, acks=all")
			res.Note("faults", fmt.Sprintf("%d x SIGKILL of the leader of %s-0, restarted at once", kills, topic))
			dir := artifacts(t)
			if err := workload.WriteArtifacts(dir, rec.History(), res); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s; report in %s", res.Summary(), filepath.Join(dir, "report.txt"))
			if !res.Valid() {
				t.Fatalf("anomalies:\n%s", reportText(t, res))
			}
			if res.Stats.AckedSends == 0 {
				t.Fatalf("nothing acknowledged:\n%s", reportText(t, res))
			}
		})
	}
}

// addProduceHistory turns a producer's send and ack events into the
// checker's KindSend operations (one per record, from its send to its
// answer, times relative to base) and the kills into nemesis operations.
func addProduceHistory(rec *checker.Recorder, evs []event, topic string, base int64, killAt []int64) {
	rel := func(ts int64) int64 { return (ts - base) * 1000 }
	type sending struct {
		at int64
		p  int32
	}
	sent := map[string]sending{}
	for _, ev := range evs {
		switch ev.Event {
		case "send":
			sent[ev.Value] = sending{ev.TS, ev.Partition}
		case "ack":
			start := base
			if s, ok := sent[ev.Value]; ok {
				start = s.at
			}
			st := checker.Status(ev.Status)
			off := ev.Offset
			if st != checker.OK {
				off = checker.NoOffset
			}
			rec.Add(checker.Op{Process: ev.who, Kind: checker.KindSend, Status: st, Start: rel(start), End: rel(ev.TS),
				Idempotent: true, Sends: []checker.Send{{TP: checker.TP{Topic: topic, Partition: ev.Partition}, Value: ev.Value, Offset: off}},
				Error: ev.Error})
			delete(sent, ev.Value)
		}
	}
	// Records never answered (none when the producer closed cleanly).
	for v, s := range sent {
		rec.Add(checker.Op{Process: "producer", Kind: checker.KindSend, Status: checker.Unknown, Start: rel(s.at), End: rel(nowMicros()),
			Idempotent: true, Sends: []checker.Send{{TP: checker.TP{Topic: topic, Partition: s.p}, Value: v, Offset: checker.NoOffset}}})
	}
	for _, at := range killAt {
		rec.Add(checker.Op{Process: "nemesis", Kind: checker.KindNemesis, Status: checker.OK, Start: rel(at), End: rel(at), Note: "kill -9 the leader"})
	}
}

// drainInto reads every partition of topic from its start to its end at
// READ_COMMITTED with franz-go, as the "drain" session of rec (one
// KindAssign, then one KindPoll per poll).
func drainInto(ctx context.Context, rec *checker.Recorder, addrs []string, topic string, partitions int32, base int64) error {
	rel := func(ts int64) int64 { return (ts - base) * 1000 }
	acl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	ends, err := endOffsets(ctx, kadm.NewClient(acl), topic)
	acl.Close()
	if err != nil {
		return fmt.Errorf("drain: end offsets: %w", err)
	}
	offs := map[string]map[int32]kgo.Offset{topic: {}}
	var pos []checker.Position
	for p := int32(0); p < partitions; p++ {
		offs[topic][p] = kgo.NewOffset().AtStart()
		pos = append(pos, checker.Position{TP: checker.TP{Topic: topic, Partition: p}, Offset: 0})
	}
	now := rel(nowMicros())
	rec.Add(checker.Op{Process: "drain", Kind: checker.KindAssign, Status: checker.OK, Start: now, End: now, Positions: pos, ReadCommitted: true})
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumePartitions(offs), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	defer cons.Close()
	next := map[int32]int64{}
	for {
		done := true
		for p, end := range ends {
			if next[p] < end {
				done = false
			}
		}
		if done {
			return nil
		}
		start := rel(nowMicros())
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("drain: read to %v of %v: %w", next, ends, ctx.Err())
		}
		var reads []checker.Record
		fs.EachRecord(func(r *kgo.Record) {
			reads = append(reads, checker.Record{TP: checker.TP{Topic: topic, Partition: r.Partition}, Offset: r.Offset, Value: string(r.Value)})
			next[r.Partition] = r.Offset + 1
		})
		if len(reads) > 0 {
			rec.Add(checker.Op{Process: "drain", Kind: checker.KindPoll, Status: checker.OK, Start: start, End: rel(nowMicros()),
				Reads: reads, ReadCommitted: true})
		}
	}
}
