package config

import (
	"sort"
	"strings"
)

// Kafka broker settings that are not rows of the broker table. A Kafka
// server.properties names many of them; Strata treats each one in one of
// two ways, so that a whole file is checked in one run and every problem
// says what to do:
//
//   - ignoredTable: accepted and type-checked like Kafka does, but without
//     effect because Strata's design has nothing for them to tune (thread
//     pools). They are not echoed by DescribeConfigs, and the broker logs one
//     warning line per reason naming the ones that were set.
//   - unsupportedHints (and unsupportedPrefixes): refused, with a hint that
//     says why and what to do instead.
//
// To start honouring one of these settings, add it to the broker table and
// delete its entry here (TestKafkaTablesDisjoint keeps them apart).

// ignored is a Kafka setting Strata accepts without effect, and why.
type ignored struct {
	Setting
	why string
}

// Reasons shared by several ignored settings (one warning line each).
const (
	whyThreadPool = "Kafka thread-pool settings with no meaning in Strata: each connection is served by its own goroutines and background work runs on its own loops, so there is no pool to size"
	whyShareGroup = "share-group settings (KIP-932) with no effect: Strata serves no share groups, so it keeps no share-group state topic"
)

// ignoredTable lists the Kafka settings accepted without effect (Kafka's
// types, defaults and validators, from SocketServerConfigs, ServerConfigs
// and ShareCoordinatorConfig).
var ignoredTable = func() []ignored {
	t := []ignored{
		{def("num.network.threads", TypeInt, "3", atLeast(1), "Kafka: threads receiving requests and sending responses."), whyThreadPool},
		{def("num.io.threads", TypeInt, "8", atLeast(1), "Kafka: threads processing requests."), whyThreadPool},
		{def("background.threads", TypeInt, "10", atLeast(1), "Kafka: threads for background tasks."), whyThreadPool},
		{def("share.coordinator.state.topic.replication.factor", TypeShort, "3", atLeast(1), "Kafka: replication factor of the share-group state topic."), whyShareGroup},
		{def("share.coordinator.state.topic.min.isr", TypeShort, "2", atLeast(1), "Kafka: min.insync.replicas of the share-group state topic."), whyShareGroup},
	}
	sort.Slice(t, func(i, j int) bool { return t[i].Name < t[j].Name })
	return t
}()

var ignoredIndex = func() map[string]ignored {
	m := make(map[string]ignored, len(ignoredTable))
	for _, s := range ignoredTable {
		m[s.Name] = s
	}
	return m
}()

// unsupportedHints explain the Kafka settings Strata refuses: why, and what
// to do instead.
var unsupportedHints = map[string]string{
	// KRaft and replication settings the cluster work has not taken yet.
	"controller.quorum.bootstrap.servers": "is not supported (KIP-853 dynamic quorums): list the controllers in controller.quorum.voters (id@host:port,...) instead",
	"control.plane.listener.name":         "is not supported: Strata has no separate control-plane listener (controllers talk on controller.listener.names); remove it",
	// Connection-creation rate limits (KIP-612): refused rather than
	// accepted without effect; the connection-count limits are honoured.
	"max.connection.creation.rate": "is not supported: Strata does not throttle the rate of new connections (Kafka's KIP-612 acceptor delay, broker-wide or per listener with listener.name.<listener>.max.connection.creation.rate; per-IP connection_creation_rate quotas are refused by AlterClientQuotas too); remove it, and bound connections with max.connections, max.connections.per.ip and listener.name.<listener>.max.connections",
	// Security.
	"sasl.jaas.config":            "is a client setting in Kafka and not read by brokers: put broker PLAIN users (and the broker's own inter-broker credentials) in listener.name.<listener>.<mechanism>.sasl.jaas.config, e.g. listener.name.sasl_plaintext.plain.sasl.jaas.config",
	"client.quota.callback.class": "is not supported: Strata applies Kafka's default quota rules (ClientQuotaCallback is a Java plug-in); remove it",
	// Features Strata does not have.
	"log.message.format.version":       "is not supported: Strata writes record batch v2 only (Kafka 3.0 and later ignore this setting); remove it",
	"remote.log.storage.system.enable": "is not supported: Strata has no tiered storage (KIP-405); remove it",
	"metric.reporters":                 "is not supported: Strata exports Prometheus metrics at /metrics on strata.metrics.listener; remove it",
	"kafka.metrics.reporters":          "is not supported: Strata exports Prometheus metrics at /metrics on strata.metrics.listener; remove it",
}

// kafkaNotes explain the broker settings Strata honours differently from
// Kafka, for the "Coming from Kafka" table of docs/configuration.md.
var kafkaNotes = map[string]string{
	"node.id":                          "Defaults to 1 (Kafka has no default), so a single node starts with no configuration. `broker.id` is an alias.",
	"listeners":                        "Defaults to `PLAINTEXT://127.0.0.1:9092` (Kafka: all interfaces). Several named listeners, each with its security protocol from listener.security.protocol.map and its own listener.name.<name>.* settings.",
	"log.dirs":                         "Defaults to `./strata-data` (Kafka: `/tmp/kafka-logs`).",
	"offsets.topic.replication.factor": "Kafka's default 3; capped with a log line by the brokers registered when the topic is created (Kafka refuses to create it instead); a single node keeps one replica.",
	"transaction.state.log.replication.factor": "As offsets.topic.replication.factor.",
	"transaction.state.log.min.isr":            "Kafka's default 2, capped by the topic's replication factor.",
	"log.flush.interval.messages":              "Honoured, but rarely needed: with `strata.durable.acks=true` (the default) an acks=all produce is answered only once its data is fsynced.",
	"sasl.enabled.mechanisms":                  "PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; Kafka's default GSSAPI (Kerberos) is refused, so a SASL listener must set it.",
	"ssl.keystore.type":                        "PEM only (KIP-651); convert JKS and PKCS12 stores to PEM.",
	"socket.send.buffer.bytes":                 "Honoured on the Kafka listener's connections (SO_SNDBUF), Kafka's default 102400; -1 keeps the OS default.",
	"socket.receive.buffer.bytes":              "Honoured on the Kafka listener's connections (SO_RCVBUF), Kafka's default 102400; -1 keeps the OS default.",
}

// unsupportedPrefixes are hints for whole families of settings.
var unsupportedPrefixes = []struct{ prefix, hint string }{
	{"zookeeper.", "is a ZooKeeper setting: Strata needs no ZooKeeper (like Kafka in KRaft mode, and Kafka 4.0 removed ZooKeeper mode); remove it"},
	{"confluent.", "is a Confluent Platform setting: Strata takes Apache Kafka's settings; remove it"},
}

// unsupportedHint returns the hint for a refused Kafka setting ("" when the
// name is not one).
func unsupportedHint(name string) string {
	if h, ok := unsupportedHints[name]; ok {
		return h
	}
	for _, p := range unsupportedPrefixes {
		if strings.HasPrefix(name, p.prefix) {
			return p.hint
		}
	}
	return ""
}

// IgnoredSettings returns, sorted by name, the Kafka settings Strata
// accepts without effect (with Doc describing what they do in Kafka).
func IgnoredSettings() []Setting {
	out := make([]Setting, len(ignoredTable))
	for i, s := range ignoredTable {
		out[i] = s.Setting
	}
	return out
}

// acceptedNames lists every setting name a configuration may use (the
// broker table and the ignored Kafka settings), sorted, for "did you mean"
// suggestions.
func acceptedNames() []string {
	out := make([]string, 0, len(brokerTable)+len(ignoredTable))
	for _, s := range brokerTable {
		out = append(out, s.Name)
	}
	for _, s := range ignoredTable {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}
