// Package servertest starts real Strata brokers in-process for tests, in
// the manner of net/http/httptest: each broker is a full server.Server on
// random ports over its own temporary log directory, stopped when the test
// ends. Start gives one broker; StartN gives N brokers, each with its own
// data directory and node id (independent brokers today; Options.Configure
// is where cluster wiring adjusts each node's settings).
package servertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/etcdnode"
	"github.com/strata-io/strata/internal/freeport"
	"github.com/strata-io/strata/internal/parallel"
	"github.com/strata-io/strata/internal/server"
)

// TestDefaults are the settings a test broker starts with unless
// Options.ProductDefaults is set: a plaintext listener and no HTTP
// listener, both on random ports, small internal topics and no initial
// rebalance delay, so tests start fast and groups form at once.
var TestDefaults = map[string]string{
	"listeners":                            "PLAINTEXT://127.0.0.1:0",
	"strata.metrics.listener":              "",
	"offsets.topic.num.partitions":         "2",
	"transaction.state.log.num.partitions": "2",
	"group.initial.rebalance.delay.ms":     "0",
}

// Options tune the brokers a test starts. The zero value is a plaintext
// broker with TestDefaults over a fresh temporary directory.
type Options struct {
	// Settings override the defaults (Kafka and Strata setting names, as
	// in server.properties). A "log.dirs" here replaces Dir.
	Settings map[string]string
	// ProductDefaults starts from the product's defaults instead of
	// TestDefaults (the listener and the HTTP listener still bind random
	// ports unless Settings name them).
	ProductDefaults bool
	// Dir is the log directory of a broker started with Start; empty means
	// a fresh t.TempDir(). StartN always gives each node a fresh directory.
	Dir string
	// Metrics binds the metrics/admin HTTP listener on a random port.
	Metrics bool
	// Logger receives the broker's log; nil discards it (or writes it to
	// stderr when STRATA_TEST_LOG is set). StartN adds a node attribute.
	Logger *slog.Logger
	// Configure, when set, adjusts node i's loaded configuration (i counts
	// from 0) before the server is built, at every start and restart.
	Configure func(i int, cfg *config.Broker) error
	// ClientOpts are prepended to the options of every Client.
	ClientOpts []kgo.Opt
	// ShutdownTimeout bounds a clean shutdown (default 30s).
	ShutdownTimeout time.Duration
	// Controllers makes StartN's nodes one cluster (docs/cluster.md): the
	// first Controllers nodes are combined nodes (process.roles
	// broker,controller) whose controller listeners form the metadata
	// store, the others broker-only nodes. 0 starts independent brokers.
	Controllers int
	// OneNodeCluster starts a broker given no KRaft setting as zero
	// configuration does (`strata serve`): a one-node cluster with a
	// single-member metadata store (server.Options.OneNodeCluster).
	OneNodeCluster bool
}

// ClusterDefaults are the settings of StartN's nodes with Controllers:
// a session timeout short enough for failover tests, long enough for a
// loaded two-core machine.
var ClusterDefaults = map[string]string{
	"broker.session.timeout.ms":    "6000",
	"broker.heartbeat.interval.ms": "1000",
}

// StoreTiming is the metadata store's Raft timing in tests: a member
// elects itself in about a tenth of a second.
var StoreTiming = etcdnode.Timing{TickMs: 10, ElectionMs: 100}

// Broker is one in-process broker under test. Its methods are for the test
// goroutine (like testing.T's Fatal they may stop the test).
type Broker struct {
	t    testing.TB
	opts Options
	// index is the node's position in StartN (0 for Start).
	index int

	// Dir is the broker's (first) log directory; it survives restarts.
	Dir string
	// NodeID is the broker's node.id.
	NodeID int32

	srv       *server.Server
	addr      string
	metrics   string
	startTook time.Duration
	// port, when set, is the Kafka listener port bound at the next start.
	port string
}

// Start starts one broker and stops it when the test ends.
func Start(t testing.TB, opts Options) *Broker {
	t.Helper()
	b := newBroker(t, opts, 0)
	if err := b.start(); err != nil {
		t.Fatalf("servertest: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// Cluster is N brokers started together by StartN.
type Cluster struct {
	Brokers []*Broker
}

// StartN starts n brokers, node ids 1..n, each over its own fresh
// directory, concurrently; all are stopped when the test ends.
func StartN(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("servertest: StartN(%d)", n)
	}
	opts.Dir = ""
	c := &Cluster{}
	kraft := clusterSettings(t, n, opts.Controllers)
	for i := 0; i < n; i++ {
		o := opts
		o.Settings = maps.Clone(opts.Settings)
		if o.Settings == nil {
			o.Settings = map[string]string{}
		}
		for k, v := range kraft[i] {
			if cur, set := o.Settings[k]; !set {
				o.Settings[k] = v
			} else if k == "listeners" && i < opts.Controllers {
				// The test's client listeners, plus the controller
				// listener of this combined node.
				_, ctl, _ := strings.Cut(v, ",")
				o.Settings[k] = cur + "," + ctl
			}
		}
		delete(o.Settings, "log.dirs")
		o.Settings["node.id"] = strconv.Itoa(i + 1)
		if opts.Logger != nil {
			o.Logger = opts.Logger.With("node", i+1)
		}
		c.Brokers = append(c.Brokers, newBroker(t, o, i))
	}
	t.Cleanup(c.Close)
	if err := parallel.ForEach(n, n, func(i int) error {
		if err := c.Brokers[i].start(); err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
		return nil
	}); err != nil {
		t.Fatalf("servertest: %v", err)
	}
	if opts.Controllers > 0 {
		c.waitRegistered(t)
	}
	return c
}

// waitRegistered waits until every node's view of the cluster metadata
// lists every broker node: the nodes register and learn of each other
// through the metadata store asynchronously, and a test that places
// partitions right after StartN must not race a registration (the
// placement would leave a node out, refuse the replication factor, or
// refuse an explicit assignment with INVALID_REPLICA_ASSIGNMENT). It reads
// the in-process view, so it works whatever the listeners' security.
func (c *Cluster) waitRegistered(t testing.TB) {
	t.Helper()
	want := len(c.Brokers)
	deadline := time.Now().Add(60 * time.Second)
	for _, b := range c.Brokers {
		for {
			n := b.srv.LiveBrokers()
			if n >= want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("servertest: node %d knows %d of %d brokers", b.index+1, n, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// clusterSettings are the KRaft settings of n nodes of which the first
// controllers are combined nodes (nil maps when controllers is 0). The
// controller ports must be known before any node starts
// (controller.quorum.voters): internal/freeport reserves them for the test,
// so no other socket takes one before the node binds it.
func clusterSettings(t testing.TB, n, controllers int) []map[string]string {
	out := make([]map[string]string, n)
	if controllers <= 0 {
		return out
	}
	controllers = min(controllers, n)
	ports := freeport.Take(t, controllers)
	var voters []string
	for i := range ports {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[i]))
	}
	for i := range out {
		m := maps.Clone(ClusterDefaults)
		m["controller.listener.names"] = "CONTROLLER"
		m["controller.quorum.voters"] = strings.Join(voters, ",")
		if i < controllers {
			m["process.roles"] = "broker,controller"
			m["listeners"] = fmt.Sprintf("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", ports[i])
		} else {
			m["process.roles"] = "broker"
			m["listeners"] = "PLAINTEXT://127.0.0.1:0"
		}
		out[i] = m
	}
	return out
}

// Addrs are the brokers' Kafka listener addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		out[i] = b.Addr()
	}
	return out
}

// Client returns a kgo client seeded with every broker (closed at test end).
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	b := c.Brokers[0]
	b.t.Helper()
	return b.client(c.Addrs(), opts)
}

// Close stops every broker (idempotent), all at once: a cluster's
// controllers then still form a quorum while each broker unregisters.
func (c *Cluster) Close() {
	parallel.Each(c.Brokers, len(c.Brokers), func(b *Broker) error {
		b.Close()
		return nil
	})
}

func newBroker(t testing.TB, opts Options, index int) *Broker {
	b := &Broker{t: t, opts: opts, index: index, Dir: opts.Dir}
	if dirs := opts.Settings["log.dirs"]; dirs != "" {
		b.Dir, _, _ = strings.Cut(dirs, ",")
	} else if b.Dir == "" {
		b.Dir = t.TempDir()
	}
	return b
}

// settings are the values the broker is configured with at its next start.
func (b *Broker) settings() map[string]string {
	vals := map[string]string{}
	if !b.opts.ProductDefaults {
		maps.Copy(vals, TestDefaults)
	} else {
		vals["listeners"] = TestDefaults["listeners"]
		vals["strata.metrics.listener"] = ""
	}
	if b.opts.Metrics {
		vals["strata.metrics.listener"] = "127.0.0.1:0"
	}
	vals["log.dirs"] = b.Dir
	maps.Copy(vals, b.opts.Settings)
	if b.port != "" {
		vals["listeners"] = withPort(vals["listeners"], b.port)
	}
	return vals
}

// withPort replaces the port of the first listener of
// "NAME://host:port,...".
func withPort(listeners, port string) string {
	first, rest, more := strings.Cut(listeners, ",")
	out := withPortOne(first, port)
	if more {
		out += "," + rest
	}
	return out
}

// withPortOne replaces the port of listener "NAME://host:port".
func withPortOne(listener, port string) string {
	proto, hostPort, ok := strings.Cut(listener, "://")
	if !ok {
		proto, hostPort = "", listener
	}
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return listener
	}
	out := net.JoinHostPort(host, port)
	if ok {
		out = proto + "://" + out
	}
	return out
}

func (b *Broker) logger() *slog.Logger {
	if b.opts.Logger != nil {
		return b.opts.Logger
	}
	var w io.Writer = io.Discard
	if os.Getenv("STRATA_TEST_LOG") != "" {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// start builds and starts the server; safe to call from any goroutine.
func (b *Broker) start() error {
	cfg, err := config.LoadBroker("", nil, b.settings())
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if b.opts.Configure != nil {
		if err := b.opts.Configure(b.index, cfg); err != nil {
			return fmt.Errorf("configure node %d: %w", b.index, err)
		}
	}
	b.NodeID = int32(cfg.Int("node.id"))
	began := time.Now()
	srv, err := server.NewWithOptions(cfg, b.logger(), server.Options{StoreTiming: StoreTiming, OneNodeCluster: b.opts.OneNodeCluster})
	if err != nil {
		return fmt.Errorf("server.New: %w", err)
	}
	if err := srv.Start(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), b.shutdownTimeout())
		defer cancel()
		_ = srv.Shutdown(ctx)
		return fmt.Errorf("server.Start: %w", err)
	}
	b.startTook = time.Since(began)
	b.srv = srv
	b.addr = srv.Addr().String()
	b.metrics = ""
	if a := srv.MetricsAddr(); a != nil {
		b.metrics = a.String()
	}
	return nil
}

func (b *Broker) shutdownTimeout() time.Duration {
	if b.opts.ShutdownTimeout > 0 {
		return b.opts.ShutdownTimeout
	}
	return 30 * time.Second
}

// Open starts a stopped broker again over the same directory.
func (b *Broker) Open() {
	b.t.Helper()
	if b.srv != nil {
		b.t.Fatalf("servertest: Open of a running broker")
	}
	if err := b.start(); err != nil {
		b.t.Fatalf("servertest: %v", err)
	}
}

// Close shuts the broker down cleanly (flushes logs, writes the
// clean-shutdown marker); a no-op when it is not running. A shutdown error
// fails the test.
func (b *Broker) Close() {
	if b.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.shutdownTimeout())
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		b.t.Errorf("servertest: shutdown of node %d: %v", b.NodeID, err)
	}
	b.srv = nil
}

// Restart shuts the broker down cleanly and starts it again over the same
// directory; the listener port may change.
func (b *Broker) Restart() {
	b.t.Helper()
	b.Close()
	b.Open()
}

// RestartSamePort restarts the broker on the same listener address, so
// long-lived clients reconnect to it.
func (b *Broker) RestartSamePort() {
	b.t.Helper()
	_, port, err := net.SplitHostPort(b.addr)
	if err != nil {
		b.t.Fatalf("servertest: broker address %q: %v", b.addr, err)
	}
	b.Close()
	b.port = port
	b.Open()
}

// Server is the running server (nil while stopped).
func (b *Broker) Server() *server.Server { return b.srv }

// ListenerAddr is the address of the running broker's client listener of
// that name ("" if it has none).
func (b *Broker) ListenerAddr(name string) string {
	if b.srv == nil {
		return ""
	}
	if a := b.srv.ListenerAddr(name); a != nil {
		return a.String()
	}
	return ""
}

// Addr is the Kafka listener address of the running broker.
func (b *Broker) Addr() string { return b.addr }

// MetricsAddr is the metrics/admin HTTP address ("" when not bound).
func (b *Broker) MetricsAddr() string { return b.metrics }

// StartTook is how long the last start took (server.New and Start: log
// recovery and the coordinators' replay included).
func (b *Broker) StartTook() time.Duration { return b.startTook }

// Client returns a kgo client seeded with the broker, with
// Options.ClientOpts then opts; it is closed when the test ends.
func (b *Broker) Client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	return b.client([]string{b.addr}, opts)
}

func (b *Broker) client(seeds []string, opts []kgo.Opt) *kgo.Client {
	b.t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, b.opts.ClientOpts...)
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		b.t.Fatalf("servertest: kgo client: %v", err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client over a new Client.
func (b *Broker) Admin() *kadm.Client { return kadm.NewClient(b.Client()) }

// TestLogger returns a logger that writes the broker's lines at level and
// above to t.Log until the test ends (later lines are dropped: t.Log after
// the test panics).
func TestLogger(t testing.TB, level slog.Level) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// testLogWriter sends log lines to the test log until the test ends.
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
