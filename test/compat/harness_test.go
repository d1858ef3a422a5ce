package compat

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/servertest"
)

// targetKfake reports whether the suite runs against kfake (development only).
func targetKfake() bool { return os.Getenv("STRATA_COMPAT_TARGET") == "kfake" }

// brokerOpts tunes one test broker.
type brokerOpts struct {
	metrics bool // bind the metrics/admin HTTP listener (compaction trigger)
	// extra broker settings (Strata only), e.g. a faster idle-roll check.
	extra map[string]string
}

// testBroker is one broker under test: a Strata server (servertest, the
// default) or a kfake cluster, with a data directory kept across restarts.
type testBroker struct {
	t    testing.TB
	dir  string
	opts brokerOpts

	srv  *servertest.Broker
	fake *kfake.Cluster

	addr    string
	metrics string
}

// startBroker starts a broker on a fresh data directory; it is shut down when
// the test ends.
func startBroker(t testing.TB, opts brokerOpts) *testBroker {
	t.Helper()
	b := &testBroker{t: t, dir: t.TempDir(), opts: opts}
	if targetKfake() {
		b.startKfake()
		t.Cleanup(b.stopKfake)
		return b
	}
	// The compat suite runs against the product's defaults (internal
	// topics of 50 partitions, the 3s initial rebalance delay).
	b.srv = servertest.Start(t, servertest.Options{
		Dir: b.dir, ProductDefaults: true, Metrics: opts.metrics, Settings: opts.extra,
		Logger: servertest.TestLogger(t, slog.LevelWarn),
	})
	b.started()
	return b
}

func (b *testBroker) started() {
	b.addr, b.metrics = b.srv.Addr(), b.srv.MetricsAddr()
}

func (b *testBroker) startKfake() {
	b.t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(b.dir), kfake.SyncWrites())
	if err != nil {
		b.t.Fatalf("start kfake: %v", err)
	}
	b.fake = c
	b.addr = c.ListenAddrs()[0]
}

func (b *testBroker) stopKfake() {
	if b.fake != nil {
		b.fake.Close()
		b.fake = nil
	}
}

// Restart shuts the broker down cleanly and starts it again on the same data
// directory; the listener port may change.
func (b *testBroker) Restart() {
	b.t.Helper()
	if b.fake != nil {
		b.stopKfake()
		b.startKfake()
		return
	}
	b.srv.Restart()
	b.started()
}

// RestartSamePort restarts the broker on the same listener address, so
// long-lived clients reconnect to it.
func (b *testBroker) RestartSamePort() {
	b.t.Helper()
	if b.fake != nil {
		b.Restart() // kfake picks its own port
		return
	}
	b.srv.RestartSamePort()
	b.started()
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

// missing fails a test whose client is not installed: scripts/test.sh
// installs every client, so a missing one is never a silent skip.
func missing(t testing.TB, why string) {
	t.Helper()
	t.Fatal("COMPAT CLIENT MISSING: " + why + " (scripts/test.sh installs the compat clients)")
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

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
