package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestServeFlagsAndErrors(t *testing.T) {
	bin := buildStrata(t)
	help := ok(t, bin, "", "serve", "--help")
	for _, want := range []string{
		"--log.dirs string", `(default "./strata-data")`, "--listeners string", `(default "PLAINTEXT://127.0.0.1:9092")`,
		"--strata.metrics.listener", "env STRATA_LOG_DIRS", "--config string", "--log.segment.bytes",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	fails(t, bin, "strata: invalid value \"3\" for configuration log.segment.bytes: must be at least 14 (allowed: [14,...])\n",
		"serve", "--log.segment.bytes", "3")
	fails(t, bin, "strata: unknown flag: --no.such.setting\n", "serve", "--no.such.setting", "1")
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("# test\nfoo.bar=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fails(t, bin, "strata: "+props+":2: unknown broker config \"foo.bar\"\n", "serve", "--config", props)
	r := run(t, bin, "", "serve", "--config", filepath.Join(t.TempDir(), "missing.properties"))
	if r.code != 1 || !strings.HasPrefix(r.stderr, "strata: read config file: open ") {
		t.Errorf("missing config file: %+v", r)
	}
}

// TestServeLifecycle runs the real broker binary, drives it with the admin
// commands, and stops it with SIGTERM.
func TestServeLifecycle(t *testing.T) {
	bin := buildStrata(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--listeners", "PLAINTEXT://127.0.0.1:0", "--strata.metrics.listener", "127.0.0.1:0",
		"--log.dirs", dir, "--strata.log.format", "json")
	cmd.Env = os.Environ()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer func() {
		_ = cmd.Process.Kill()
	}()
	var listening map[string]any
	var seen []string
	for listening == nil {
		line, open := <-lines
		if !open {
			all := strings.Join(seen, "\n")
			if strings.Contains(all, "panic: stub") {
				t.Skip("internal/server is still the contract stub")
			}
			t.Fatalf("broker exited before listening:\n%s", all)
		}
		seen = append(seen, line)
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "strata broker listening" {
			listening = m
		}
	}
	addr, _ := listening["kafka"].(string)
	if addr == "" || listening["log.dirs"] != dir {
		t.Fatalf("listening line: %v", listening)
	}
	b := "--brokers=" + addr
	ok(t, bin, "", "topic", "create", "lifecycle", "--partitions", "2", b)
	fails(t, bin, "strata: create topic \"bad\": invalid value \"3\" for configuration segment.bytes: must be at least 14 (INVALID_CONFIG)\n",
		"topic", "create", "bad", "--config", "segment.bytes=3", b)
	fails(t, bin, "strata: create topic \"bad\": unknown topic config \"remote.storage.enable\" (INVALID_CONFIG)\n",
		"topic", "create", "bad", "--config", "remote.storage.enable=true", b)
	ok(t, bin, "k:v\n", "produce", "lifecycle", "-K:", "--partition", "1", b)
	if out := ok(t, bin, "", "consume", "lifecycle", "-e", "-f", `%p %k %s\n`, b); out != "1 k v\n" {
		t.Errorf("consume from strata: %q", out)
	}
	if out := ok(t, bin, "", "consume", "lifecycle", "-g", "lc-group", "-e", b); out != "v\n" {
		t.Errorf("group consume from strata: %q", out)
	}
	if out := ok(t, bin, "", "group", "describe", "lc-group", b); !strings.Contains(out, "Total lag: 0") || !strings.Contains(out, "lifecycle  1          1") {
		t.Errorf("group describe against strata:\n%s", out)
	}
	if out := ok(t, bin, "", "bench", "e2e", "-t", "lc-bench", "-n", "200", "-s", "64", "-q", b); !strings.HasPrefix(out, "e2e lc-bench: 200 records") {
		t.Errorf("bench e2e against strata: %q", out)
	}
	out := ok(t, bin, "", "topic", "describe", "lifecycle", "-o", "json", b)
	if !strings.Contains(out, `"end_offset": 1`) || strings.Contains(out, `"size_bytes": -1`) {
		t.Errorf("describe against strata:\n%s", out)
	}
	if m, found := listening["metrics"].(string); found {
		admin := "--admin=" + strings.TrimSuffix(m, "/metrics")
		ok(t, bin, "", "topic", "create", "profiles", "--config", "cleanup.policy=compact", b)
		ok(t, bin, "a:1\na:2\nb:1\n", "produce", "profiles", "-K:", b)
		ok(t, bin, "", "compaction", "run", "profiles", admin)
		out := ok(t, bin, "", "compaction", "status", "profiles", "-o", "json", admin)
		if !strings.Contains(out, `"topic": "profiles"`) {
			t.Errorf("compaction status against strata:\n%s", out)
		}
		r := run(t, bin, "", "compaction", "run", "nope", admin)
		if r.code != 1 || !strings.HasPrefix(r.stderr, "strata: ") || !strings.Contains(r.stderr, `"nope"`) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("compaction run on unknown topic: %+v", r)
		}
	}
	if m, ok := listening["metrics"].(string); ok {
		resp, err := http.Get(strings.TrimSuffix(m, "/metrics") + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("healthz: %v %v", resp, err)
		} else {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, strings.Join(rest, "\n"))
		}
	case <-time.After(60 * time.Second):
		t.Fatal("broker did not exit after SIGTERM")
	}
	if !strings.Contains(strings.Join(rest, "\n"), "shutdown complete") {
		t.Errorf("no shutdown complete line:\n%s", strings.Join(rest, "\n"))
	}
}
