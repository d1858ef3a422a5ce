package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCompactionCLI checks the CLI side of the admin API contract
// (GET /v1/compaction, POST /v1/compaction/run) against a stand-in HTTP
// handler; the broker side is tested by the cleaner/server packages.
func TestCompactionCLI(t *testing.T) {
	bin := buildStrata(t)
	var lastRun string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/compaction", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("topic") {
		case "", "user-profiles":
			w.Write([]byte(`[{"topic":"user-profiles","partition":0,"dirty_ratio":0.75,"clean_bytes":1700000000000,"in_progress":false},
				{"topic":"user-profiles","partition":1,"dirty_ratio":0,"in_progress":true,"error":null}]`))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"unknown topic \"` + r.URL.Query().Get("topic") + `\""}`))
		}
	})
	mux.HandleFunc("POST /v1/compaction/run", func(w http.ResponseWriter, r *http.Request) {
		lastRun = r.URL.RawQuery
		w.Write([]byte(`[{"topic":"user-profiles","partition":1,"bytes_before":2048,"bytes_after":1024,"records_removed":10}]`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	a := "--admin=" + srv.URL

	out := ok(t, bin, "", "compaction", "status", a)
	want := "TOPIC          PARTITION  DIRTY_RATIO  IN_PROGRESS  ERROR\n" +
		"user-profiles  0          0.75         false        -\n" +
		"user-profiles  1          0            true         null\n"
	if out != want {
		t.Errorf("status table:\n%s\nwant:\n%s", out, want)
	}
	out = ok(t, bin, "", "compaction", "status", "--all", a)
	want = "TOPIC          PARTITION  CLEAN_BYTES    DIRTY_RATIO  ERROR  IN_PROGRESS\n" +
		"user-profiles  0          1700000000000  0.75         -      false\n" +
		"user-profiles  1          -              0            null   true\n"
	if out != want {
		t.Errorf("status --all table:\n%s\nwant:\n%s", out, want)
	}
	out = ok(t, bin, "", "compaction", "status", "user-profiles", "-o", "json", a)
	if !strings.HasPrefix(out, "[\n  {\n    \"topic\": \"user-profiles\"") {
		t.Errorf("status json:\n%s", out)
	}
	out = ok(t, bin, "", "compaction", "run", "user-profiles", "--partition", "1", a)
	if lastRun != "partition=1&topic=user-profiles" || !strings.Contains(out, "BYTES_AFTER") || !strings.Contains(out, "1024") {
		t.Errorf("run: query %q output:\n%s", lastRun, out)
	}
	fails(t, bin, "strata: unknown topic \"nope\"\n", "compaction", "status", "nope", a)
	fails(t, bin, "strata: accepts 1 arg(s), received 0\n", "compaction", "run", a)
	r := run(t, bin, "", "compaction", "status", "--admin", "http://127.0.0.1:1")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "strata: cannot reach admin API at http://127.0.0.1:1: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("admin down: %+v", r)
	}
}
