package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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
	// Requests are counted right after their answer is written, so poll.
	var body string
	for i := 0; i < 100; i++ {
		var code int
		code, body = get("/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		if strings.Contains(body, `strata_requests_total{api="Produce"}`) && strings.Contains(body, `strata_requests_total{api="Fetch"}`) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{
		`strata_requests_total{api="Produce"}`, `strata_request_duration_seconds_bucket{api="Produce"`,
		`strata_open_connections`, `strata_requests_total{api="Fetch"}`, `strata_topic_bytes_in_total{topic="m"}`, `strata_topic_bytes_out_total{topic="m"}`,
		`strata_partition_size_bytes{partition="0",topic="m"}`, `strata_partition_high_watermark{partition="0",topic="m"} 1`,
		`strata_fetch_sendfile_calls_total`,
		`strata_partition_log_start_offset{partition="0",topic="m"} 0`, `strata_partition_log_end_offset{partition="0",topic="m"} 1`,
		`strata_group_groups{state="Stable"}`, `strata_group_members`, `strata_group_offset_commits_total`,
		`strata_cleaner_max_dirty_percent`, `strata_cleaner_rounds_total`, `strata_cleaner_uncleanable_partitions_count`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
			for _, l := range strings.Split(body, "\n") {
				if strings.HasPrefix(l, "strata_requests_total") {
					t.Log(l)
				}
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
