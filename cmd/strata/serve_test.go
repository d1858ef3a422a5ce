package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestServeFlagsAndErrors(t *testing.T) {
	bin := buildStrata(t)
	help := ok(t, bin, "", "serve", "--help")
	for _, want := range []string{
		"--log.dirs string (default ./strata-data)", "--listeners string (default PLAINTEXT://127.0.0.1:9092)",
		"--strata.metrics.listener", "STRATA_LOG_DIRS", "--config file", "--log.segment.bytes",
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
	fails(t, bin, "strata: "+props+":2: unknown broker config \"foo.bar\": remove it (docs/configuration.md lists every setting)\n", "serve", "--config", props)
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
	fails(t, bin, "strata: create topic \"bad\": topic config \"remote.storage.enable\" is not supported: Strata has no tiered storage (KIP-405); remove it (INVALID_CONFIG)\n",
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

// TestServeKafkaServerProperties starts `strata serve` with Apache Kafka's
// stock KRaft server.properties (3.8.0 and 2024 trunk) with its data
// directory changed, and its ports, so that the test does not collide with
// a broker on 9092/9093, and nothing else: each file starts a broker (a
// combined KRaft node) that serves clients.
func TestServeKafkaServerProperties(t *testing.T) {
	bin := buildStrata(t)
	for _, file := range []string{"kraft-server-3.8.0.properties", "kraft-server-trunk-1eb7644.properties"} {
		kafkaPort, controllerPort := freePort(t), freePort(t)
		data, err := os.ReadFile(filepath.Join("..", "..", "internal", "config", "testdata", "kafka", file))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.NewReplacer("/tmp/kraft-combined-logs", t.TempDir(), ":9092", ":"+kafkaPort, ":9093", ":"+controllerPort).Replace(string(data))
		props := filepath.Join(t.TempDir(), "server.properties")
		if err := os.WriteFile(props, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		serveAndUse(t, bin, file, props, "127.0.0.1:"+kafkaPort)
	}
}

// serveAndUse starts `strata serve --config props`, waits until it
// listens, produces and consumes one record through addr, and stops it.
func serveAndUse(t *testing.T, bin, name, props, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", props, "--strata.metrics.listener", "")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	var log []string
	for sc.Scan() && !strings.Contains(sc.Text(), "strata broker listening") {
		log = append(log, sc.Text())
	}
	if sc.Err() != nil || ctx.Err() != nil {
		t.Fatalf("%s: the broker did not start:\n%s", name, strings.Join(log, "\n"))
	}
	go io.Copy(io.Discard, stderr)
	b := "--brokers=" + addr
	ok(t, bin, "hello\n", "produce", "stock", b)
	if out := ok(t, bin, "", "consume", "stock", "-e", b); out != "hello\n" {
		t.Errorf("%s: consume from the stock-configured broker: %q", name, out)
	}
}

// freePort returns a TCP port free right now on 127.0.0.1.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// startupWarnings starts cmd, a `strata serve` logging as text, and
// returns the WARN lines of its log up to "strata broker listening"; t's
// cleanup kills it.
func startupWarnings(t *testing.T, cmd *exec.Cmd) []string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	var warns []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "level=WARN") {
			warns = append(warns, line)
		}
		if strings.Contains(line, "strata broker listening") {
			break
		}
	}
	return warns
}

// TestServeWarnings checks the startup warnings: Kafka's thread-pool
// settings named in one line, an unknown STRATA_ variable with a
// suggestion, the deprecated doubled prefix.
func TestServeWarnings(t *testing.T) {
	bin := buildStrata(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--log.dirs", t.TempDir(), "--listeners", "PLAINTEXT://127.0.0.1:0",
		"--strata.metrics.listener", "", "--override", "num.io.threads=16", "--override", "num.network.threads=4",
		"--offsets.topic.num.partitions", "1", "--transaction.state.log.num.partitions", "1")
	cmd.Env = append(os.Environ(), "STRATA_DURABLE_ACK=false", "STRATA_STRATA_LOG_FORMAT=text", "STRATA_BROKERS=x:1")
	var warns []string
	for _, line := range startupWarnings(t, cmd) {
		_, msg, _ := strings.Cut(line, "msg=")
		warns = append(warns, msg)
	}
	want := []string{
		`"accepted without effect: num.io.threads, num.network.threads (Kafka thread-pool settings with no meaning in Strata: each connection is served by its own goroutines and background work runs on its own loops, so there is no pool to size)"`,
		`"environment variable STRATA_DURABLE_ACK names no broker setting and is ignored: did you mean STRATA_DURABLE_ACKS?"`,
		`"environment variable STRATA_STRATA_LOG_FORMAT is deprecated: rename it STRATA_LOG_FORMAT"`,
	}
	if strings.Join(warns, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warns, "\n"), strings.Join(want, "\n"))
	}
}

// TestServePortInUse checks that a taken port stops `strata serve` before
// it creates its data directory, naming the setting to change.
func TestServePortInUse(t *testing.T) {
	bin := buildStrata(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	dir := filepath.Join(t.TempDir(), "data")
	fails(t, bin, "strata: start broker: Kafka listener: "+addr+" is already in use (by another broker?): set listeners to a free address\n",
		"serve", "--log.dirs", dir, "--listeners", "PLAINTEXT://"+addr, "--strata.metrics.listener", "")
	fails(t, bin, "strata: start broker: HTTP listener (metrics and admin API): "+addr+" is already in use (by another broker?): set strata.metrics.listener to a free address\n",
		"serve", "--log.dirs", dir, "--listeners", "PLAINTEXT://127.0.0.1:0", "--strata.metrics.listener", addr)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data directory was created: %v", err)
	}
}

// TestListenerFlags: per-listener settings of any listener name are taken
// as flags (passed on as --override), serve's own flags are left alone.
func TestListenerFlags(t *testing.T) {
	got := listenerFlags([]string{"serve", "--listener.name.internal.ssl.client.auth", "required",
		"--listener.name.sasl_plaintext.plain.sasl.jaas.config=X", "--listener.name.external.sasl.enabled.mechanisms=PLAIN", "--node.id", "2"})
	want := []string{"serve", "--override", "listener.name.internal.ssl.client.auth=required",
		"--listener.name.sasl_plaintext.plain.sasl.jaas.config=X", "--override", "listener.name.external.sasl.enabled.mechanisms=PLAIN", "--node.id", "2"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := listenerFlags([]string{"topic", "--listener.name.x.y", "z"}); len(got) != 3 {
		t.Errorf("other commands changed: %q", got)
	}
}

// TestServeWarnsLoopbackAdvertised: a listener bound to every interface
// with no advertised.listeners entry is advertised as 127.0.0.1 (Kafka
// refuses to start instead), and the start says so: a remote client would
// be sent to 127.0.0.1.
func TestServeWarnsLoopbackAdvertised(t *testing.T) {
	bin := buildStrata(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--log.dirs", t.TempDir(), "--listeners", "PLAINTEXT://0.0.0.0:0",
		"--strata.metrics.listener", "", "--offsets.topic.num.partitions", "1")
	warns := startupWarnings(t, cmd)
	if len(warns) != 1 || !strings.Contains(warns[0], `msg="listener binds every interface but is advertised as 127.0.0.1: clients on other machines are sent to 127.0.0.1 and cannot connect; set advertised.listeners to an address they reach" listener=PLAINTEXT addr=`) {
		t.Errorf("warnings: %q", warns)
	}
}
