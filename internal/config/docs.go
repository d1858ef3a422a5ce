package config

import (
	"fmt"
	"sort"
	"strings"
)

// Markdown renders docs/configuration.md from the two tables. A test in
// this package fails when the committed file differs; regenerate it with
// `STRATA_UPDATE_DOCS=1 go test ./internal/config`.
func Markdown() string {
	var sb strings.Builder
	sb.WriteString("# Configuration\n\n")
	sb.WriteString("<!-- Generated from internal/config by `STRATA_UPDATE_DOCS=1 go test ./internal/config`. Do not edit by hand. -->\n\n")
	sb.WriteString("Strata uses Kafka's configuration names and defaults. Every setting listed here is honoured; ")
	sb.WriteString("any other name is rejected (topic settings with INVALID_CONFIG, broker settings at startup).\n\n")
	writeComingFromKafka(&sb)
	sb.WriteString("## Broker settings\n\n")
	sb.WriteString("`strata serve` reads them from, in rising precedence:\n\n")
	sb.WriteString("1. a server.properties file given with `--config` (`key=value` or `key: value`, `#` and `!` comments),\n")
	sb.WriteString("2. environment variables: `STRATA_` + the name upper-cased with dots as underscores (`log.dirs` -> `STRATA_LOG_DIRS`); ")
	sb.WriteString("Strata's own `strata.` settings drop that prefix (`strata.durable.acks` -> `STRATA_DURABLE_ACKS`; the old `STRATA_STRATA_DURABLE_ACKS` ")
	sb.WriteString("spelling still works and logs a deprecation warning),\n")
	sb.WriteString("3. command-line flags named like the setting (`--log.dirs /var/lib/strata`).\n\n")
	sb.WriteString("The whole configuration is checked before anything starts, and every problem is reported at once, each with ")
	sb.WriteString("where it was set (file and line, environment variable or flag) and what to do. ")
	sb.WriteString("A `STRATA_` environment variable that names no setting is reported as a warning at startup ")
	fmt.Fprintf(&sb, "(except the client commands' %s).\n\n", strings.Join(backticked(ClientEnv[:4]), ", "))
	sb.WriteString("An empty default means unset (null). Broker settings are read-only at run time except the topic defaults and the connection limits, ")
	sb.WriteString("which a cluster updates dynamically (docs/cluster.md \"Dynamic broker configs\"; `kafka-configs --alter --entity-type brokers`, ")
	sb.WriteString("IncrementalAlterConfigs/AlterConfigs on BROKER resources: a node id, or the cluster default): ")
	sb.WriteString(strings.Join(backticked(DynamicSettings()), ", "))
	sb.WriteString(", `listener.name.<listener>.max.connections`. Kafka's other dynamic settings are refused with INVALID_CONFIG.\n\n")
	sb.WriteString("| Name | Type | Default | Valid values | Environment | Description |\n")
	sb.WriteString("|---|---|---|---|---|---|\n")
	for _, s := range brokerTable {
		fmt.Fprintf(&sb, "| `%s` | %s | %s | %s | `%s` | %s |\n",
			s.Name, s.Type, code(s.Default), cell(s.Allowed), EnvName(s.Name), cell(s.Doc))
	}
	sb.WriteString("\n## Topic settings\n\n")
	sb.WriteString("Set per topic at creation (`strata topic create t --config k=v`, CreateTopics) or later ")
	sb.WriteString("(`strata topic alter`, IncrementalAlterConfigs/AlterConfigs). A topic without an override takes ")
	sb.WriteString("the broker setting in the \"Broker default\" column (the first one set, in order; minutes and hours ")
	sb.WriteString("are converted to milliseconds), else the default shown. ")
	sb.WriteString("`min.compaction.lag.ms` must not exceed `max.compaction.lag.ms`.\n\n")
	sb.WriteString("Kafka topic settings Strata cannot honour are rejected with INVALID_CONFIG and the reason:\n\n")
	sb.WriteString("| Kafka topic setting | Why it is refused |\n|---|---|\n")
	unsupported := make([]string, 0, len(unsupportedTopic))
	for n := range unsupportedTopic {
		unsupported = append(unsupported, n)
	}
	sort.Strings(unsupported)
	for _, n := range unsupported {
		fmt.Fprintf(&sb, "| `%s` | %s. |\n", n, unsupportedTopic[n])
	}
	sb.WriteString("\nAny other name is refused as unknown, with the closest setting's name when it looks like a typo.\n\n")
	sb.WriteString("| Name | Type | Default | Valid values | Broker default | Description |\n")
	sb.WriteString("|---|---|---|---|---|---|\n")
	for _, s := range topicTable {
		syn := make([]string, len(s.BrokerSynonyms))
		for i, n := range s.BrokerSynonyms {
			syn[i] = "`" + n + "`"
		}
		fmt.Fprintf(&sb, "| `%s` | %s | %s | %s | %s | %s |\n",
			s.Name, s.Type, code(s.Default), cell(s.Allowed), strings.Join(syn, ", "), cell(s.Doc))
	}
	return sb.String()
}

// writeComingFromKafka renders the "Coming from Kafka" section from the
// tables: defaults that differ, settings accepted without effect and
// settings refused with a hint.
func writeComingFromKafka(sb *strings.Builder) {
	sb.WriteString("## Coming from Kafka\n\n")
	sb.WriteString("Strata takes Kafka's setting names, types, defaults and ")
	sb.WriteString("validation, so most of a Kafka `server.properties` works as it is. Where Strata differs:\n\n")
	sb.WriteString("| Kafka setting | In Strata |\n|---|---|\n")
	type row struct{ name, text string }
	var rows []row
	for name, note := range kafkaNotes {
		rows = append(rows, row{"`" + name + "`", note})
	}
	for _, s := range ignoredTable {
		rows = append(rows, row{"`" + s.Name + "`", "Accepted (checked as Kafka does: " + cell(s.Allowed) + ") without effect, with a warning at startup: " + s.why + "."})
	}
	for name, hint := range unsupportedHints {
		rows = append(rows, row{"`" + name + "`", "Refused: " + name + " " + hint + "."})
	}
	for _, p := range unsupportedPrefixes {
		rows = append(rows, row{"`" + p.prefix + "*`", "Refused: the setting " + p.hint + "."})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	for _, r := range rows {
		fmt.Fprintf(sb, "| %s | %s |\n", r.name, strings.ReplaceAll(r.text, "|", `\|`))
	}
	sb.WriteString("\nEvery other broker setting in the table below behaves as in Kafka. Kafka's `KAFKA_LOG_DIRS`-style ")
	sb.WriteString("variables of its container images are `STRATA_LOG_DIRS` here.\n\n")
}

// backticked wraps each string in backquotes.
func backticked(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + s + "`"
	}
	return out
}

func code(s string) string {
	if s == "" {
		return "(unset)"
	}
	return "`" + s + "`"
}

func cell(s string) string {
	if s == "" {
		return "any"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
