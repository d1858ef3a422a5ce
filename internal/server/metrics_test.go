package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMetricsEndpoint(t *testing.T) {
	tb := startBroker(t, "", map[string]string{"strata.metrics.listener": "127.0.0.1:0"})
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, nil, "m"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("m"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumeAll(t, tb, "m", 1)
	base := "http://" + tb.Server().MetricsAddr().String()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	wants := []string{
		`strata_requests_total{api="Produce"}`, `strata_request_duration_seconds_bucket{api="Produce"`,
		`strata_open_connections`, `strata_requests_total{api="Fetch"}`, `strata_topic_bytes_in_total{topic="m"}`, `strata_topic_bytes_out_total{topic="m"}`,
		`strata_partition_size_bytes{partition="0",topic="m"}`, `strata_partition_high_watermark{partition="0",topic="m"} 1`,
		`strata_fetch_sendfile_calls_total`,
		`strata_partition_log_start_offset{partition="0",topic="m"} 0`, `strata_partition_log_end_offset{partition="0",topic="m"} 1`,
		`strata_group_groups{state="Stable"}`, `strata_group_members`, `strata_group_offset_commits_total`,
		`strata_cleaner_max_dirty_percent`, `strata_cleaner_rounds_total`, `strata_cleaner_uncleanable_partitions_count`,
	}
	missing := func(body string) []string {
		var out []string
		for _, want := range wants {
			if !strings.Contains(body, want) {
				out = append(out, want)
			}
		}
		return out
	}
	// A request's count and its duration are recorded after its answer is
	// written, each on its own, so poll until every series is there.
	var body string
	for i := 0; i < 100; i++ {
		var code int
		code, body = get("/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		if len(missing(body)) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m := missing(body); len(m) > 0 {
		t.Errorf("/metrics lacks %q", m)
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "strata_requests_total") {
				t.Log(l)
			}
		}
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz: %d", code)
	}
	if code, _ := get("/v1/compaction"); code != 200 {
		t.Errorf("/v1/compaction: %d", code)
	}
}

// TestMetricsInternalTopicsAndLag checks that a fresh broker exports no
// per-partition series for its internal topics (only their size per
// topic) unless strata.metrics.internal.partitions is set, the renamed
// cleaner metric, and consumer group lag per group and topic.
func TestMetricsInternalTopicsAndLag(t *testing.T) {
	scrape := func(tb interface{ MetricsAddr() string }) string {
		t.Helper()
		resp, err := http.Get("http://" + tb.MetricsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	tb := startBroker(t, "", map[string]string{"strata.metrics.listener": "127.0.0.1:0", "offsets.topic.num.partitions": "50"})
	body := scrape(tb)
	for _, want := range []string{`strata_topic_size_bytes{topic="__consumer_offsets"}`, `strata_topic_size_bytes{topic="__transaction_state"}`,
		"strata_cleaner_recopy_percent "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `topic="__consumer_offsets",`) || strings.Contains(body, `partition="0",topic="__`) {
		t.Errorf("per-partition series of internal topics exported by default")
	}
	n := 0
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "strata_") {
			n++
		}
	}
	if n > 150 {
		t.Errorf("a fresh broker exports %d strata_ series", n)
	}

	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 2, 1, nil, "m"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("m"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x"), Partition: int32(i % 2)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "m", Partition: 0, At: 1, LeaderEpoch: -1}) // end 3: lag 2
	offs.Add(kadm.Offset{Topic: "m", Partition: 1, At: 2, LeaderEpoch: -1}) // end 2: lag 0
	if err := tb.Admin().CommitAllOffsets(ctx, "lagging", offs); err != nil {
		t.Fatal(err)
	}
	if body := scrape(tb); !strings.Contains(body, `strata_consumer_group_lag{group="lagging",topic="m"} 2`+"\n") {
		t.Errorf("no lag series for group lagging on m:\n%s", grepLines(body, "strata_consumer_group_lag"))
	}

	all := startBroker(t, "", map[string]string{"strata.metrics.listener": "127.0.0.1:0", "strata.metrics.internal.partitions": "true"})
	if body := scrape(all); !strings.Contains(body, `strata_partition_size_bytes{partition="0",topic="__consumer_offsets"}`) {
		t.Errorf("strata.metrics.internal.partitions=true: no per-partition series of __consumer_offsets")
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
