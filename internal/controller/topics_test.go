package controller

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/meta"
)

// TestCreatePartitionsKeepsConcurrentAlter: a config alter committed
// between CreatePartitions' decision and its write survives: the write
// compares on the revision of the topic value it carries, so it loses the
// compare and decides again on the altered topic, instead of writing back
// the configs it read before (the alter once vanished, its answer ok).
func TestCreatePartitionsKeepsConcurrentAlter(t *testing.T) {
	st, cache := startStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := meta.NewSession(ctx, st.Client(), 3*time.Second, 500*time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := st.Register(ctx, meta.Broker{ID: 1, DirectoryID: "dir"}, s.Lease()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, cache, "the broker", func(v *meta.View) bool { return len(v.Brokers) == 1 })
	admin := &Admin{Store: st, Cache: cache, Policy: func(*meta.Topic) Policy { return Policy{MinISR: 1} }}
	if err := admin.CreateTopic(ctx, TopicRequest{Name: "t", ID: "tid", Partitions: 1, RF: 1,
		Configs: map[string]string{"retention.ms": "1000"}}, false); err != nil {
		t.Fatal(err)
	}
	alters := 0
	admin.beforeWrite = func() {
		if alters++; alters > 1 {
			return
		}
		// Another broker's alter, committed after this request decided.
		if err := admin.AlterTopicConfigs(ctx, "t", func(map[string]string) (map[string]string, error) {
			return map[string]string{"retention.ms": "2000"}, nil
		}, false); err != nil {
			t.Errorf("alter: %v", err)
		}
	}
	if err := admin.CreatePartitions(ctx, "t", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	if alters < 2 {
		t.Fatalf("CreatePartitions wrote once (%d decisions) over a topic altered since it was read", alters)
	}
	resp, err := st.Client().Get(ctx, st.Keys().Topic("t"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("topic key: %v %v", resp, err)
	}
	var got meta.Topic
	if err := json.Unmarshal(resp.Kvs[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	if got.Partitions != 3 || got.Configs["retention.ms"] != "2000" {
		t.Fatalf("after the alter and CreatePartitions: %d partitions, configs %v (want 3 and retention.ms=2000)", got.Partitions, got.Configs)
	}
	v := waitFor(t, cache, "three partitions", func(v *meta.View) bool { return len(v.Parts["tid"]) == 3 })
	if c := v.Topics["t"].Configs["retention.ms"]; c != "2000" {
		t.Fatalf("view: retention.ms=%s", c)
	}
}
