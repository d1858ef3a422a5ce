package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Dynamic broker configs (docs/cluster.md "Dynamic broker configs"), as
// Kafka's DynamicBrokerConfig: a broker setting may be changed while the
// cluster runs, per broker (IncrementalAlterConfigs/AlterConfigs on the
// BROKER resource named by the node id) or as the cluster-wide default
// (resource name ""). Precedence, most specific first (Kafka's
// DynamicBrokerConfig): DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
// STATIC_BROKER_CONFIG (file, environment, flags), DEFAULT_CONFIG.

// UpdateMode is how a broker setting may be changed at run time, as
// Kafka's documentation names it ("Update Mode").
type UpdateMode string

// Update modes (Kafka's DynamicBrokerConfig.dynamicConfigUpdateModes).
const (
	ReadOnly    UpdateMode = "read-only"
	PerBroker   UpdateMode = "per-broker"
	ClusterWide UpdateMode = "cluster-wide"
)

// kafkaDynamicOther are the broker settings of Strata's table that Kafka
// updates dynamically (DynamicBrokerConfig.AllDynamicConfigs: LogCleaner,
// DynamicThreadPool, SocketServer, DynamicListenerConfig and
// DynamicProducerStateManagerConfig reconfigurables) besides the topic
// defaults (DynamicLogConfig, computed from the topic table). Strata
// refuses to change them while running (strataCannotApply).
var kafkaDynamicOther = map[string]UpdateMode{
	// LogCleaner.RECONFIGURABLE_CONFIGS
	"log.cleaner.threads": ClusterWide, "log.cleaner.dedupe.buffer.size": ClusterWide,
	"log.cleaner.io.max.bytes.per.second": ClusterWide, "log.cleaner.backoff.ms": ClusterWide,
	// DynamicThreadPool.RECONFIGURABLE_CONFIGS
	"num.replica.fetchers": ClusterWide, "num.recovery.threads.per.data.dir": ClusterWide,
	// SocketServer.RECONFIGURABLE_CONFIGS
	"max.connections": ClusterWide, "max.connections.per.ip": ClusterWide, "max.connections.per.ip.overrides": ClusterWide,
	// QuotaConfig.brokerQuotaConfigs (DynamicConfig.Broker): the
	// replication throttles, applied by every broker at once.
	"leader.replication.throttled.rate": ClusterWide, "follower.replication.throttled.rate": ClusterWide,
	// DynamicProducerStateManagerConfig
	"producer.id.expiration.ms": ClusterWide,
	// DynamicListenerConfig.ReconfigurableConfigs minus the cluster-level
	// listener configs: Kafka's PerBrokerConfigs.
	"listeners": PerBroker, "listener.security.protocol.map": PerBroker,
	"ssl.cipher.suites": PerBroker, "ssl.enabled.protocols": PerBroker, "ssl.keystore.type": PerBroker,
	"ssl.keystore.location": PerBroker, "ssl.key.password": PerBroker, "ssl.truststore.type": PerBroker,
	"ssl.truststore.location": PerBroker, "ssl.client.auth": PerBroker, "sasl.enabled.mechanisms": PerBroker,
	"ssl.keystore.certificate.chain": PerBroker, "ssl.keystore.key": PerBroker, "ssl.truststore.certificates": PerBroker,
}

// dynamicModes maps every broker setting Kafka updates dynamically to its
// update mode; applied are the ones Strata applies while running.
var dynamicModes, applied = func() (map[string]UpdateMode, map[string]bool) {
	modes := maps.Clone(kafkaDynamicOther)
	applied := map[string]bool{}
	// DynamicLogConfig.ReconfigurableConfigs: every broker setting that is
	// the default of a topic setting (ServerTopicConfigSynonyms). Strata
	// re-resolves every log's configuration when one changes.
	for _, s := range topicTable {
		for _, syn := range s.BrokerSynonyms {
			if _, ok := brokerIndex[syn]; ok {
				modes[syn] = ClusterWide
				applied[syn] = true
			}
		}
	}
	// SocketServer's connection quotas: applied to the acceptors at once
	// (protocol.Server.SetConnectionLimits).
	for _, n := range []string{"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
		// Replication throttles: applied to the replica manager's quotas
		// at every view (internal/server/cluster_replicas.go).
		"leader.replication.throttled.rate", "follower.replication.throttled.rate"} {
		applied[n] = true
	}
	return modes, applied
}()

// Mode returns how a broker setting may be changed at run time in Strata:
// ReadOnly for the settings Kafka cannot change dynamically and for those
// Strata does not apply while running.
func Mode(name string) UpdateMode {
	if _, ok := dynamicListenerSetting(name); ok {
		return ClusterWide
	}
	if !applied[name] {
		return ReadOnly
	}
	return dynamicModes[name]
}

// DynamicSettings returns the names of the broker settings Strata applies
// dynamically, sorted.
func DynamicSettings() []string {
	out := slices.Collect(maps.Keys(applied))
	sort.Strings(out)
	return out
}

// ValidateDynamic checks a set of dynamic broker configs as Kafka's
// DynamicBrokerConfig.validateConfigs does, in its order and with its
// messages (errors wrap ErrInvalid: INVALID_CONFIG on the wire): every
// name a broker setting Kafka updates dynamically ("Cannot update these
// configs dynamically"), a per-broker setting only for a broker id
// ("Cannot update these configs at default cluster level, broker id must
// be specified"), and then Strata's rule: a setting Strata cannot apply
// while running is refused rather than stored and ignored. Values are
// checked by the table's validators.
func ValidateDynamic(configs map[string]string, perBroker bool) error {
	names := slices.Sorted(maps.Keys(configs))
	var unknown, static, brokerOnly, notApplied []string
	for _, n := range names {
		_, known := brokerIndex[n]
		mode, dyn := dynamicModes[n]
		if setting, ok := dynamicListenerSetting(n); ok {
			// listener.name.<l>.max.connections: the setting's own rules.
			if l, _, _ := splitListenerSetting(n); l != strings.ToLower(l) || !validName(l) {
				return invalidf("%s: the listener name in a listener.name. prefix is written in lower case, as Kafka reads it", n)
			}
			if err := brokerIndex[setting].Validate(strings.TrimSpace(configs[n])); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			continue
		}
		if _, _, ok := splitListenerSetting(n); ok && !known {
			notApplied = append(notApplied, n)
			continue
		}
		switch {
		case !known:
			unknown = append(unknown, n)
		case !dyn:
			static = append(static, n)
		case mode == PerBroker && !perBroker:
			brokerOnly = append(brokerOnly, n)
		case !applied[n]:
			notApplied = append(notApplied, n)
		}
	}
	if len(unknown) > 0 {
		return invalidf("unknown broker configs: %s (docs/configuration.md lists every setting)", strings.Join(unknown, ", "))
	}
	if len(static) > 0 {
		return invalidf("Cannot update these configs dynamically: %s (set them in the config file, environment or flags and restart)", strings.Join(static, ", "))
	}
	if len(brokerOnly) > 0 {
		return invalidf("Cannot update these configs at default cluster level, broker id must be specified: %s", strings.Join(brokerOnly, ", "))
	}
	if len(notApplied) > 0 {
		return invalidf("Strata cannot apply these configs while running: %s (set them in the config file, environment or flags and restart; the settings Strata updates dynamically are the topic defaults: docs/configuration.md)", strings.Join(notApplied, ", "))
	}
	for _, n := range names {
		if _, ok := dynamicListenerSetting(n); ok {
			continue
		}
		if err := brokerIndex[n].Validate(strings.TrimSpace(configs[n])); err != nil {
			return err
		}
	}
	return nil
}

// Source is where a broker setting's value comes from (Kafka's
// DescribeConfigs ConfigSource values).
type Source int8

// Sources, most specific first.
const (
	SourceDynamicBroker  Source = 2 // DYNAMIC_BROKER_CONFIG
	SourceDynamicDefault Source = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG
	SourceStatic         Source = 4 // STATIC_BROKER_CONFIG
	SourceDefault        Source = 5 // DEFAULT_CONFIG
)

// Layer is one value of a setting at one level of precedence.
type Layer struct {
	Value  string
	Source Source
}

// WithDynamic returns the settings with the cluster default and this
// broker's dynamic configs laid over the static ones (b itself is not
// changed). As Kafka's DynamicBrokerConfig.overrideProps, a dynamic value
// of a setting hides the lower layers' values of its synonyms (a dynamic
// log.retention.hours wins over a static log.retention.ms). Names that are
// not dynamic in Strata are left out and returned as ignored (written by
// another version, or by hand): the caller logs them.
func (b *Broker) WithDynamic(clusterDefault, perBroker map[string]string) (nb *Broker, ignored []string, err error) {
	base := b
	if b.static != nil {
		base = b.static
	}
	nb = base.clone()
	nb.static = base
	nb.dynDefault, nb.dynBroker = map[string]string{}, map[string]string{}
	for _, layer := range []struct {
		m    map[string]string
		into map[string]string
	}{{clusterDefault, nb.dynDefault}, {perBroker, nb.dynBroker}} {
		for _, n := range slices.Sorted(maps.Keys(layer.m)) {
			v := strings.TrimSpace(layer.m[n])
			if setting, ok := dynamicListenerSetting(n); ok {
				if l, _, _ := splitListenerSetting(n); l != strings.ToLower(l) || brokerIndex[setting].Validate(v) != nil {
					ignored = append(ignored, n)
					continue
				}
				if nb.perListener == nil {
					nb.perListener = map[string]string{}
				}
				nb.perListener[n] = v
				layer.into[n] = v
				continue
			}
			if Mode(n) == ReadOnly || brokerIndex[n].Validate(v) != nil {
				ignored = append(ignored, n)
				continue
			}
			for _, syn := range synonymsOf(n) {
				nb.explicit[syn] = false
			}
			nb.values[n], nb.explicit[n] = v, true
			layer.into[n] = v
		}
	}
	if errs := nb.validate(); len(errs) > 0 {
		return nil, ignored, fmt.Errorf("dynamic broker configs: %w", errs[0])
	}
	return nb, ignored, nil
}

// synonymsOf returns the settings that set the same value as name
// (Kafka's DynamicBrokerConfig.brokerConfigSynonyms), name included.
func synonymsOf(name string) []string {
	for _, s := range topicTable {
		if slices.Contains(s.BrokerSynonyms, name) {
			return s.BrokerSynonyms
		}
	}
	return []string{name}
}

// Layers returns every value a setting has, most specific first: the
// dynamic per-broker value, the dynamic cluster default, the static value
// and the table's default (Kafka's DescribeConfigs synonyms list).
func (b *Broker) Layers(name string) []Layer {
	var out []Layer
	if v, ok := b.dynBroker[name]; ok {
		out = append(out, Layer{v, SourceDynamicBroker})
	}
	if v, ok := b.dynDefault[name]; ok {
		out = append(out, Layer{v, SourceDynamicDefault})
	}
	base := b
	if b.static != nil {
		base = b.static
	}
	if base.explicit[name] {
		out = append(out, Layer{base.values[name], SourceStatic})
	}
	if s, ok := brokerIndex[name]; ok && s.Default != "" {
		out = append(out, Layer{s.Default, SourceDefault})
	}
	return out
}

// SourceOf returns where a setting's value comes from.
func (b *Broker) SourceOf(name string) Source {
	switch {
	case hasKey(b.dynBroker, name):
		return SourceDynamicBroker
	case hasKey(b.dynDefault, name):
		return SourceDynamicDefault
	case b.explicit[name]:
		return SourceStatic
	}
	return SourceDefault
}

// Dynamic returns this broker's dynamic configs by source (copies).
func (b *Broker) Dynamic() (clusterDefault, perBroker map[string]string) {
	return maps.Clone(b.dynDefault), maps.Clone(b.dynBroker)
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// clone copies the settings (the dynamic layers are not copied).
func (b *Broker) clone() *Broker {
	return &Broker{values: maps.Clone(b.values), explicit: maps.Clone(b.explicit), ignored: maps.Clone(b.ignored),
		warnings: slices.Clone(b.warnings), perListener: maps.Clone(b.perListener), oneNode: b.oneNode}
}

// init marks the settings Strata updates dynamically as not read-only
// (DescribeConfigs' read_only, Kafka's "Update Mode").
func init() {
	for i := range brokerTable {
		if Mode(brokerTable[i].Name) != ReadOnly {
			brokerTable[i].ReadOnly = false
			brokerIndex[brokerTable[i].Name] = brokerTable[i]
		}
	}
}
