package broker

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
)

// topicSettings is the part of a topic's resolved configuration the
// broker applies itself (storage applies the rest).
type topicSettings struct {
	requireKeys bool // cleanup.policy contains compact
	// compression is the codec batches are stored in, or -1 for
	// compression.type=producer (keep the producer's codec).
	compression record.Compression
	minISR      int
}

// resolveConfig turns a topic's overrides over the broker defaults into the
// storage settings and the broker-applied settings. It is the one place
// where topic config values become behaviour.
func resolveConfig(b *config.Broker, overrides map[string]string, durable bool) (storage.Config, topicSettings, error) {
	vals := b.TopicConfig(overrides)
	var (
		cfg  storage.Config
		ts   topicSettings
		errs []string
	)
	i64 := func(name string) int64 {
		v, err := strconv.ParseInt(strings.TrimSpace(vals[name]), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q", name, vals[name]))
		}
		return v
	}
	i32 := func(name string) int32 {
		v := i64(name)
		if v > math.MaxInt32 {
			return math.MaxInt32
		}
		if v < math.MinInt32 {
			return math.MinInt32
		}
		return int32(v)
	}
	ms := func(name string) time.Duration {
		v := i64(name)
		if v > math.MaxInt64/int64(time.Millisecond) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(v) * time.Millisecond
	}
	cfg.SegmentBytes = i64("segment.bytes")
	cfg.SegmentMs = ms("segment.ms")
	cfg.SegmentJitterMs = ms("segment.jitter.ms")
	cfg.SegmentIndexBytes = i32("segment.index.bytes")
	cfg.IndexIntervalBytes = i32("index.interval.bytes")
	cfg.RetentionMs = i64("retention.ms")
	cfg.RetentionBytes = i64("retention.bytes")
	cfg.FileDeleteDelay = ms("file.delete.delay.ms")
	cfg.FlushMessages = i64("flush.messages")
	cfg.FlushMs = i64("flush.ms")
	cfg.MaxMessageBytes = i32("max.message.bytes")
	cfg.LogAppendTime = vals["message.timestamp.type"] == "LogAppendTime"
	cfg.Preallocate = strings.EqualFold(vals["preallocate"], "true")
	for _, p := range strings.Split(vals["cleanup.policy"], ",") {
		switch strings.TrimSpace(p) {
		case "compact":
			cfg.Compact = true
		case "delete":
			cfg.Delete = true
		}
	}
	cfg.MaxCompactionLagMs = i64("max.compaction.lag.ms")
	cfg.TimestampBeforeMaxMs = i64("message.timestamp.before.max.ms")
	cfg.TimestampAfterMaxMs = i64("message.timestamp.after.max.ms")
	ratio, err := strconv.ParseFloat(vals["min.cleanable.dirty.ratio"], 64)
	if err != nil {
		errs = append(errs, "min.cleanable.dirty.ratio="+vals["min.cleanable.dirty.ratio"])
	}
	cfg.MinCleanableDirtyRatio = ratio
	cfg.DeleteRetentionMs = i64("delete.retention.ms")
	cfg.MinCompactionLagMs = i64("min.compaction.lag.ms")
	cfg.Durable = durable

	ts.requireKeys = cfg.Compact
	ts.minISR = int(i64("min.insync.replicas"))
	switch vals["compression.type"] {
	case "producer":
		ts.compression = -1
	case "uncompressed":
		ts.compression = record.None
	case "gzip":
		ts.compression = record.Gzip
	case "snappy":
		ts.compression = record.Snappy
	case "lz4":
		ts.compression = record.LZ4
	case "zstd":
		ts.compression = record.Zstd
	default:
		errs = append(errs, "compression.type="+vals["compression.type"])
	}
	if len(errs) > 0 {
		return cfg, ts, fmt.Errorf("%w: unparseable topic settings: %s", config.ErrInvalid, strings.Join(errs, ", "))
	}
	return cfg, ts, nil
}

// ConfigSource is where a described config value comes from (Kafka's
// DescribeConfigs ConfigSource values).
type ConfigSource int8

// Config sources.
const (
	SourceTopic          ConfigSource = 1 // DYNAMIC_TOPIC_CONFIG
	SourceStaticBroker   ConfigSource = 4 // STATIC_BROKER_CONFIG
	SourceDefault        ConfigSource = 5 // DEFAULT_CONFIG
	SourceDynamicBroker  ConfigSource = 2 // DYNAMIC_BROKER_CONFIG
	SourceDynamicDefault ConfigSource = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG
)

// ConfigSynonym is one synonym of a described config, most specific first.
type ConfigSynonym struct {
	Name   string
	Value  string
	Source ConfigSource
}

// ConfigEntry is one topic config as DescribeConfigs reports it.
type ConfigEntry struct {
	Name      string
	Value     string
	Null      bool // value is null (no default)
	Source    ConfigSource
	ReadOnly  bool
	Sensitive bool
	Type      config.Type
	Doc       string
	Synonyms  []ConfigSynonym
}

// describeTopicConfig lists every topic setting with its effective value.
func describeTopicConfig(b *config.Broker, overrides map[string]string) []ConfigEntry {
	var out []ConfigEntry
	for _, s := range config.TopicSettings() {
		e := ConfigEntry{Name: s.Name, Type: s.Type, Doc: s.Doc, ReadOnly: s.ReadOnly}
		if v, ok := overrides[s.Name]; ok {
			e.Value, e.Source = v, SourceTopic
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: s.Name, Value: v, Source: SourceTopic})
		}
		// The broker synonyms' dynamic and static values, most specific
		// first (Kafka's DescribeConfigs synonyms).
		for _, syn := range s.BrokerSynonyms {
			for _, l := range b.Layers(syn) {
				if l.Source != config.SourceDefault {
					e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: syn, Value: l.Value, Source: ConfigSource(l.Source)})
				}
			}
		}
		if v, src, explicit := b.TopicDefault(s.Name); e.Source == 0 && explicit {
			e.Value, e.Source = v, ConfigSource(b.SourceOf(src))
		}
		if e.Source == 0 {
			e.Value, _, _ = b.TopicDefault(s.Name)
			e.Source = SourceDefault
		}
		if len(s.BrokerSynonyms) > 0 {
			if d := brokerDefault(s.BrokerSynonyms); d.Name != "" {
				e.Synonyms = append(e.Synonyms, d)
			}
		}
		e.Null = e.Value == "" && s.Default == ""
		out = append(out, e)
	}
	return out
}

// brokerDefault returns the first broker synonym that has a static default,
// as a DEFAULT_CONFIG synonym.
func brokerDefault(syns []string) ConfigSynonym {
	for _, syn := range syns {
		if s, ok := config.LookupBroker(syn); ok && s.Default != "" {
			return ConfigSynonym{Name: syn, Value: s.Default, Source: SourceDefault}
		}
	}
	return ConfigSynonym{}
}

// DescribeConfigsFor lists every topic config for a topic with the given
// overrides (CreateTopics v5+ echoes them).
func (b *Broker) DescribeConfigsFor(overrides map[string]string) []ConfigEntry {
	return describeTopicConfig(b.Config(), overrides)
}
