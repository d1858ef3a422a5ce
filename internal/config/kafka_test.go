package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestKafkaTablesDisjoint keeps a name in one place only: a setting Strata
// honours, one it accepts without effect, or one it refuses with a hint.
// Adding a setting to the broker table means deleting its hint.
func TestKafkaTablesDisjoint(t *testing.T) {
	for _, s := range ignoredTable {
		if _, ok := brokerIndex[s.Name]; ok {
			t.Errorf("%s is both honoured and ignored", s.Name)
		}
		if unsupportedHint(s.Name) != "" {
			t.Errorf("%s is both ignored and refused", s.Name)
		}
		if s.why == "" || s.Doc == "" {
			t.Errorf("%s: no reason or doc", s.Name)
		}
		if err := s.Validate(s.Default); err != nil {
			t.Errorf("%s: Kafka default invalid: %v", s.Name, err)
		}
	}
	for n := range unsupportedHints {
		if _, ok := brokerIndex[n]; ok {
			t.Errorf("%s is both honoured and refused: delete its hint", n)
		}
	}
	for _, s := range brokerTable {
		for _, p := range unsupportedPrefixes {
			if strings.HasPrefix(s.Name, p.prefix) {
				t.Errorf("%s is both honoured and refused by the prefix %s", s.Name, p.prefix)
			}
		}
	}
	for n := range kafkaNotes {
		if _, ok := brokerIndex[n]; !ok {
			t.Errorf("note for %s, which is not a broker setting", n)
		}
	}
	// Every variable name maps back to one setting.
	seen := map[string]string{}
	for _, n := range acceptedNames() {
		e := EnvName(n)
		if other, ok := seen[e]; ok {
			t.Errorf("%s and %s share the variable %s", n, other, e)
		}
		seen[e] = n
		if slices.Contains(ClientEnv, e) {
			t.Errorf("%s's variable %s is a client variable", n, e)
		}
	}
}

// TestLoadBrokerAllProblems checks that one run reports every problem of
// the file, the environment and the flags, in that order, each located.
func TestLoadBrokerAllProblems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	content := "offsets.topic.replication.factor=0\nnode.id=1\nlog.retention.hour=24\nnum.io.threads=zero\nzookeeper.connect=localhost:2181\n" +
		"socket.send.buffer.bytes=0\nlog.segment.bytes=1024\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"STRATA_NUM_PARTITIONS=-3", "STRATA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS=localhost:9093"}
	_, err := LoadBroker(path, env, map[string]string{"strata.log.level": "loud", "bogus.name": "1"})
	var ps Problems
	if !errors.As(err, &ps) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %T %v", err, err)
	}
	want := `9 problems in the broker configuration:
  PATH:1: invalid value "0" for configuration offsets.topic.replication.factor: must be at least 1 (allowed: [1,...])
  PATH:3: unknown broker config "log.retention.hour": did you mean log.retention.hours?
  PATH:4: invalid value "zero" for configuration num.io.threads: not a number (allowed: [1,...])
  PATH:5: zookeeper.connect is a ZooKeeper setting: Strata needs no ZooKeeper (like Kafka in KRaft mode, and Kafka 4.0 removed ZooKeeper mode); remove it
  PATH:6: invalid value "0" for configuration socket.send.buffer.bytes: must be -1 (the operating system's default) or a positive number of bytes (allowed: -1 (the OS default) or [1,...])
  environment variable STRATA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS: controller.quorum.bootstrap.servers is not supported (KIP-853 dynamic quorums): list the controllers in controller.quorum.voters (id@host:port,...) instead
  environment variable STRATA_NUM_PARTITIONS: invalid value "-3" for configuration num.partitions: must be at least 1 (allowed: [1,...])
  unknown broker config "bogus.name": remove it (docs/configuration.md lists every setting)
  invalid value "loud" for configuration strata.log.level: must be one of debug, info, warn, error (allowed: one of debug, info, warn, error)`
	want = strings.ReplaceAll(want, "PATH", path)
	if err.Error() != want {
		t.Errorf("got:\n%s\nwant:\n%s", err, want)
	}
	// Rules between settings are checked once each setting is valid.
	_, err = LoadBroker("", nil, map[string]string{"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5",
		"log.cleaner.min.compaction.lag.ms": "9", "log.cleaner.max.compaction.lag.ms": "8"})
	if !errors.As(err, &ps) || len(ps) != 2 {
		t.Errorf("cross-setting rules: %v", err)
	}
}

// TestIgnoredSettingsWarn checks that Kafka's thread-pool settings are
// accepted, type-checked, not echoed, and named in one warning line.
func TestIgnoredSettingsWarn(t *testing.T) {
	b, err := LoadBroker("", []string{"STRATA_BACKGROUND_THREADS=4"}, map[string]string{"num.io.threads": "16", "num.network.threads": "8"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"accepted without effect: background.threads, num.io.threads, num.network.threads (" + whyThreadPool + ")"}
	if got := b.Warnings(); !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	if b.Get("num.io.threads") != "" || slices.Contains(b.Names(), "num.io.threads") {
		t.Error("an ignored setting is echoed")
	}
	if b, err := LoadBroker("", nil, nil); err != nil || len(b.Warnings()) != 0 {
		t.Errorf("defaults: %v %q", err, b.Warnings())
	}
}

// TestEnvNames checks natural variable names for Strata's own settings,
// the deprecated doubled prefix, and warnings for unknown STRATA_
// variables (client ones excepted).
func TestEnvNames(t *testing.T) {
	if EnvName("log.dirs") != "STRATA_LOG_DIRS" || EnvName("strata.durable.acks") != "STRATA_DURABLE_ACKS" || EnvName("strata.log.level") != "STRATA_LOG_LEVEL" {
		t.Error(EnvName("strata.durable.acks"))
	}
	b, err := LoadBroker("", []string{"STRATA_DURABLE_ACKS=false", "STRATA_LOG_LEVEL=debug", "STRATA_BROKERS=x:1", "STRATA_SASL_PASSWORD=p", "STRATA_LONG=1", "HOME=/root"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Bool("strata.durable.acks") || b.Get("strata.log.level") != "debug" || len(b.Warnings()) != 0 {
		t.Errorf("natural names: acks %v level %s warnings %q", b.Bool("strata.durable.acks"), b.Get("strata.log.level"), b.Warnings())
	}
	b, err = LoadBroker("", []string{"STRATA_STRATA_DURABLE_ACKS=false", "STRATA_DURABLE_ACK=true", "STRATA_FROBNICATE=1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"environment variable STRATA_STRATA_DURABLE_ACKS is deprecated: rename it STRATA_DURABLE_ACKS",
		"environment variable STRATA_DURABLE_ACK names no broker setting and is ignored: did you mean STRATA_DURABLE_ACKS?",
		"environment variable STRATA_FROBNICATE names no broker setting and is ignored",
	}
	if b.Bool("strata.durable.acks") || !slices.Equal(b.Warnings(), want) {
		t.Errorf("legacy: acks %v warnings %q", b.Bool("strata.durable.acks"), b.Warnings())
	}
	_, err = LoadBroker("", []string{"STRATA_STRATA_DURABLE_ACKS=false", "STRATA_DURABLE_ACKS=true"}, nil)
	if err == nil || err.Error() != `environment variable STRATA_STRATA_DURABLE_ACKS: conflicts with STRATA_DURABLE_ACKS ("true"): unset STRATA_STRATA_DURABLE_ACKS, the old spelling` {
		t.Errorf("both spellings: %v", err)
	}
}

func TestSocketBufferSettings(t *testing.T) {
	b := DefaultBroker()
	if b.Int("socket.send.buffer.bytes") != 102400 || b.Int("socket.receive.buffer.bytes") != 102400 {
		t.Error("Kafka's defaults")
	}
	for _, v := range []string{"-1", "1", "1048576"} {
		mustSet(t, b, "socket.receive.buffer.bytes", v)
	}
	for _, v := range []string{"0", "-2", "x"} {
		if err := b.Set("socket.send.buffer.bytes", v); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q accepted", v)
		}
	}
}

// stockKafkaFile returns one of Apache Kafka's stock KRaft
// server.properties with only its data directory changed.
func stockKafkaFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "kafka", name))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "/tmp/kraft-combined-logs", t.TempDir())
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStockKafkaServerProperties loads Apache Kafka's own KRaft
// server.properties (3.8.0 and October 2024 trunk) with only the data
// directory changed: no problem. Its KRaft and listener settings are
// taken, the internal topics' replication settings (1, what Strata keeps)
// echoed, the socket buffers honoured, and the thread pools and
// share-group settings named in warnings.
func TestStockKafkaServerProperties(t *testing.T) {
	for _, file := range []string{"kraft-server-3.8.0.properties", "kraft-server-trunk-1eb7644.properties"} {
		path := stockKafkaFile(t, file)
		b, err := LoadBroker(path, nil, nil)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		for _, n := range []string{"offsets.topic.replication.factor", "transaction.state.log.replication.factor", "transaction.state.log.min.isr"} {
			if b.Get(n) != "1" || !b.IsSet(n) {
				t.Errorf("%s: %s = %q", file, n, b.Get(n))
			}
		}
		if w := b.Warnings(); len(w) == 0 || !strings.Contains(strings.Join(w, "\n"), "num.io.threads, num.network.threads") {
			t.Errorf("%s: warnings %q", file, w)
		}
	}
}
