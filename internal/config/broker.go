package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/internal/suggest"
)

// Broker is the broker's resolved settings: every BrokerSettings name
// with its value (defaults filled in).
type Broker struct {
	values   map[string]string
	explicit map[string]bool // set by file, env or override (not a default)
	// ignored holds the Kafka settings accepted without effect
	// (ignoredTable) that were set, by name.
	ignored map[string]string
	// warnings are notes for the startup log (LoadBroker).
	warnings []string
	// static is the configuration the dynamic layers were laid over
	// (WithDynamic; nil for a static configuration), dynDefault and
	// dynBroker those layers (dynamic.go).
	static                *Broker
	dynDefault, dynBroker map[string]string
	// perListener holds the listener.name.<listener>.<setting> values
	// that are not rows of the broker table (listeners.go).
	perListener map[string]string
	// oneNode marks the implicit KRaft settings of zero configuration
	// (WithOneNodeCluster).
	oneNode bool
}

// DefaultBroker returns the broker settings with every default.
func DefaultBroker() *Broker {
	b := &Broker{values: make(map[string]string, len(brokerTable)), explicit: map[string]bool{}, ignored: map[string]string{}}
	for _, s := range brokerTable {
		b.values[s.Name] = s.Default
	}
	return b
}

// Get returns a setting's value as a string ("" if unknown or unset).
func (b *Broker) Get(name string) string { return b.values[name] }

// IsSet reports whether the setting was given explicitly (file, env,
// override or Set) rather than left at its default.
func (b *Broker) IsSet(name string) bool { return b.explicit[name] }

// Set validates and sets one value. Setting broker.id or log.dir also sets
// node.id or log.dirs (and the other way round). A Kafka setting Strata
// accepts without effect (IgnoredSettings) is checked and remembered for
// Warnings; one it refuses, or an unknown name, is an error saying what to
// do.
func (b *Broker) Set(name, value string) error {
	s, ok := brokerIndex[name]
	if !ok {
		if handled, err := b.setListenerSetting(name, value); handled {
			return err
		}
		if ig, ok := ignoredIndex[name]; ok {
			value = strings.TrimSpace(value)
			if err := ig.Validate(value); err != nil {
				return err
			}
			b.ignored[name] = value
			return nil
		}
		if hint := unsupportedHint(name); hint != "" {
			return invalidf("%s %s", name, hint)
		}
		if near := suggest.Closest(name, acceptedNames()); near != "" {
			return invalidf("unknown broker config %q: did you mean %s?", name, near)
		}
		return invalidf("unknown broker config %q: remove it (docs/configuration.md lists every setting)", name)
	}
	value = strings.TrimSpace(value)
	if err := s.Validate(value); err != nil {
		return err
	}
	b.values[name] = value
	b.explicit[name] = true
	if other, ok := aliases[name]; ok {
		b.values[other] = value
		b.explicit[other] = true
	}
	return nil
}

// Names returns the names of every setting, sorted.
func (b *Broker) Names() []string {
	out := make([]string, 0, len(b.values))
	for n := range b.values {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// mustSetting returns the table row or panics (programming error).
func (b *Broker) mustValue(name string) string {
	if _, ok := brokerIndex[name]; !ok {
		panic(fmt.Sprintf("config: unknown broker setting %q", name))
	}
	return b.values[name]
}

// Int64 returns an integer setting (0 when unset). Typed getters panic on
// unknown names: a programming error.
func (b *Broker) Int64(name string) int64 {
	n, _ := strconv.ParseInt(b.mustValue(name), 10, 64)
	return n
}

// Int returns an integer setting (0 when unset).
func (b *Broker) Int(name string) int { return int(b.Int64(name)) }

// Bool returns a boolean setting.
func (b *Broker) Bool(name string) bool { return strings.EqualFold(b.mustValue(name), "true") }

// Float returns a double setting (0 when unset).
func (b *Broker) Float(name string) float64 {
	f, _ := strconv.ParseFloat(b.mustValue(name), 64)
	return f
}

// List returns a comma-separated setting split into trimmed items.
func (b *Broker) List(name string) []string { return splitList(b.mustValue(name)) }

// TopicDefault returns the broker-level default for a topic setting,
// following its synonyms (e.g. retention.ms from log.retention.ms, else
// log.retention.minutes*60000, else log.retention.hours*3600000), and
// which broker setting supplied it ("" when the static default did) and
// whether that broker setting was explicitly set.
//
// The first explicitly set synonym wins; otherwise the first synonym with
// a (non-null) default supplies it with explicit=false; otherwise the topic
// table's static default is returned with source "". Unknown topic
// settings return ("", "", false).
func (b *Broker) TopicDefault(topicSetting string) (value string, source string, explicit bool) {
	s, ok := topicIndex[topicSetting]
	if !ok {
		return "", "", false
	}
	for _, syn := range s.BrokerSynonyms {
		if b.explicit[syn] {
			return convertSynonym(topicSetting, syn, b.values[syn]), syn, true
		}
	}
	for _, syn := range s.BrokerSynonyms {
		if v := b.values[syn]; v != "" {
			return convertSynonym(topicSetting, syn, v), syn, false
		}
	}
	return s.Default, "", false
}

// TopicConfig returns the effective value of every topic setting for a
// topic with the given overrides: the override if present, else the
// broker default (TopicDefault).
func (b *Broker) TopicConfig(overrides map[string]string) map[string]string {
	out := make(map[string]string, len(topicTable))
	for _, s := range topicTable {
		if v, ok := overrides[s.Name]; ok {
			out[s.Name] = strings.TrimSpace(v)
			continue
		}
		out[s.Name], _, _ = b.TopicDefault(s.Name)
	}
	return out
}

// convertSynonym converts a broker synonym's value to the topic setting's
// unit (minutes and hours to milliseconds; negative retention = -1).
func convertSynonym(topicSetting, syn, v string) string {
	var mult int64
	switch {
	case strings.HasSuffix(syn, ".minutes"):
		mult = 60_000
	case strings.HasSuffix(syn, ".hours"):
		mult = 3_600_000
	default:
		return v
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return v
	}
	if n < 0 && topicSetting == "retention.ms" {
		return "-1"
	}
	if n > math.MaxInt64/mult {
		return maxLong
	}
	return strconv.FormatInt(n*mult, 10)
}

// validate checks the rules between broker settings and returns every
// rule broken.
func (b *Broker) validate() []error {
	var errs []error
	if b.Int64("group.min.session.timeout.ms") > b.Int64("group.max.session.timeout.ms") {
		errs = append(errs, invalidf("invalid configuration: group.min.session.timeout.ms (%s) must not be greater than group.max.session.timeout.ms (%s)",
			b.Get("group.min.session.timeout.ms"), b.Get("group.max.session.timeout.ms")))
	}
	if b.Int64("group.consumer.heartbeat.interval.ms") >= b.Int64("group.consumer.session.timeout.ms") {
		errs = append(errs, invalidf("invalid configuration: group.consumer.heartbeat.interval.ms (%s) must be less than group.consumer.session.timeout.ms (%s)",
			b.Get("group.consumer.heartbeat.interval.ms"), b.Get("group.consumer.session.timeout.ms")))
	}
	if b.Int64("log.cleaner.min.compaction.lag.ms") > b.Int64("log.cleaner.max.compaction.lag.ms") {
		errs = append(errs, invalidf("invalid configuration: log.cleaner.min.compaction.lag.ms (%s) must not be greater than log.cleaner.max.compaction.lag.ms (%s)",
			b.Get("log.cleaner.min.compaction.lag.ms"), b.Get("log.cleaner.max.compaction.lag.ms")))
	}
	// Kafka's KafkaConfig.validateValues: a follower's long poll must not
	// outlast the time after which it leaves the ISR.
	if b.Int64("replica.fetch.wait.max.ms") > b.Int64("replica.lag.time.max.ms") {
		errs = append(errs, invalidf("invalid configuration: replica.fetch.wait.max.ms (%s) should always be less than or equal to replica.lag.time.max.ms (%s) to prevent frequent changes in ISR",
			b.Get("replica.fetch.wait.max.ms"), b.Get("replica.lag.time.max.ms")))
	}
	// Kafka's KafkaConfig.validateValues rules for the connection limits.
	if q := b.Int64("queued.max.request.bytes"); q > 0 && q < b.Int64("socket.request.max.bytes") {
		errs = append(errs, invalidf("invalid configuration: queued.max.request.bytes must be larger or equal to socket.request.max.bytes"))
	}
	if b.Int64("max.connections.per.ip") == 0 && strings.TrimSpace(b.Get("max.connections.per.ip.overrides")) == "" {
		errs = append(errs, invalidf("invalid configuration: max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."))
	}
	if err := b.validateKRaft(); err != nil { // the listener rules below build on it
		return append(errs, err)
	}
	if err := b.validateTLS(); err != nil {
		errs = append(errs, err)
	}
	if err := b.validateSASL(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// Warnings are the notes LoadBroker gathered for the startup log: Kafka
// settings accepted without effect (one line per reason, naming them),
// deprecated environment variable names and STRATA_ variables that name no
// setting.
func (b *Broker) Warnings() []string { return append([]string(nil), b.warnings...) }

// ignoredWarnings returns one line per reason naming the ignored settings
// that were set.
func (b *Broker) ignoredWarnings() []string {
	byWhy := map[string][]string{}
	var whys []string
	for _, s := range ignoredTable { // sorted by name
		if _, ok := b.ignored[s.Name]; !ok {
			continue
		}
		if byWhy[s.why] == nil {
			whys = append(whys, s.why)
		}
		byWhy[s.why] = append(byWhy[s.why], s.Name)
	}
	var out []string
	for _, why := range whys {
		out = append(out, fmt.Sprintf("accepted without effect: %s (%s)", strings.Join(byWhy[why], ", "), why))
	}
	return out
}
