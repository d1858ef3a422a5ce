package config

import (
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/internal/suggest"
)

// maxLong is Java's Long.MAX_VALUE as Kafka prints it.
const maxLong = "9223372036854775807"

// topicTable lists every topic setting Strata honours. Settings Kafka has
// but Strata cannot honour are absent and rejected with the reason in
// unsupportedTopic.
var topicTable = sortTable([]Setting{
	def("cleanup.policy", TypeList, "delete", subsetOf("compact", "delete"),
		"How old log segments are discarded: \"delete\" removes segments past retention.ms/retention.bytes, \"compact\" keeps the latest record of every key (tombstones are removed after delete.retention.ms). \"compact,delete\" does both.",
		"log.cleanup.policy"),
	def("compression.type", TypeString, "producer", oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
		"Compression codec of stored batches. \"producer\" keeps whatever the producer sent; any other value makes the broker recompress batches that use a different codec.",
		"compression.type"),
	def("delete.retention.ms", TypeLong, "86400000", atLeast(0),
		"How long tombstones (and transaction markers) survive in a compacted log after the cleaner first reaches them, so consumers can see the delete.",
		"log.cleaner.delete.retention.ms"),
	def("file.delete.delay.ms", TypeLong, "60000", atLeast(0),
		"Delay between renaming a deleted segment to *.deleted and unlinking its files, so readers still holding it can finish.",
		"log.segment.delete.delay.ms"),
	def("flush.messages", TypeLong, maxLong, atLeast(1),
		"Force an fsync of the partition after this many messages have been appended since the last one. Strata already fsyncs before acknowledging acks=all writes when strata.durable.acks is true.",
		"log.flush.interval.messages"),
	def("flush.ms", TypeLong, maxLong, atLeast(0),
		"Force an fsync of the partition when this much time has passed since the last one.",
		"log.flush.interval.ms"),
	def("index.interval.bytes", TypeInt, "4096", atLeast(0),
		"Bytes of log between two entries of the sparse offset and time indexes. 0 indexes nearly every batch.",
		"log.index.interval.bytes"),
	def("leader.replication.throttled.replicas", TypeList, "", custom(throttledReplicasAllowed, throttledReplicasReason),
		"Replicas whose leader-side replication is throttled by leader.replication.throttled.rate: [partition]:[broker] entries (the broker is a leader that sends) or * for every replica. kafka-reassign-partitions --throttle sets it to the current replicas of the moving partitions."),
	def("follower.replication.throttled.replicas", TypeList, "", custom(throttledReplicasAllowed, throttledReplicasReason),
		"Replicas whose follower-side replication is throttled by follower.replication.throttled.rate: [partition]:[broker] entries (the broker is a follower that fetches) or * for every replica. kafka-reassign-partitions --throttle sets it to the replicas being added."),
	def("max.compaction.lag.ms", TypeLong, maxLong, atLeast(1),
		"Longest time a record may stay ineligible for compaction; also caps the age of the active segment of a compacted log.",
		"log.cleaner.max.compaction.lag.ms"),
	def("max.message.bytes", TypeInt, "1048588", atLeast(0),
		"Largest record batch (after compression) the partition accepts.",
		"message.max.bytes"),
	def("message.timestamp.after.max.ms", TypeLong, maxLong, atLeast(0),
		"Largest allowed amount by which a CreateTime record timestamp may be ahead of the broker's clock; later timestamps are rejected. Ignored with LogAppendTime.",
		"log.message.timestamp.after.max.ms"),
	def("message.timestamp.before.max.ms", TypeLong, maxLong, atLeast(0),
		"Largest allowed amount by which a CreateTime record timestamp may be behind the broker's clock; older timestamps are rejected. Ignored with LogAppendTime.",
		"log.message.timestamp.before.max.ms"),
	def("message.timestamp.type", TypeString, "CreateTime", oneOf("CreateTime", "LogAppendTime"),
		"Whether record timestamps are the producer's (CreateTime) or the broker's append time (LogAppendTime).",
		"log.message.timestamp.type"),
	def("min.cleanable.dirty.ratio", TypeDouble, "0.5", floatBetween(0, 1),
		"The cleaner compacts a log only when the uncleaned part exceeds this fraction of the log (strictly greater), unless max.compaction.lag.ms forces it.",
		"log.cleaner.min.cleanable.ratio"),
	def("min.compaction.lag.ms", TypeLong, "0", atLeast(0),
		"Shortest time a record stays uncompacted after it is written. Must not exceed max.compaction.lag.ms.",
		"log.cleaner.min.compaction.lag.ms"),
	def("min.insync.replicas", TypeInt, "1", atLeast(1),
		"Minimum number of in-sync replicas for an acks=all write to succeed.",
		"min.insync.replicas"),
	def("preallocate", TypeBoolean, "false", anyValue,
		"Preallocate the segment file to segment.bytes when a segment is created.",
		"log.preallocate"),
	def("retention.bytes", TypeLong, "-1", anyValue,
		"Size a partition may reach before its oldest segments are deleted (delete policy). -1 means no size limit.",
		"log.retention.bytes"),
	def("retention.ms", TypeLong, "604800000", atLeast(-1),
		"Age after which a segment is deleted (delete policy), judged by its newest record timestamp. -1 means no time limit.",
		"log.retention.ms", "log.retention.minutes", "log.retention.hours"),
	def("segment.bytes", TypeInt, "1073741824", atLeast(14),
		"Size at which the active segment is rolled. Batches larger than this are rejected.",
		"log.segment.bytes"),
	def("segment.index.bytes", TypeInt, "10485760", atLeast(4),
		"Size of the offset and time index files preallocated for each segment; a full index rolls the segment.",
		"log.index.size.max.bytes"),
	def("segment.jitter.ms", TypeLong, "0", atLeast(0),
		"Random amount (up to this value) subtracted from segment.ms per segment so many partitions do not roll at once.",
		"log.roll.jitter.ms", "log.roll.jitter.hours"),
	def("segment.ms", TypeLong, "604800000", atLeast(1),
		"Age after which the active segment is rolled even if not full, so retention and compaction can act on it.",
		"log.roll.ms", "log.roll.hours"),
	def("unclean.leader.election.enable", TypeBoolean, "false", anyValue,
		"Whether an out-of-sync replica may become leader (possible data loss). Has no effect on a single node.",
		"unclean.leader.election.enable"),
})

var topicIndex = indexTable(topicTable)

// unsupportedTopic holds the Kafka topic settings Strata cannot honour
// (Kafka's LogConfig / TopicConfig names), each with why, so that setting
// one is refused with a reason instead of "unknown" (which reads as a
// typo). Kafka itself refuses remote.storage.enable on a broker without
// tiered storage, and 4.0 removed message.format.version and
// message.downconversion.enable.
var unsupportedTopic = map[string]string{
	"remote.storage.enable":         "Strata has no tiered storage (KIP-405)",
	"local.retention.ms":            "Strata has no tiered storage (KIP-405): every segment is local, retention.ms applies",
	"local.retention.bytes":         "Strata has no tiered storage (KIP-405): every segment is local, retention.bytes applies",
	"remote.log.copy.disable":       "Strata has no tiered storage (KIP-405)",
	"remote.log.delete.on.disable":  "Strata has no tiered storage (KIP-405)",
	"message.downconversion.enable": "Strata never down-converts: it serves record batch v2 only (Kafka 4.0 removed the setting)",
	"message.format.version":        "Strata writes record batch v2 only (Kafka 3.0 and later ignore the setting, 4.0 removed it)",
	"compression.gzip.level":        "Strata compresses at each codec's default level (KIP-390 levels are not supported)",
	"compression.lz4.level":         "Strata compresses at each codec's default level (KIP-390 levels are not supported)",
	"compression.zstd.level":        "Strata compresses at each codec's default level (KIP-390 levels are not supported)",
}

// unknownTopicConfig is the INVALID_CONFIG error for a topic setting
// name Strata does not take: the reason for a Kafka setting it cannot
// honour, else the closest setting's name for a likely typo.
func unknownTopicConfig(name string) error {
	if why, ok := unsupportedTopic[name]; ok {
		return invalidf("topic config %q is not supported: %s; remove it", name, why)
	}
	names := make([]string, len(topicTable))
	for i, s := range topicTable {
		names[i] = s.Name
	}
	if near := suggest.Closest(name, names); near != "" {
		return invalidf("unknown topic config %q: did you mean %s?", name, near)
	}
	return invalidf("unknown topic config %q", name)
}

func sortTable(t []Setting) []Setting {
	sort.Slice(t, func(i, j int) bool { return t[i].Name < t[j].Name })
	return t
}

func indexTable(t []Setting) map[string]Setting {
	m := make(map[string]Setting, len(t))
	for _, s := range t {
		m[s.Name] = s
	}
	return m
}

// ValidateTopicConfig checks one topic setting's name and value (no
// cross-field rules).
func ValidateTopicConfig(name, value string) error {
	s, ok := topicIndex[name]
	if !ok {
		return unknownTopicConfig(name)
	}
	return s.Validate(value)
}

// ValidateTopicConfigs checks names and values of topic overrides and the
// cross-field rules (min.compaction.lag.ms <= max.compaction.lag.ms, ...).
// A nil value is invalid (CreateTopics). Errors wrap ErrInvalid. Settings
// missing from cfg take their static defaults for the cross-field rules;
// use (*Broker).ValidateTopicConfigs to compare against broker defaults.
func ValidateTopicConfigs(cfg map[string]*string) error {
	return validateTopicConfigs(cfg, func(name string) string { return topicIndex[name].Default })
}

// ValidateTopicConfigs is like the package function but fills settings
// missing from cfg with this broker's defaults for the cross-field rules.
func (b *Broker) ValidateTopicConfigs(cfg map[string]*string) error {
	return validateTopicConfigs(cfg, func(name string) string {
		v, _, _ := b.TopicDefault(name)
		return v
	})
}

func validateTopicConfigs(cfg map[string]*string, dflt func(string) string) error {
	names := make([]string, 0, len(cfg))
	for n := range cfg {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := topicIndex[n]; !ok {
			return unknownTopicConfig(n)
		}
		if cfg[n] == nil {
			return invalidf("null value for configuration %s", n)
		}
		if err := ValidateTopicConfig(n, *cfg[n]); err != nil {
			return err
		}
	}
	get := func(n string) string {
		if v, ok := cfg[n]; ok {
			return strings.TrimSpace(*v)
		}
		return dflt(n)
	}
	minLag, _ := strconv.ParseInt(get("min.compaction.lag.ms"), 10, 64)
	maxLag, _ := strconv.ParseInt(get("max.compaction.lag.ms"), 10, 64)
	if minLag > maxLag {
		return invalidf("invalid configuration: min.compaction.lag.ms (%d) must not be greater than max.compaction.lag.ms (%d)", minLag, maxLag)
	}
	return nil
}

// throttledReplicasAllowed is Kafka's ThrottledReplicaListValidator
// message for leader/follower.replication.throttled.replicas.
const throttledReplicasAllowed = "the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."

// throttledReplicasReason is Kafka's ThrottledReplicaListValidator: every
// comma-separated entry (trimmed) is empty or partition:broker in digits,
// or the whole list is "*".
func throttledReplicasReason(v string) string {
	entries := strings.Split(v, ",")
	all := ""
	ok := true
	for _, e := range entries {
		e = strings.TrimSpace(e)
		all += e
		if e == "" {
			continue
		}
		p, b, found := strings.Cut(e, ":")
		if !found || !digits(p) || !digits(b) {
			ok = false
		}
	}
	if ok || all == "*" {
		return ""
	}
	return "must be " + throttledReplicasAllowed
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
