package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/checker"
)

// etl is one consume-transform-produce session: it polls Topic in group
// Group+"-etl", writes one new record per input to the same partition of
// Topic+"-etl", and commits the input offsets in the same transaction
// (kgo.GroupTransactSession). Each poll is recorded as the session's poll;
// each transaction as a txn op whose Reads are the records it consumed, so
// the checker can tell whether one input was processed by two committed
// transactions. After a transaction that did not commit, the session goes
// back to the group's committed offsets: recorded as a rebalance.
func (r *Runner) etl(id int) {
	proc := fmt.Sprintf("etl-%d", id)
	group := r.cfg.Group + "-etl"
	rebalance := func(what string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			r.recordReset(proc, what, m[r.cfg.Topic])
		}
	}
	for r.ctx.Err() == nil {
		opts := append([]kgo.Opt{kgo.SeedBrokers(r.cfg.Brokers...),
			kgo.RetryTimeout(10 * time.Second), kgo.RequestTimeoutOverhead(5 * time.Second)}, r.cfg.ClientOpts...)
		opts = append(opts,
			kgo.TransactionalID(fmt.Sprintf("%s-etl-%d", r.cfg.Topic, id)), kgo.TransactionTimeout(r.cfg.TxnTimeout),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(r.cfg.Topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(500*time.Millisecond), kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second),
			kgo.OnPartitionsAssigned(rebalance("assigned")), kgo.OnPartitionsRevoked(rebalance("revoked")),
			kgo.OnPartitionsLost(rebalance("lost")),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(r.etlTopic()), kgo.ProducerLinger(0))
		sess, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			r.cfg.Logf("%s: session: %v", proc, err)
			sleepCtx(r.ctx, time.Second)
			continue
		}
		for r.ctx.Err() == nil && r.etlOnce(sess, proc, id, group) {
		}
		sess.Close()
	}
}

// recordReset records that a session's position in partitions is no longer
// known (a rebalance, or a rewind to the committed offsets).
func (r *Runner) recordReset(proc, what string, partitions []int32) {
	now := r.rec.Now()
	op := checker.Op{Process: proc, Kind: checker.KindRebalance, Status: checker.OK, Start: now, End: now, Note: what}
	for _, p := range partitions {
		op.Partitions = append(op.Partitions, r.tp(p))
	}
	r.rec.Add(op)
}

// etlOnce polls and, if records came, runs one transaction over them; false
// means the session must be replaced.
func (r *Runner) etlOnce(sess *kgo.GroupTransactSession, proc string, id int, group string) bool {
	pctx, cancel := context.WithTimeout(r.ctx, time.Second)
	start := r.rec.Now()
	fs := sess.PollFetches(pctx)
	cancel()
	poll := checker.Op{Process: proc, Kind: checker.KindPoll, Status: checker.OK, ReadCommitted: true, Start: start, End: r.rec.Now()}
	fs.EachRecord(func(rec *kgo.Record) {
		poll.Reads = append(poll.Reads, checker.Record{TP: r.tp(rec.Partition), Offset: rec.Offset, Value: string(rec.Value)})
	})
	if len(poll.Reads) == 0 {
		return true
	}
	r.rec.Add(poll)

	op := checker.Op{Process: proc, Kind: checker.KindTxn, Idempotent: true, ReadCommitted: true, Group: group,
		Start: start, Reads: poll.Reads}
	next := map[int32]int64{}
	for _, in := range poll.Reads {
		if in.Offset+1 > next[in.TP.Partition] {
			next[in.TP.Partition] = in.Offset + 1
		}
	}
	for p, o := range next {
		op.OffsetCommits = append(op.OffsetCommits, checker.Position{TP: r.tp(p), Offset: o})
	}
	if err := sess.Begin(); err != nil {
		r.cfg.Logf("%s: begin: %v", proc, err)
		return false
	}
	recs := make([]*kgo.Record, len(poll.Reads))
	index := map[*kgo.Record]int{}
	for i, in := range poll.Reads {
		v := r.value("e", id)
		recs[i] = &kgo.Record{Partition: in.TP.Partition, Value: []byte(v)}
		index[recs[i]] = i
		op.Sends = append(op.Sends, checker.Send{TP: checker.TP{Topic: r.etlTopic(), Partition: in.TP.Partition}, Value: v, Offset: checker.NoOffset})
	}
	ectx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produced := true
	for _, res := range sess.ProduceSync(ectx, recs...) {
		if res.Err != nil {
			produced = false
			op.Error = res.Err.Error()
			continue
		}
		op.Sends[index[res.Record]].Offset = res.Record.Offset
	}
	op.Commit = produced
	op.EndStart = r.rec.Now()
	committed, err := sess.End(ectx, kgo.TransactionEndTry(produced))
	op.End = r.rec.Now()
	switch {
	case err == nil && committed:
		op.Status = checker.OK
	case err == nil:
		op.Status, op.Commit = checker.Fail, false // aborted (a rebalance, or a failed produce)
	default:
		op.Status = checker.Unknown
		if op.Error != "" {
			op.Error += "; "
		}
		op.Error += "end: " + err.Error()
	}
	r.rec.Add(op)
	if op.Status != checker.OK {
		// The session rewinds to the group's committed offsets.
		parts := make([]int32, 0, len(next))
		for p := range next {
			parts = append(parts, p)
		}
		r.recordReset(proc, "rewind after "+string(op.Status)+" transaction", parts)
	}
	return err == nil
}
