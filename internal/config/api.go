// Package config holds Strata's two settings tables, broker settings
// (Kafka's broker config names: log.dirs, listeners, log.segment.bytes, ...)
// and topic settings (segment.bytes, cleanup.policy, ...), with their types,
// defaults, validators and docs. The same tables drive validation,
// DescribeConfigs, `strata serve --help` and docs/configuration.md.
package config

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

// String returns the type name as Kafka documents it (INT, LONG, ...).
func (t Type) String() string {
	switch t {
	case TypeBoolean:
		return "boolean"
	case TypeString:
		return "string"
	case TypeInt:
		return "int"
	case TypeShort:
		return "short"
	case TypeLong:
		return "long"
	case TypeDouble:
		return "double"
	case TypeList:
		return "list"
	case TypeClass:
		return "class"
	case TypePassword:
		return "password"
	}
	return "unknown"
}

// ErrInvalid is wrapped by every validation error (maps to INVALID_CONFIG).
var ErrInvalid = errors.New("invalid config")

// Setting is one row of a settings table.
type Setting struct {
	Name     string
	Type     Type
	Default  string // as Kafka prints it ("" = null: no value)
	Doc      string
	ReadOnly bool
	// BrokerSynonyms are, for a topic setting, the broker settings that
	// supply its default, most specific first (e.g. retention.ms ->
	// log.retention.ms, log.retention.minutes, log.retention.hours).
	BrokerSynonyms []string
	// Validate returns an error wrapping ErrInvalid naming the value and what
	// is allowed. Nil means any value of Type.
	Validate func(value string) error
	// Allowed describes the valid values for docs and help ("[0,...]",
	// "one of compact, delete"); "" when any value of Type is allowed.
	Allowed string
}

// TopicSettings returns the topic settings table, sorted by name. Every
// setting listed is honoured by Strata; anything else is rejected.
func TopicSettings() []Setting { return cloneTable(topicTable) }

// BrokerSettings returns the broker settings table, sorted by name.
func BrokerSettings() []Setting { return cloneTable(brokerTable) }

// LookupTopic finds a topic setting by name.
func LookupTopic(name string) (Setting, bool) {
	s, ok := topicIndex[name]
	return s, ok
}

// LookupBroker finds a broker setting by name.
func LookupBroker(name string) (Setting, bool) {
	s, ok := brokerIndex[name]
	return s, ok
}

func cloneTable(t []Setting) []Setting {
	out := make([]Setting, len(t))
	copy(out, t)
	for i := range out {
		out[i].BrokerSynonyms = append([]string(nil), out[i].BrokerSynonyms...)
	}
	return out
}
