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
	"github.com/strata-io/strata/internal/servertest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startServer runs a real broker (servertest) with the metrics listener
// and no background cleaning (tests run it through /v1/compaction).
func startServer(t *testing.T) *servertest.Broker {
	t.Helper()
	return servertest.Start(t, servertest.Options{Metrics: true, Settings: map[string]string{
		"offsets.topic.num.partitions": "1",
		"log.cleaner.backoff.ms":       "3600000",
	}})
}

// TestEndToEndCompaction drives a real broker with franz-go: an idempotent
// producer overwrites and deletes keys of a compacted topic (small
// segments), the admin API runs a cleaning, a consumer reading from the
// start sees exactly the latest value of every live key (across compacted
// gaps), and after a broker restart the same producer keeps producing.
func TestEndToEndCompaction(t *testing.T) {
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr()), kgo.DefaultProduceTopic("users"),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	policy, segBytes, ratio := "compact", "4096", "0.01"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": &policy, "segment.bytes": &segBytes, "min.cleanable.dirty.ratio": &ratio,
	}, "users"); err != nil {
		t.Fatal(err)
	}
	latest := map[string]string{}
	for i := 0; i < 600; i++ {
		k := fmt.Sprint("user-", i%25)
		r := &kgo.Record{Key: []byte(k), Value: []byte(fmt.Sprint("v", i))}
		if i%9 == 0 {
			r.Value = nil // tombstone
			delete(latest, k)
		} else {
			latest[k] = string(r.Value)
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	resp, err := http.Post("http://"+srv.MetricsAddr()+"/v1/compaction/run?topic=users&partition=0", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st []cleaner.PartitionStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("run: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if len(st) != 1 || st[0].Rounds != 1 || st[0].LastRecordsRemoved == 0 {
		t.Fatalf("status after run: %+v", st)
	}

	check := func() int {
		t.Helper()
		cons, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr()), kgo.ConsumeTopics("users"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		end, err := kadm.NewClient(cons).ListEndOffsets(ctx, "users")
		if err != nil {
			t.Fatal(err)
		}
		hw := end["users"][0].Offset
		view := map[string]*string{}
		n := 0
		for last := int64(-1); last < hw-1; {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("fetch: %v", err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				n++
				last = r.Offset
				if r.Value == nil {
					view[string(r.Key)] = nil
					return
				}
				v := string(r.Value)
				view[string(r.Key)] = &v
			})
		}
		for k, v := range latest {
			if view[k] == nil || *view[k] != v {
				t.Fatalf("key %s: consumer sees %v, want %s", k, view[k], v)
			}
		}
		for k, v := range view {
			if _, ok := latest[k]; !ok && v != nil {
				t.Fatalf("deleted key %s has value %s", k, *v)
			}
		}
		return n
	}
	if n := check(); n >= 600 {
		t.Fatalf("consumer read %d records: nothing was compacted", n)
	}
	// ListOffsets earliest is unaffected by compaction.
	start, err := adm.ListStartOffsets(ctx, "users")
	if err != nil || start["users"][0].Offset != 0 {
		t.Fatalf("earliest offset %v %v", start, err)
	}

	// Restart on the same port; the same idempotent producer (same client,
	// producer id and sequence numbers) keeps producing.
	srv.RestartSamePort()
	for i := 0; i < 20; i++ {
		k := fmt.Sprint("user-", i)
		latest[k] = fmt.Sprint("after-", i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(latest[k])}).FirstErr(); err != nil {
			t.Fatalf("produce after restart: %v", err)
		}
	}
	check()
}
