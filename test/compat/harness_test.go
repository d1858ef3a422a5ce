package compat

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/server"
)

// targetKfake reports whether the suite runs against kfake (development only).
func targetKfake() bool { return os.Getenv("STRATA_COMPAT_TARGET") == "kfake" }

// brokerOpts tunes one test broker.
type brokerOpts struct {
	metrics bool // bind the metrics/admin HTTP listener (compaction trigger)
	// extra broker settings (Strata only), e.g. a faster idle-roll check.
	extra map[string]string
}

// testBroker is one broker under test: a Strata server (default) or a kfake
// cluster, with a data directory kept across restarts.
type testBroker struct {
	t    testing.TB
	dir  string
	opts brokerOpts
	logw *testLogWriter

	srv  *server.Server
	fake *kfake.Cluster

	addr    string
	metrics string
	// port, when set, is the Kafka listener port to bind (restarts that
	// keep connected clients pointed at the same address).
	port string
}

// startBroker starts a broker on a fresh data directory; it is shut down when
// the test ends.
func startBroker(t testing.TB, opts brokerOpts) *testBroker {
	t.Helper()
	b := &testBroker{t: t, dir: t.TempDir(), opts: opts, logw: &testLogWriter{t: t}}
	b.start()
	t.Cleanup(func() {
		b.stop()
		b.logw.close()
	})
	return b
}

func (b *testBroker) start() {
	b.t.Helper()
	if targetKfake() {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(b.dir), kfake.SyncWrites())
		if err != nil {
			b.t.Fatalf("start kfake: %v", err)
		}
		b.fake = c
		b.addr = c.ListenAddrs()[0]
		return
	}
	metrics := ""
	if b.opts.metrics {
		metrics = "127.0.0.1:0"
	}
	overrides := map[string]string{
		"log.dirs":                b.dir,
		"listeners":               "PLAINTEXT://127.0.0.1:" + cmp.Or(b.port, "0"),
		"strata.metrics.listener": metrics,
	}
	for k, v := range b.opts.extra {
		overrides[k] = v
	}
	cfg, err := config.LoadBroker("", nil, overrides)
	if err != nil {
		b.t.Fatalf("load broker config: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(b.logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(cfg, logger)
	if err != nil {
		b.t.Fatalf("server.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		b.t.Fatalf("server.Start: %v", err)
	}
	b.srv = srv
	b.addr = srv.Addr().String()
	if a := srv.MetricsAddr(); a != nil {
		b.metrics = a.String()
	}
}

func (b *testBroker) stop() {
	if b.fake != nil {
		b.fake.Close()
		b.fake = nil
	}
	if b.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.srv.Shutdown(ctx); err != nil {
			b.t.Errorf("server.Shutdown: %v", err)
		}
		b.srv = nil
	}
}

// Restart shuts the broker down cleanly and starts it again on the same data
// directory; the listener port may change.
func (b *testBroker) Restart() {
	b.t.Helper()
	b.stop()
	b.start()
}

// RestartSamePort restarts the broker on the same listener address, so
// long-lived clients reconnect to it.
func (b *testBroker) RestartSamePort() {
	b.t.Helper()
	_, port, err := net.SplitHostPort(b.addr)
	if err != nil {
		b.t.Fatalf("broker address %q: %v", b.addr, err)
	}
	b.stop()
	b.port = port
	b.start()
}

// Addr is the current bootstrap address.
func (b *testBroker) Addr() string { return b.addr }

// Admin returns a franz-go admin client (the suite's independent observer)
// closed when the test ends.
func (b *testBroker) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// Compact runs the cleaner on topic now (after the active segment rolled).
func (b *testBroker) Compact(topic string) error {
	if b.fake != nil {
		b.fake.Compact()
		return nil
	}
	if b.metrics == "" {
		return fmt.Errorf("metrics listener not enabled")
	}
	resp, err := http.Post("http://"+b.metrics+"/v1/compaction/run?topic="+topic, "text/plain", nil)
	if err != nil {
		return fmt.Errorf("trigger compaction: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("trigger compaction: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// testLogWriter sends broker logs to the test log until the test ends.
type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log("broker: " + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// requireTool returns the path of an external tool. A missing tool fails the
// test when CI is set and skips it loudly otherwise.
func requireTool(t testing.TB, name string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil && len(args) > 0 {
		if out, cerr := exec.Command(path, args...).CombinedOutput(); cerr != nil {
			err = fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), cerr, strings.TrimSpace(string(out)))
		}
	}
	if err != nil {
		missing(t, fmt.Sprintf("%s unusable: %v", name, err))
	}
	return path
}

// missing fails (CI) or skips (locally) a test whose client is not installed.
func missing(t testing.TB, why string) {
	t.Helper()
	msg := "COMPAT CLIENT MISSING: " + why + " (scripts/test.sh installs the compat clients)"
	if ciSet() {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED " + msg)
}

// waitFor polls cond until it returns nil or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ciSet reports whether the suite runs in CI (env CI set), where a missing
// client is a failure.
func ciSet() bool { return os.Getenv("CI") != "" }

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
