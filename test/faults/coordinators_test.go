package faults

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/faults"
)

// coordinatorIndex is the index of the broker coordinating key (type 0:
// group, 1: transactional id), -1 if none answers.
func coordinatorIndex(ctx context.Context, addrs []string, typ int8, key string) int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return -1
	}
	defer cl.Close()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorType, req.CoordinatorKeys = 4, typ, []string{key}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil || len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
		return -1
	}
	n := int(resp.Coordinators[0].NodeID)
	if n < 1 || n > len(addrs) {
		return -1
	}
	return n - 1
}

// TestCoordinatorKill: three broker processes, the internal topics and the
// data topics replicated three times (min.insync.replicas=2). A
// consume-transform-produce pipeline (franz-go GroupTransactSession: a
// consumer group, offsets committed in the producer's transactions) moves
// its records from "in" to "out" while the broker coordinating its
// transactional id is killed with SIGKILL and restarted, then the broker
// coordinating its group. Both coordinators move with the leadership of
// their partitions (the new leaders load them; transactions inherited in
// PrepareCommit/PrepareAbort are completed, open ones aborted), the group's
// members rejoin at the committed offsets. A READ_COMMITTED read of "out"
// must hold every input record exactly once (committed transactions whole,
// aborted ones invisible, no offset rolled back) and every partition's last
// stable offset must reach its end (no transaction left hanging).
//
// The default run moves 60 records through one kill (the transaction
// coordinator's broker; the group coordinator kills are
// TestGroupCoordinatorKillClients'); STRATA_LONG=1 moves 300 through both.
func TestCoordinatorKill(t *testing.T) {
	total, batch, killGroup := 60, 20, false
	if long() {
		total, batch, killGroup = 300, 10, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	procs, addrs := replicatedCluster(t, ctx)
	adm, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	admin := kadm.NewClient(adm)
	for _, topic := range []string{"in", "out"} {
		if _, err := admin.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i++ {
		prod.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	const txnID, group = "pipeline", "pipeline-group"
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addrs...),
		kgo.TransactionalID(txnID), kgo.ConsumerGroup(group), kgo.ConsumeTopics("in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.RecordDeliveryTimeout(90*time.Second),
		kgo.TransactionTimeout(20*time.Second), kgo.SessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	kill := func(what string, typ int8, key string) {
		i := -1
		for tries := 0; i < 0 && tries < 40 && ctx.Err() == nil; tries++ {
			if i = coordinatorIndex(ctx, addrs, typ, key); i < 0 {
				time.Sleep(250 * time.Millisecond)
			}
		}
		if i < 0 {
			t.Fatalf("no coordinator of %s %s", what, key)
		}
		t.Logf("kill -9 %s (coordinator of %s %s)", procs[i].Name(), what, key)
		if err := procs[i].Kill(ctx); err != nil {
			t.Fatal(err)
		}
		go func(p *faults.Proc) { // restarted while the pipeline runs on
			if err := p.Start(ctx); err != nil {
				t.Errorf("restart %s: %v", p.Name(), err)
			}
		}(procs[i])
	}
	moved, aborted := 0, 0
	killedTxn, killedGroup := false, false
	for moved < total {
		if ctx.Err() != nil {
			t.Fatalf("the pipeline moved %d of %d records", moved, total)
		}
		switch {
		case !killedTxn && moved >= total/3:
			killedTxn = true
			kill("transactional id", 1, txnID)
		case killGroup && !killedGroup && moved >= 2*total/3:
			killedGroup = true
			kill("group", 0, group)
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := sess.PollRecords(pctx, batch)
		pcancel()
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: r.Value}, nil)
			n++
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		switch {
		case err != nil:
			aborted++
			t.Logf("transaction of %d records not committed: %v", n, err)
		case committed:
			moved += n
		default:
			aborted++
		}
	}
	t.Logf("moved %d records, %d transactions not committed", moved, aborted)
	if moved != total {
		t.Errorf("committed transactions moved %d records, want %d (records moved twice)", moved, total)
	}

	// Every input exactly once in out, READ_COMMITTED.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]int{}
	for read := 0; read < total; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records of out", read, total)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			read++
		})
	}
	for i := 0; i < total; i++ {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("record %d read %d times from out", i, c)
		}
	}
	var lastErr error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if lastErr = stableAtEnd(ctx, admin, "out"); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("a transaction left hanging: %v", lastErr)
	}
}

// stableAtEnd checks that every partition's last stable offset is its end.
func stableAtEnd(ctx context.Context, admin *kadm.Client, topic string) error {
	ends, err := admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	lsos, err := admin.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return err
	}
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		l, _ := lsos.Lookup(o.Topic, o.Partition)
		if o.Err != nil || l.Err != nil || l.Offset != o.Offset {
			errs = append(errs, fmt.Errorf("%s-%d: last stable offset %d, end %d (%v %v)", o.Topic, o.Partition, l.Offset, o.Offset, o.Err, l.Err))
		}
	})
	return errors.Join(errs...)
}

var _ = kerr.NotCoordinator
