package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchCLI(t *testing.T) {
	bin := buildStrata(t)
	addr := newCluster(t)
	b := "--brokers=" + addr

	r := run(t, bin, "", "bench", "produce", "-n", "500", "-s", "100", "--keys", "10", "-p", "2", "-t", "bt", b)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "produce bt: 500 records, 0.1 MB in ") || !strings.Contains(r.stdout, "latency ms: p50 ") {
		t.Errorf("bench produce: %+v", r)
	}
	out := ok(t, bin, "", "bench", "consume", "-t", "bt", "-o", "json", "-q", b)
	var res struct {
		Mode    string `json:"mode"`
		Records int64  `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Mode != "consume" || res.Records != 500 {
		t.Errorf("bench consume json: %q %v", out, err)
	}
	out = ok(t, bin, "", "bench", "e2e", "-t", "bt", "-n", "200", "-s", "64", "-o", "json", "-q", b)
	if !strings.Contains(out, `"mode": "e2e"`) || !strings.Contains(out, `"records": 200`) || !strings.Contains(out, `"p99_9"`) {
		t.Errorf("bench e2e: %s", out)
	}
	// --partitions on an existing topic with another count is not ignored.
	fails(t, bin, "strata: topic \"bt\" already exists with 2 partitions, not --partitions 12 (it applies only when bench creates the topic): bench another --topic, or grow this one with strata topic add-partitions bt --to 12\n",
		"bench", "produce", "-n", "1", "-p", "12", "-t", "bt", "-q", b)
	ok(t, bin, "", "bench", "produce", "-n", "1", "-p", "2", "-t", "bt", "-q", b)
	fails(t, bin, "strata: invalid compression \"brotli\": use none, gzip, snappy, lz4 or zstd\n", "bench", "produce", "--compression", "brotli", "-n", "1", b)
	fails(t, bin, "strata: record size must be at least 8 bytes\n", "bench", "e2e", "-s", "4", "-n", "1", b)
	r = run(t, bin, "", "bench", "produce", "-n", "1", "--brokers", "127.0.0.1:1")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "strata: cannot reach broker at 127.0.0.1:1: ") {
		t.Errorf("broker down: %+v", r)
	}
}
