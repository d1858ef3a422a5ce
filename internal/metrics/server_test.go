package metrics

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServer(t *testing.T) {
	reg := NewRegistry()
	c := Counter(reg, "test", "things_total", "Things.")
	c.Add(3)
	var ready atomic.Bool
	s := NewServer("127.0.0.1:0", reg, ready.Load)
	s.Handle("GET /v1/hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hi") }))
	if s.Addr() != nil {
		t.Fatal("addr before start")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(); err == nil {
		t.Error("second Start succeeded")
	}
	base := "http://" + s.Addr().String()
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("healthz %d", code)
	}
	if code, _ := get(t, base+"/readyz"); code != 503 {
		t.Errorf("readyz before ready %d", code)
	}
	s.SetNotReadyDetail(func() string { return "recovering logs: 3 of 7 partitions loaded" })
	if code, body := get(t, base+"/readyz"); code != 503 || body != "not ready: recovering logs: 3 of 7 partitions loaded\n" {
		t.Errorf("readyz with a detail: %d %q", code, body)
	}
	ready.Store(true)
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Errorf("readyz after ready %d", code)
	}
	code, body := get(t, base+"/metrics")
	if code != 200 || !strings.Contains(body, "strata_test_things_total 3") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("metrics %d: %.300s", code, body)
	}
	if code, body := get(t, base+"/v1/hello"); code != 200 || body != "hi" {
		t.Errorf("extra handler %d %q", code, body)
	}
	s.Handle("GET /v1/late", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	if code, _ := get(t, base+"/v1/late"); code != 200 {
		t.Errorf("handler added after start: %d", code)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("still serving after Close")
	}
}

func TestStartBindError(t *testing.T) {
	s := NewServer("256.0.0.1:1", NewRegistry(), nil)
	if err := s.Start(); err == nil || !strings.Contains(err.Error(), "metrics listener 256.0.0.1:1") {
		t.Errorf("got %v", err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}
