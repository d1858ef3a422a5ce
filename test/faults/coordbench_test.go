package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCoordinatorFailoverTime measures (STRATA_LONG=1 only; it asserts
// nothing about time) how long the coordinators of 1,000 consumer groups
// and 1,000 transactional ids are unavailable when the broker holding a
// third of them is killed with SIGKILL: every group has a committed offset
// and every transactional id a producer id; from the signal, each group
// commits again (OffsetCommit, retried until accepted) and each
// transactional id calls InitProducerId again, 50 at a time, and the time
// until the last succeeds is logged for docs/benchmarks.md. The broker
// session timeout is 4 s (replicatedCluster), so most of the figure is the
// controller noticing the death; the rest is the new leaders loading the
// __consumer_offsets / __transaction_state partitions and the clients
// finding the new coordinators.
func TestCoordinatorFailoverTime(t *testing.T) {
	if !long() {
		t.Skip("a measurement: STRATA_LONG=1")
	}
	const n, workers = 1000, 50
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var extra []string
	if v := os.Getenv("STRATA_BENCH_DURABLE_ACKS"); v != "" {
		extra = append(extra, "--strata.durable.acks="+v)
	}
	procs, addrs := replicatedCluster(t, ctx, extra...)
	admin := newAdmin(t, addrs)
	createTopics(t, ctx, admin, 1, "bench")
	groups := make([]string, n)
	txnIDs := make([]string, n)
	for i := range groups {
		groups[i], txnIDs[i] = fmt.Sprintf("bench-group-%d", i), fmt.Sprintf("bench-txn-%d", i)
	}
	commit := func(ctx context.Context, cl *kgo.Client, g string, at int64) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = g, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "bench"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = at
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("malformed answer")
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	initPID := func(ctx context.Context, cl *kgo.Client, id string) error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	// Each worker has its own client: a broker serves a connection's
	// requests one at a time (as Kafka does), so one client's pipelined
	// commits would wait for each other's replication.
	clients := make([]*kgo.Client, workers)
	for i := range clients {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.MetadataMinAge(250*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		clients[i] = cl
	}
	// all runs fn over every key with workers at a time, each retried until
	// it succeeds; it returns how long the slowest took.
	all := func(keys []string, fn func(context.Context, *kgo.Client, string) error) time.Duration {
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := clients[w]
				for i := int(next.Add(1) - 1); i < len(keys); i = int(next.Add(1) - 1) {
					for try := 0; ; try++ {
						rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
						err := fn(rctx, cl, keys[i])
						rcancel()
						if err == nil || ctx.Err() != nil {
							break
						}
						if try == 100 {
							t.Errorf("%s: still failing after 100 tries: %v", keys[i], err)
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	commitAll := func(at int64) func(context.Context, *kgo.Client, string) error {
		return func(ctx context.Context, cl *kgo.Client, g string) error { return commit(ctx, cl, g, at) }
	}
	t.Logf("setup: %d groups committed in %v, %d transactional ids initialized in %v",
		n, all(groups, commitAll(1)), n, all(txnIDs, initPID))
	// The victim: the broker coordinating the most groups and ids.
	load := make([]int, len(procs))
	for _, g := range groups[:100] {
		if i := coordinatorIndex(ctx, addrs, 0, g); i >= 0 {
			load[i]++
		}
	}
	victim := slices.Index(load, slices.Max(load))
	t.Logf("coordinators of the first 100 groups per broker: %v; killing broker-%d", load, victim+1)
	killed := time.Now()
	if err := procs[victim].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	var groupsBack, txnsBack time.Duration
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); all(groups, commitAll(2)); groupsBack = time.Since(killed) }()
	go func() { defer wg.Done(); all(txnIDs, initPID); txnsBack = time.Since(killed) }()
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal(ctx.Err())
	}
	t.Logf("kill -9 of broker-%d -> every one of %d groups committed again after %v, every one of %d transactional ids initialized again after %v",
		victim+1, n, groupsBack.Round(time.Millisecond), n, txnsBack.Round(time.Millisecond))
	offs, err := admin.FetchOffsets(ctx, groups[0])
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("bench", 0); o.At != 2 {
		t.Errorf("group %s committed %d, want 2", groups[0], o.At)
	}
}

// TestCoordinatorReplicationCost measures (STRATA_LONG=1 only) what
// replicating the coordinators' logs costs, in one run: a three-node
// cluster with __consumer_offsets / __transaction_state and the data topic
// replicated once, then one with them replicated three times
// (min.insync.replicas=2, the defaults). Logged: OffsetCommit throughput
// (16 committers, one commit of one partition in flight each, for 10 s),
// and the latency of whole transactions (InitProducerId once, then
// produce one record to one partition and commit, 300 times in a row)
// at p50 and p99.
func TestCoordinatorReplicationCost(t *testing.T) {
	if !long() {
		t.Skip("a measurement: STRATA_LONG=1")
	}
	type figures struct {
		commitsPerSec float64
		p50, p99      time.Duration
	}
	measure := func(t *testing.T, rf int) figures {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		r := strconv.Itoa(rf)
		isr := "2"
		if rf == 1 {
			isr = "1"
		}
		procs, addrs := replicatedCluster(t, ctx, "--offsets.topic.replication.factor", r,
			"--transaction.state.log.replication.factor", r, "--transaction.state.log.min.isr", isr,
			"--default.replication.factor", r, "--min.insync.replicas", isr)
		defer func() {
			for _, p := range procs {
				p.Stop()
			}
		}()
		admin := newAdmin(t, addrs)
		createTopics2(t, ctx, admin, 16, int16(rf), "bench")
		// OffsetCommit throughput: 16 groups, one committer each.
		var commits atomic.Int64
		var wg sync.WaitGroup
		deadline := time.Now().Add(10 * time.Second)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
				if err != nil {
					t.Error(err)
					return
				}
				defer cl.Close()
				adm := kadm.NewClient(cl)
				g := fmt.Sprintf("commit-bench-%d", w)
				for i := int64(1); time.Now().Before(deadline); i++ {
					offs := kadm.Offsets{}
					offs.Add(kadm.Offset{Topic: "bench", Partition: int32(w), At: i, LeaderEpoch: -1})
					resp, err := adm.CommitOffsets(ctx, g, offs)
					if err == nil {
						err = resp.Error()
					}
					if err != nil {
						continue
					}
					commits.Add(1)
				}
			}()
		}
		start := time.Now()
		wg.Wait()
		var f figures
		f.commitsPerSec = float64(commits.Load()) / time.Since(start).Seconds()
		t.Logf("RF=%d: %.0f OffsetCommits/s", rf, f.commitsPerSec)
		// Transaction latency.
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID("latency-"+r), kgo.DefaultProduceTopic("bench"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var took, ends []time.Duration
		for i := 0; i < 300; i++ {
			s := time.Now()
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
			err := cl.ProduceSync(pctx, &kgo.Record{Partition: int32(i % 16), Value: []byte("x")}).FirstErr()
			pcancel()
			if err != nil {
				t.Fatalf("transaction %d: produce: %v", i, err)
			}
			e := time.Now()
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			ends = append(ends, time.Since(e))
			took = append(took, time.Since(s))
		}
		slices.Sort(took)
		slices.Sort(ends)
		f.p50, f.p99 = took[len(took)/2], took[len(took)*99/100]
		t.Logf("RF=%d: transaction (begin, one record, commit) p50 %v p99 %v; its EndTxn (commit) p50 %v p99 %v",
			rf, f.p50.Round(100*time.Microsecond), f.p99.Round(100*time.Microsecond),
			ends[len(ends)/2].Round(100*time.Microsecond), ends[len(ends)*99/100].Round(100*time.Microsecond))
		return f
	}
	var one, three figures
	t.Run("RF=1", func(t *testing.T) { one = measure(t, 1) })
	t.Run("RF=3", func(t *testing.T) { three = measure(t, 3) })
	if one.commitsPerSec > 0 && one.p50 > 0 {
		t.Logf("RF=3 / RF=1: OffsetCommit throughput %.2fx; transaction latency p50 %.2fx, p99 %.2fx",
			three.commitsPerSec/one.commitsPerSec, float64(three.p50)/float64(one.p50), float64(three.p99)/float64(one.p99))
	}
}

// createTopics2 creates topics with a given replication factor.
func createTopics2(t *testing.T, ctx context.Context, admin *kadm.Client, partitions int32, rf int16, topics ...string) {
	t.Helper()
	for _, topic := range topics {
		r, err := admin.CreateTopic(ctx, partitions, rf, nil, topic)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
}

// TestTxnVerifyCost measures (STRATA_LONG=1 only) the KIP-890 part 1
// verification of transactions that write many partitions across brokers:
// three nodes (internal topics RF=3), a data topic of 12 partitions at RF=1
// spread over the three, and one transactional producer running 150
// transactions of 12 records, one per partition, flushed together (each
// leader gets one produce request per transaction, and two of the three
// verify it with the coordinator on another broker). Logged: the produce
// phase (Flush) and whole-transaction p50/p99, and the verification
// requests the brokers sent (strata_txn_verify_*_total, 0 on binaries
// before the batching). For docs/benchmarks.md; it asserts nothing about
// time.
func TestTxnVerifyCost(t *testing.T) {
	if !long() {
		t.Skip("a measurement: STRATA_LONG=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	metrics := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	procs := startReplicated(t, ctx, addrs, nil, metrics)
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	admin := newAdmin(t, addrs)
	one := "1"
	if r, err := admin.CreateTopic(ctx, 12, 1, map[string]*string{"min.insync.replicas": &one}, "verify"); err != nil || r.Err != nil {
		t.Fatalf("create verify: %v %v", err, r.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID("verify-cost"), kgo.DefaultProduceTopic("verify"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ManualFlushing())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var produce, whole []time.Duration
	for i := 0; i < 150; i++ {
		s := time.Now()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var perr atomic.Value
		for p := int32(0); p < 12; p++ {
			cl.Produce(ctx, &kgo.Record{Partition: p, Value: []byte("x")}, func(_ *kgo.Record, err error) {
				if err != nil {
					perr.Store(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err, _ := perr.Load().(error); err != nil {
			t.Fatalf("transaction %d: produce: %v", i, err)
		}
		if i >= 10 { // the first ones find coordinators and connections
			produce = append(produce, time.Since(s))
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		if i >= 10 {
			whole = append(whole, time.Since(s))
		}
	}
	slices.Sort(produce)
	slices.Sort(whole)
	q := func(ds []time.Duration, f float64) time.Duration {
		return ds[int(float64(len(ds)-1)*f)].Round(100 * time.Microsecond)
	}
	var reqs, parts, served float64
	for _, m := range metrics {
		reqs += scrapeCounter(t, m, "strata_txn_verify_requests_total")
		parts += scrapeCounter(t, m, "strata_txn_verify_partitions_total")
		served += scrapeCounter(t, m, `strata_requests_total{api="AddPartitionsToTxn"}`)
	}
	t.Logf("140 transactions of 12 partitions: produce phase p50 %v p99 %v; whole transaction p50 %v p99 %v; "+
		"AddPartitionsToTxn served %.0f (the client's and the brokers'); verifications sent: %.0f requests for %.0f partitions",
		q(produce, 0.5), q(produce, 0.99), q(whole, 0.5), q(whole, 0.99), served, reqs, parts)
}

// scrapeCounter reads one unlabelled counter from a metrics listener, 0
// when the binary does not export it.
func scrapeCounter(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
