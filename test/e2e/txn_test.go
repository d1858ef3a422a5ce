package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnOutcome is what the producer knows about one transaction.
type txnOutcome int

const (
	txnCommitted txnOutcome = iota // EndTransaction(commit) returned nil
	txnAborted                     // aborted on purpose and acknowledged
	txnUnknown                     // the broker died before the answer
)

// TestTxnCrash SIGKILLs the broker while a transactional producer commits
// and aborts transactions across partitions. After each restart a new
// producer with the same transactional id takes over (fencing the old one
// and settling its open transaction). At the end a READ_COMMITTED reader
// must see every committed transaction whole, no aborted one, and each
// transaction whose answer was lost either whole or not at all.
func TestTxnCrash(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	rounds := 3
	if os.Getenv("STRATA_LONG") == "1" {
		rounds = 20
	}
	dir := t.TempDir()
	flags := []string{"--listeners", "PLAINTEXT://127.0.0.1:" + strconv.Itoa(freePort(t))}
	p := startBroker(t, dir, flags...)
	ctx := ctxFor(t, 4*time.Minute+time.Duration(rounds)*15*time.Second)
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, crashPartitions, 1, nil, "txn"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	const perTxn = 6
	var mu sync.Mutex
	outcomes := map[int]txnOutcome{}
	settled := func() int { mu.Lock(); defer mu.Unlock(); return len(outcomes) }

	var addr sync.Map
	addr.Store("kafka", p.Kafka)
	pctx, stop := context.WithCancel(ctx)
	prodDone := make(chan struct{})
	go func() { // owner: this test; ends when stop is called
		defer close(prodDone)
		txn := 0
		for pctx.Err() == nil {
			a, _ := addr.Load("kafka")
			cl, err := kgo.NewClient(kgo.SeedBrokers(a.(string)), kgo.TransactionalID("crash-txn"),
				kgo.DefaultProduceTopic("txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.TransactionTimeout(10*time.Second), kgo.RequestTimeoutOverhead(2*time.Second),
				kgo.RecordDeliveryTimeout(5*time.Second), kgo.RetryTimeout(5*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			for pctx.Err() == nil {
				commit := txn%3 != 2
				ok := runOneTxn(pctx, cl, txn, perTxn, commit)
				mu.Lock()
				switch {
				case ok && commit:
					outcomes[txn] = txnCommitted
				case ok:
					outcomes[txn] = txnAborted
				default:
					outcomes[txn] = txnUnknown
				}
				mu.Unlock()
				txn++
				if !ok {
					break // a new producer (same id) settles what this one left
				}
			}
			cl.Close()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for round := 1; round <= rounds; round++ {
		target := settled() + 5 + rng.IntN(20)
		deadline := time.Now().Add(60 * time.Second)
		for settled() < target && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if settled() < target {
			stop()
			t.Fatalf("round %d: transactions stalled at %d (want %d)", round, settled(), target)
		}
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		p.Kill()
		p = startBroker(t, dir, flags...)
		addr.Store("kafka", p.Kafka)
	}
	// Let a few transactions complete on the last broker, then stop.
	target := settled() + 3
	for deadline := time.Now().Add(60 * time.Second); settled() < target && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	<-prodDone

	// A last producer with the same id settles any open transaction.
	fin, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.TransactionalID("crash-txn"), kgo.DefaultProduceTopic("txn"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fin.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := fin.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("settling producer: %v", err)
	}
	fin.Close()

	mu.Lock()
	defer mu.Unlock()
	seen := readCommittedTxns(t, ctx, p.Kafka, "txn", func(counts map[int]int) bool {
		for txn, oc := range outcomes {
			if oc == txnCommitted && counts[txn] < perTxn {
				return false
			}
		}
		return true
	})
	var committed, aborted, unknownWhole, unknownGone int
	for txn, oc := range outcomes {
		n := seen[txn]
		switch {
		case oc == txnCommitted && n != perTxn:
			t.Errorf("committed transaction %d: %d of %d records visible", txn, n, perTxn)
		case oc == txnAborted && n != 0:
			t.Errorf("aborted transaction %d: %d records visible", txn, n)
		case oc == txnUnknown && n != 0 && n != perTxn:
			t.Errorf("transaction %d (answer lost in the crash): %d of %d records visible: not atomic", txn, n, perTxn)
		}
		switch {
		case oc == txnCommitted:
			committed++
		case oc == txnAborted:
			aborted++
		case n == perTxn:
			unknownWhole++
		default:
			unknownGone++
		}
	}
	for txn := range seen {
		if _, ok := outcomes[txn]; !ok {
			t.Errorf("transaction %d visible but never finished by the producer", txn)
		}
	}
	t.Logf("%d committed, %d aborted, lost answers: %d applied whole, %d rolled back", committed, aborted, unknownWhole, unknownGone)
}

// runOneTxn produces n records of transaction txn over the partitions and
// ends it; false when any step failed (the broker died).
func runOneTxn(ctx context.Context, cl *kgo.Client, txn, n int, commit bool) bool {
	if err := cl.BeginTransaction(); err != nil {
		return false
	}
	for i := 0; i < n; i++ {
		r := &kgo.Record{Value: []byte(fmt.Sprintf("t%d-%d", txn, i)), Partition: int32(i % crashPartitions)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			_ = cl.EndTransaction(context.Background(), kgo.TryAbort)
			return false
		}
	}
	ectx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cl.EndTransaction(ectx, kgo.TransactionEndTry(commit)) == nil
}

// readCommittedTxns reads topic at READ_COMMITTED and counts the records
// of each transaction number. It reads until a poll of 2 s brings nothing once complete(counts) holds
// (every committed transaction seen whole), or for at most 60 s without
// it: the broker, just restarted, may take a while to serve the first
// fetch on a loaded machine (a one-node cluster elects its partitions'
// leaders after it registers), which a fixed 2 s wait took for an empty
// topic.
func readCommittedTxns(t *testing.T, ctx context.Context, addr, topic string, complete func(map[int]int) bool) map[int]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	counts := map[int]int{}
	deadline := time.Now().Add(60 * time.Second)
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if len(fs.Records()) == 0 && (complete(counts) || time.Now().After(deadline)) {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			var txn, i int
			if _, err := fmt.Sscanf(strings.Replace(strings.TrimPrefix(string(r.Value), "t"), "-", " ", 1), "%d %d", &txn, &i); err != nil {
				t.Errorf("unexpected record %q", r.Value)
				return
			}
			counts[txn]++
		})
	}
	return counts
}
