package config

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

func TestTablesSortedDocumentedValid(t *testing.T) {
	for _, tbl := range [][]Setting{TopicSettings(), BrokerSettings()} {
		if !sort.SliceIsSorted(tbl, func(i, j int) bool { return tbl[i].Name < tbl[j].Name }) {
			t.Fatal("table not sorted")
		}
		seen := map[string]bool{}
		for _, s := range tbl {
			if seen[s.Name] {
				t.Errorf("%s listed twice", s.Name)
			}
			seen[s.Name] = true
			if s.Doc == "" {
				t.Errorf("%s has no Doc", s.Name)
			}
			if s.Default != "" {
				if err := s.Validate(s.Default); err != nil {
					t.Errorf("default of %s invalid: %v", s.Name, err)
				}
			}
		}
	}
	for _, s := range TopicSettings() {
		// Kafka's replication throttle lists have no broker default
		// (ServerTopicConfigSynonyms does not name them).
		noSynonym := s.Name == "leader.replication.throttled.replicas" || s.Name == "follower.replication.throttled.replicas"
		if len(s.BrokerSynonyms) == 0 && !noSynonym {
			t.Errorf("topic setting %s has no broker synonym", s.Name)
		}
		for _, syn := range s.BrokerSynonyms {
			if _, ok := LookupBroker(syn); !ok {
				t.Errorf("synonym %s of %s is not a broker setting", syn, s.Name)
			}
		}
	}
}

func TestTopicDefaultsMatchKafka(t *testing.T) {
	want := map[string]string{
		"cleanup.policy": "delete", "compression.type": "producer", "delete.retention.ms": "86400000",
		"file.delete.delay.ms": "60000", "flush.messages": maxLong, "flush.ms": maxLong,
		"index.interval.bytes": "4096", "max.compaction.lag.ms": maxLong, "min.compaction.lag.ms": "0",
		"max.message.bytes": "1048588", "message.timestamp.type": "CreateTime",
		"message.timestamp.before.max.ms": maxLong, "message.timestamp.after.max.ms": maxLong,
		"min.cleanable.dirty.ratio": "0.5", "min.insync.replicas": "1", "preallocate": "false",
		"retention.bytes": "-1", "retention.ms": "604800000", "segment.bytes": "1073741824",
		"segment.index.bytes": "10485760", "segment.jitter.ms": "0", "segment.ms": "604800000",
		"unclean.leader.election.enable":        "false",
		"leader.replication.throttled.replicas": "", "follower.replication.throttled.replicas": "",
	}
	if got := len(TopicSettings()); got != len(want) {
		t.Errorf("got %d topic settings, want %d", got, len(want))
	}
	b := DefaultBroker()
	for name, def := range want {
		s, ok := LookupTopic(name)
		if !ok {
			t.Errorf("missing topic setting %s", name)
			continue
		}
		if s.Default != def {
			t.Errorf("%s default %q, want %q", name, s.Default, def)
		}
		if v, _, explicit := b.TopicDefault(name); v != def || explicit {
			t.Errorf("broker default for %s = %q (explicit %v), want %q", name, v, explicit, def)
		}
	}
}

// TestUnhonouredTopicConfigsRejected: a Kafka topic setting Strata cannot
// honour is refused with its reason (not as "unknown", which reads as a
// typo), a typo with the closest name, anything else as unknown.
func TestUnhonouredTopicConfigsRejected(t *testing.T) {
	for n, want := range map[string]string{
		"remote.storage.enable":         `topic config "remote.storage.enable" is not supported: Strata has no tiered storage (KIP-405); remove it`,
		"local.retention.ms":            `topic config "local.retention.ms" is not supported: Strata has no tiered storage (KIP-405): every segment is local, retention.ms applies; remove it`,
		"message.downconversion.enable": `topic config "message.downconversion.enable" is not supported: Strata never down-converts: it serves record batch v2 only (Kafka 4.0 removed the setting); remove it`,
		"message.format.version":        `topic config "message.format.version" is not supported: Strata writes record batch v2 only (Kafka 3.0 and later ignore the setting, 4.0 removed it); remove it`,
		"compression.gzip.level":        `topic config "compression.gzip.level" is not supported: Strata compresses at each codec's default level (KIP-390 levels are not supported); remove it`,
		"compression.zstd.level":        `topic config "compression.zstd.level" is not supported: Strata compresses at each codec's default level (KIP-390 levels are not supported); remove it`,
		"retention.mss":                 `unknown topic config "retention.mss": did you mean retention.ms?`,
		"cleanup.polcy":                 `unknown topic config "cleanup.polcy": did you mean cleanup.policy?`,
		"foo":                           `unknown topic config "foo"`,
	} {
		for _, err := range []error{ValidateTopicConfigs(map[string]*string{n: ptr("1")}), ValidateTopicConfig(n, "1")} {
			if !errors.Is(err, ErrInvalid) || err.Error() != want {
				t.Errorf("%s: got %v, want %s", n, err, want)
			}
		}
	}
	for n := range unsupportedTopic {
		if _, ok := topicIndex[n]; ok {
			t.Errorf("%s is both honoured and refused", n)
		}
	}
}

func TestTopicValidation(t *testing.T) {
	cases := []struct {
		name, value, err string
	}{
		{"segment.ms", "abc", `invalid value "abc" for configuration segment.ms: not a number`},
		{"segment.ms", "0", `invalid value "0" for configuration segment.ms: must be at least 1`},
		{"segment.ms", "1", ""},
		{"segment.bytes", "13", `invalid value "13" for configuration segment.bytes: must be at least 14`},
		{"segment.bytes", "14", ""},
		{"segment.bytes", "2147483647", ""},
		{"segment.bytes", "2147483648", `invalid value "2147483648" for configuration segment.bytes: out of range for a 32-bit integer`},
		{"cleanup.policy", "compact", ""},
		{"cleanup.policy", "delete", ""},
		{"cleanup.policy", "compact,delete", ""},
		{"cleanup.policy", "delete, compact", ""},
		{"cleanup.policy", "", `invalid value "" for configuration cleanup.policy: must be a non-empty list of compact, delete`},
		{"cleanup.policy", "compact,compact", `invalid value "compact,compact" for configuration cleanup.policy: "compact" is listed twice`},
		{"cleanup.policy", "archive", `invalid value "archive" for configuration cleanup.policy: "archive" is not one of compact, delete`},
		{"compression.type", "zstd", ""},
		{"compression.type", "brotli", `invalid value "brotli" for configuration compression.type: must be one of uncompressed, zstd, lz4, snappy, gzip, producer`},
		{"min.cleanable.dirty.ratio", "1", ""},
		{"min.cleanable.dirty.ratio", "0", ""},
		{"min.cleanable.dirty.ratio", "1.5", `invalid value "1.5" for configuration min.cleanable.dirty.ratio: must be between 0 and 1`},
		{"min.cleanable.dirty.ratio", "NaN", `invalid value "NaN" for configuration min.cleanable.dirty.ratio: not a number`},
		{"retention.ms", "-1", ""},
		{"retention.ms", "-2", `invalid value "-2" for configuration retention.ms: must be at least -1`},
		{"retention.bytes", "-5", ""},
		{"preallocate", "TRUE", ""},
		{"preallocate", "yes", `invalid value "yes" for configuration preallocate: not a boolean (expected true or false)`},
		{"message.timestamp.type", "LogAppendTime", ""},
		{"message.timestamp.type", "logappendtime", `invalid value "logappendtime" for configuration message.timestamp.type: must be one of CreateTime, LogAppendTime`},
		{"min.insync.replicas", "0", `invalid value "0" for configuration min.insync.replicas: must be at least 1`},
		{"segment.index.bytes", "3", `invalid value "3" for configuration segment.index.bytes: must be at least 4`},
		{"flush.messages", "0", `invalid value "0" for configuration flush.messages: must be at least 1`},
	}
	for _, c := range cases {
		err := ValidateTopicConfigs(map[string]*string{c.name: ptr(c.value)})
		if c.err == "" {
			if err != nil {
				t.Errorf("%s=%q: unexpected %v", c.name, c.value, err)
			}
			continue
		}
		if err == nil || err.Error() != c.err || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s=%q: got %v, want %s", c.name, c.value, err, c.err)
		}
	}
}

func TestTopicCrossField(t *testing.T) {
	err := ValidateTopicConfigs(map[string]*string{"min.compaction.lag.ms": ptr("10"), "max.compaction.lag.ms": ptr("5")})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "min.compaction.lag.ms (10) must not be greater than max.compaction.lag.ms (5)") {
		t.Errorf("got %v", err)
	}
	if err := ValidateTopicConfigs(map[string]*string{"min.compaction.lag.ms": ptr("5"), "max.compaction.lag.ms": ptr("5")}); err != nil {
		t.Error(err)
	}
	b := DefaultBroker()
	if err := b.Set("log.cleaner.max.compaction.lag.ms", "100"); err != nil {
		t.Fatal(err)
	}
	if err := b.ValidateTopicConfigs(map[string]*string{"min.compaction.lag.ms": ptr("200")}); !errors.Is(err, ErrInvalid) {
		t.Errorf("broker-aware cross check: got %v", err)
	}
	if err := ValidateTopicConfigs(map[string]*string{"min.compaction.lag.ms": ptr("200")}); err != nil {
		t.Errorf("static cross check: %v", err)
	}
}

func TestNullValueInvalid(t *testing.T) {
	err := ValidateTopicConfigs(map[string]*string{"retention.ms": nil})
	if !errors.Is(err, ErrInvalid) || err.Error() != "null value for configuration retention.ms" {
		t.Errorf("got %v", err)
	}
}

func TestBrokerDefaults(t *testing.T) {
	b := DefaultBroker()
	checks := map[string]string{
		"node.id": "1", "broker.id": "1", "log.dirs": "./strata-data", "listeners": "PLAINTEXT://127.0.0.1:9092",
		"advertised.listeners": "", "auto.create.topics.enable": "true", "num.partitions": "1",
		"default.replication.factor": "1", "delete.topic.enable": "true", "socket.request.max.bytes": "104857600",
		"log.retention.hours": "168", "log.retention.check.interval.ms": "300000", "log.cleaner.enable": "true",
		"log.cleaner.threads": "1", "log.cleaner.dedupe.buffer.size": "134217728", "log.cleaner.backoff.ms": "15000",
		"offsets.topic.num.partitions": "50", "offsets.retention.minutes": "10080",
		"offsets.retention.check.interval.ms": "600000", "group.initial.rebalance.delay.ms": "3000",
		"group.min.session.timeout.ms": "6000", "group.max.session.timeout.ms": "1800000",
		"producer.id.expiration.ms": "86400000", "num.recovery.threads.per.data.dir": "2",
		"transaction.state.log.num.partitions": "50", "transaction.max.timeout.ms": "900000",
		"transactional.id.expiration.ms":          "604800000",
		"log.flush.offset.checkpoint.interval.ms": "60000", "strata.metrics.listener": "127.0.0.1:9644",
		"strata.log.level": "info", "strata.log.format": "text", "strata.durable.acks": "true",
		"log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308", "message.max.bytes": "1048588",
	}
	for n, v := range checks {
		if got := b.Get(n); got != v {
			t.Errorf("%s = %q, want %q", n, got, v)
		}
	}
	if b.Int("node.id") != 1 || !b.Bool("strata.durable.acks") || b.Float("log.cleaner.min.cleanable.ratio") != 0.5 ||
		b.Int64("log.flush.interval.messages") != 1<<63-1 || b.List("log.dirs")[0] != "./strata-data" {
		t.Error("typed getters")
	}
	if b.Float("log.cleaner.io.max.bytes.per.second") < 1e308 {
		t.Error("double max")
	}
	if b.IsSet("node.id") {
		t.Error("default reported as set")
	}
	defer func() {
		if recover() == nil {
			t.Error("typed getter on unknown name did not panic")
		}
	}()
	b.Int("no.such.setting")
}

func TestTopicDefaultSynonyms(t *testing.T) {
	b := DefaultBroker()
	if v, src, ex := b.TopicDefault("retention.ms"); v != "604800000" || src != "log.retention.hours" || ex {
		t.Errorf("retention.ms default: %q %q %v", v, src, ex)
	}
	if v, src, ex := b.TopicDefault("flush.ms"); v != maxLong || src != "" || ex {
		t.Errorf("flush.ms default: %q %q %v", v, src, ex)
	}
	mustSet(t, b, "log.retention.hours", "1")
	if v, src, ex := b.TopicDefault("retention.ms"); v != "3600000" || src != "log.retention.hours" || !ex {
		t.Errorf("hours: %q %q %v", v, src, ex)
	}
	mustSet(t, b, "log.retention.minutes", "2")
	if v, src, _ := b.TopicDefault("retention.ms"); v != "120000" || src != "log.retention.minutes" {
		t.Errorf("minutes: %q %q", v, src)
	}
	mustSet(t, b, "log.retention.ms", "5")
	if v, src, _ := b.TopicDefault("retention.ms"); v != "5" || src != "log.retention.ms" {
		t.Errorf("ms: %q %q", v, src)
	}
	b = DefaultBroker()
	mustSet(t, b, "log.retention.hours", "-1")
	if v, _, _ := b.TopicDefault("retention.ms"); v != "-1" {
		t.Errorf("negative hours: %q", v)
	}
	mustSet(t, b, "log.roll.hours", "2147483647")
	if v, _, _ := b.TopicDefault("segment.ms"); v != "7730941129200000" {
		t.Errorf("roll hours: %q", v)
	}
	mustSet(t, b, "log.cleanup.policy", "compact")
	mustSet(t, b, "message.max.bytes", "2000000")
	mustSet(t, b, "log.cleaner.min.cleanable.ratio", "0.1")
	cfg := b.TopicConfig(map[string]string{"segment.bytes": "1000"})
	if cfg["cleanup.policy"] != "compact" || cfg["max.message.bytes"] != "2000000" ||
		cfg["min.cleanable.dirty.ratio"] != "0.1" || cfg["segment.bytes"] != "1000" || len(cfg) != len(TopicSettings()) {
		t.Errorf("TopicConfig: %v", cfg)
	}
	if v, src, ex := b.TopicDefault("nope"); v != "" || src != "" || ex {
		t.Error("unknown topic setting")
	}
}

func mustSet(t *testing.T, b *Broker, n, v string) {
	t.Helper()
	if err := b.Set(n, v); err != nil {
		t.Fatal(err)
	}
}

func TestBrokerValidation(t *testing.T) {
	b := DefaultBroker()
	bad := map[string]string{
		"listeners":                  "://0.0.0.0:9093",
		"advertised.listeners":       "PLAINTEXT://h:0",
		"strata.metrics.listener":    "nohost",
		"strata.log.format":          "xml",
		"node.id":                    "-1",
		"log.dirs":                   " , ",
		"default.replication.factor": "0",
		"no.such":                    "1",
	}
	for n, v := range bad {
		if err := b.Set(n, v); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s=%q accepted (%v)", n, v, err)
		}
	}
	if err := b.Set("listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2"); err == nil {
		t.Error("two listeners accepted")
	}
	for n, v := range map[string]string{"listeners": "PLAINTEXT://:0", "advertised.listeners": "PLAINTEXT://[::1]:9092", "strata.metrics.listener": ""} {
		mustSet(t, b, n, v)
	}
	mustSet(t, b, "broker.id", "7")
	if b.Int("node.id") != 7 {
		t.Error("broker.id alias")
	}
	mustSet(t, b, "log.dir", "/x")
	if b.Get("log.dirs") != "/x" {
		t.Error("log.dir alias")
	}
}

func TestLoadBrokerPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.properties")
	content := "# comment\n! also comment\n\n  node.id = 3\nlog.dirs: /from/file\nnum.partitions 4\n" +
		"log.retention.hours=\\\n  24\nlisteners=PLAINTEXT://127.0.0.1:0\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"STRATA_LOG_DIRS=/from/env", "STRATA_NUM_PARTITIONS=5", "STRATA_BROKERS=ignored:1", "PATH=/bin", "STRATA_LONG=1"}
	b, err := LoadBroker(path, env, map[string]string{"num.partitions": "6"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Int("node.id") != 3 || b.Get("log.dirs") != "/from/env" || b.Int("num.partitions") != 6 ||
		b.Get("log.retention.hours") != "24" || b.Get("listeners") != "PLAINTEXT://127.0.0.1:0" {
		t.Errorf("got node.id=%s log.dirs=%s num.partitions=%s hours=%q listeners=%s", b.Get("node.id"),
			b.Get("log.dirs"), b.Get("num.partitions"), b.Get("log.retention.hours"), b.Get("listeners"))
	}
	if !b.IsSet("log.retention.hours") || b.IsSet("log.segment.bytes") {
		t.Error("IsSet")
	}
	if b.Int("broker.id") != 3 {
		t.Error("alias via file")
	}
}

func TestLoadBrokerErrors(t *testing.T) {
	dir := t.TempDir()
	n := 0
	write := func(s string) string {
		n++
		p := filepath.Join(dir, strings.Repeat("s", n)+".properties")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		path     string
		env      []string
		ovr      map[string]string
		contains string
	}{
		{write("a=1\nfoo.bar=2\n"), nil, nil, `s.properties:1: unknown broker config "a"`},
		{write("log.segment.bytes=abc\n"), nil, nil, `ss.properties:1: invalid value "abc" for configuration log.segment.bytes: not a number (allowed: [14,...])`},
		{"", []string{"STRATA_NODE_ID=x"}, nil, `environment variable STRATA_NODE_ID: invalid value "x" for configuration node.id: not a number`},
		{"", nil, map[string]string{"strata.log.level": "loud"}, `invalid value "loud" for configuration strata.log.level: must be one of debug, info, warn, error (allowed: one of debug, info, warn, error)`},
		{"", nil, map[string]string{"bogus": "1"}, `unknown broker config "bogus"`},
		{write("node.id=1\nbroker.id=2\n"), nil, nil, `conflicting values for node.id ("1") and broker.id ("2")`},
		{"", nil, map[string]string{"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"}, "group.min.session.timeout.ms (10) must not be greater"},
		{"", nil, map[string]string{"group.consumer.heartbeat.interval.ms": "45000"}, "group.consumer.heartbeat.interval.ms (45000) must be less than group.consumer.session.timeout.ms (45000)"},
		{filepath.Join(dir, "missing"), nil, nil, "read config file: open"},
	}
	for _, c := range cases {
		_, err := LoadBroker(c.path, c.env, c.ovr)
		if err == nil || !strings.Contains(err.Error(), c.contains) {
			t.Errorf("got %v, want it to contain %q", err, c.contains)
		}
	}
}

func TestEnvName(t *testing.T) {
	if EnvName("log.dirs") != "STRATA_LOG_DIRS" || EnvName("node.id") != "STRATA_NODE_ID" {
		t.Error(EnvName("log.dirs"))
	}
}

func TestDocsUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	want := Markdown()
	if os.Getenv("STRATA_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("docs/configuration.md is out of date with internal/config tables (%v); regenerate with: STRATA_UPDATE_DOCS=1 go test ./internal/config", err)
	}
}
