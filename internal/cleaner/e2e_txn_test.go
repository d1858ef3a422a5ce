// The broker-level tests are left out of the invariants build: under the
// tag scripts/test.sh runs only the model test, and these would rebuild
// every package above storage (servertest imports the whole broker).

//go:build !invariants

package cleaner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/cleaner"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestEndToEndTransactionalCompaction drives a real broker with a franz-go
// transactional producer on a compacted topic: transactions commit or
// abort (some keys are written only by aborted transactions, some keys'
// latest write is aborted), plain writes interleave, the admin API runs a
// cleaning, and then a READ_COMMITTED consumer sees exactly the latest
// committed value of every key, a READ_UNCOMMITTED consumer sees no
// aborted record below the cleaned offset, and after a broker restart the
// same transactional producer keeps committing.
func TestEndToEndTransactionalCompaction(t *testing.T) {
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	seeds := kgo.SeedBrokers(srv.Addr())
	txn, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic("txusers"), kgo.TransactionalID("cleaner-e2e"),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(0),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	plain, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic("txusers"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	adm := kadm.NewClient(plain)
	vers, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vers {
		if v.Err != nil {
			t.Fatal(v.Err)
		}
		if _, _, ok := v.KeyVersions(26); !ok { // EndTxn
			t.Skip("the broker does not serve transactions")
		}
	}
	policy, segBytes, ratio := "compact", "4096", "0.01"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": &policy, "segment.bytes": &segBytes, "min.cleanable.dirty.ratio": &ratio,
	}, "txusers"); err != nil {
		t.Fatal(err)
	}

	committed := map[string]string{}
	abortedVals := map[string]bool{}
	lastCommitted := int64(-1) // offset of the newest committed record
	runTxn := func(i int, commit bool) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatalf("begin %d: %v", i, err)
		}
		pending := map[string]string{}
		for j := 0; j < 4; j++ {
			k := fmt.Sprint("k-", (i*3+j)%17)
			if !commit && j == 3 {
				k = fmt.Sprint("only-aborted-", i) // no committed write ever
			}
			v := fmt.Sprintf("t%d-%d-%v", i, j, commit)
			r, err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}).First()
			if err != nil {
				t.Fatalf("produce in txn %d: %v", i, err)
			}
			pending[k] = v
			if commit {
				lastCommitted = max(lastCommitted, r.Offset)
			}
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatalf("end txn %d (commit %v): %v", i, commit, err)
		}
		for k, v := range pending {
			if commit {
				committed[k] = v
			} else {
				abortedVals[v] = true
			}
		}
	}
	for i := 0; i < 60; i++ {
		runTxn(i, i%3 != 1)
		if i%5 == 0 {
			k := fmt.Sprint("k-", i%17)
			v := fmt.Sprint("plain-", i)
			r, err := plain.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}).First()
			if err != nil {
				t.Fatalf("plain produce: %v", err)
			}
			committed[k] = v
			lastCommitted = max(lastCommitted, r.Offset)
		}
	}

	resp, err := http.Post("http://"+srv.MetricsAddr()+"/v1/compaction/run?topic=txusers&partition=0", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st []cleaner.PartitionStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("run: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if len(st) != 1 || st[0].LastRecordsRemoved == 0 {
		t.Fatalf("status after run: %+v", st)
	}
	cleanedTo := st[0].FirstDirtyOffset

	read := func(level kgo.IsolationLevel) []*kgo.Record {
		t.Helper()
		cons, err := kgo.NewClient(seeds, kgo.ConsumeTopics("txusers"), kgo.FetchIsolationLevel(level),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		var out []*kgo.Record
		// The newest committed record is the latest of its key: it
		// survives compaction and both isolation levels return it.
		for last := int64(-1); last < lastCommitted; {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("fetch: %v", err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				last = r.Offset
				out = append(out, r)
			})
		}
		return out
	}
	check := func() {
		t.Helper()
		view := map[string]string{}
		for _, r := range read(kgo.ReadCommitted()) {
			if abortedVals[string(r.Value)] {
				t.Fatalf("READ_COMMITTED consumer got aborted record %s=%s at %d", r.Key, r.Value, r.Offset)
			}
			view[string(r.Key)] = string(r.Value)
		}
		for k, v := range committed {
			if view[k] != v {
				t.Fatalf("key %s: READ_COMMITTED consumer sees %q, want %q", k, view[k], v)
			}
		}
		for k := range view {
			if _, ok := committed[k]; !ok {
				t.Fatalf("key %s was only written by aborted transactions", k)
			}
		}
		for _, r := range read(kgo.ReadUncommitted()) {
			if abortedVals[string(r.Value)] && r.Offset < cleanedTo {
				t.Fatalf("aborted record %s=%s at %d survived cleaning up to %d", r.Key, r.Value, r.Offset, cleanedTo)
			}
		}
	}
	check()

	// Restart on the same port; the same transactional producer keeps
	// committing.
	srv.RestartSamePort()
	for i := 60; i < 66; i++ {
		runTxn(i, i%2 == 0)
	}
	check()
}
