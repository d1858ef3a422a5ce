// Package config holds Strata's two settings tables, broker settings
// (Kafka's broker config names: log.dirs, listeners, log.segment.bytes, ...)
// and topic settings (segment.bytes, cleanup.policy, ...), with their types,
// defaults, validators and docs. The same tables drive validation,
// DescribeConfigs, `strata serve --help` and docs/configuration.md.
package config

// CONTRACT STUB written by the lead. The ops helper implements it (and may
// split files) keeping the exported names and signatures below.

import "errors"

// Type is a config value type, as Kafka's DescribeConfigs reports it.
type Type int8

// Config types (values match Kafka's DescribeConfigs ConfigType).
const (
	TypeBoolean  Type = 1
	TypeString   Type = 2
	TypeInt      Type = 3
	TypeShort    Type = 4
	TypeLong     Type = 5
	TypeDouble   Type = 6
	TypeList     Type = 7
	TypeClass    Type = 8
	TypePassword Type = 9
)

// ErrInvalid is wrapped by every validation error (maps to INVALID_CONFIG).
var ErrInvalid = errors.New("invalid config")

// Setting is one row of a settings table.
type Setting struct {
	Name     string
	Type     Type
	Default  string // as Kafka prints it
	Doc      string
	ReadOnly bool
	// BrokerSynonyms are, for a topic setting, the broker settings that
	// supply its default, most specific first (e.g. retention.ms ->
	// log.retention.ms, log.retention.minutes, log.retention.hours).
	BrokerSynonyms []string
	// Validate returns an error wrapping ErrInvalid naming the value and what
	// is allowed. Nil means any value of Type.
	Validate func(value string) error
}

// TopicSettings returns the topic settings table, sorted by name. Every
// setting listed is honoured by Strata; anything else is rejected.
func TopicSettings() []Setting { panic("stub") }

// BrokerSettings returns the broker settings table, sorted by name.
func BrokerSettings() []Setting { panic("stub") }

// LookupTopic finds a topic setting by name.
func LookupTopic(name string) (Setting, bool) { panic("stub") }

// ValidateTopicConfigs checks names and values of topic overrides and the
// cross-field rules (min.compaction.lag.ms <= max.compaction.lag.ms, ...).
// A nil value is invalid (CreateTopics). Errors wrap ErrInvalid.
func ValidateTopicConfigs(cfg map[string]*string) error { panic("stub") }

// Broker is the broker's resolved settings: every BrokerSettings name
// with its value (defaults filled in).
type Broker struct {
	values map[string]string
}

// DefaultBroker returns the broker settings with every default.
func DefaultBroker() *Broker { panic("stub") }

// LoadBroker builds broker settings from, in rising precedence, a
// server.properties-style file (path may be empty), the environment
// (STRATA_LOG_DIRS for log.dirs: upper-case, dots to underscores, STRATA_
// prefix) and explicit overrides (flags). Unknown names or invalid values
// fail with a message naming the setting, the value and what is allowed.
func LoadBroker(path string, environ []string, overrides map[string]string) (*Broker, error) {
	panic("stub")
}

// Get returns a setting's value as a string ("" if unknown).
func (b *Broker) Get(name string) string { panic("stub") }

// Set validates and sets one value.
func (b *Broker) Set(name, value string) error { panic("stub") }

// Int64, Int, Bool, Float, List are typed getters (panic on unknown names:
// programming error).
func (b *Broker) Int64(name string) int64   { panic("stub") }
func (b *Broker) Int(name string) int       { panic("stub") }
func (b *Broker) Bool(name string) bool     { panic("stub") }
func (b *Broker) Float(name string) float64 { panic("stub") }
func (b *Broker) List(name string) []string { panic("stub") }

// TopicDefault returns the broker-level default for a topic setting,
// following its synonyms (e.g. retention.ms from log.retention.ms, else
// log.retention.minutes*60000, else log.retention.hours*3600000), and
// which broker setting supplied it ("" when the static default did) and
// whether that broker setting was explicitly set.
func (b *Broker) TopicDefault(topicSetting string) (value string, source string, explicit bool) {
	panic("stub")
}
