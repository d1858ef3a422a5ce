package main

// Help output: wrapped to the terminal (at most 100 columns), and a
// grouped, typed `serve --help` with a short list of common settings
// (--help-all for every one).

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/strata-io/strata/internal/config"
	"golang.org/x/sys/unix"
)

// maxHelpWidth caps help lines even on wide terminals.
const maxHelpWidth = 100

// termWidth is the width help is wrapped to: the terminal's (stdout),
// else $COLUMNS, else 80; at most maxHelpWidth, at least 40.
func termWidth() int {
	w := 80
	if ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		w = int(ws.Col)
	} else if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		w = n
	}
	return min(max(w, 40), maxHelpWidth)
}

// installHelp makes every command's help and usage wrap to width columns
// (cobra's templates do not wrap): descriptions, the command list and the
// flags.
func installHelp(root *cobra.Command, width int) {
	root.SetUsageFunc(func(c *cobra.Command) error {
		return writeUsage(c.OutOrStderr(), c, width)
	})
	root.SetHelpFunc(func(c *cobra.Command, _ []string) {
		text := c.Long
		if text == "" {
			text = c.Short
		}
		w := c.OutOrStdout()
		if text != "" {
			fmt.Fprintln(w, wrap(strings.TrimSpace(text), width, ""))
			fmt.Fprintln(w)
		}
		_ = writeUsage(w, c, width)
	})
}

// writeUsage is cobra's default usage text, wrapped to width columns.
func writeUsage(w io.Writer, c *cobra.Command, width int) error {
	var sb strings.Builder
	sb.WriteString("Usage:")
	if c.Runnable() && !c.HasAvailableSubCommands() { // groups run only to refuse typos
		sb.WriteString("\n" + wrap("  "+c.UseLine(), width, "    "))
	}
	if c.HasAvailableSubCommands() {
		sb.WriteString("\n  " + c.CommandPath() + " [command]")
	}
	if c.HasExample() {
		sb.WriteString("\n\nExamples:\n" + c.Example)
	}
	if c.HasAvailableSubCommands() {
		sb.WriteString("\n\nAvailable Commands:")
		pad := 0
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				pad = max(pad, len(sub.Name()))
			}
		}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				sb.WriteString("\n" + hanging(fmt.Sprintf("  %-*s  ", pad, sub.Name()), sub.Short, width))
			}
		}
	}
	if c.HasAvailableLocalFlags() {
		sb.WriteString("\n\nFlags:\n" + strings.TrimRight(c.LocalFlags().FlagUsagesWrapped(width), " \n"))
	}
	if c.HasAvailableInheritedFlags() {
		sb.WriteString("\n\nGlobal Flags:\n" + strings.TrimRight(c.InheritedFlags().FlagUsagesWrapped(width), " \n"))
	}
	if c.HasAvailableSubCommands() {
		sb.WriteString("\n\n" + wrap(fmt.Sprintf("Use \"%s [command] --help\" for more information about a command.", c.CommandPath()), width, ""))
	}
	sb.WriteString("\n")
	_, err := io.WriteString(w, sb.String())
	return err
}

// settingGroups orders the sections of `serve --help`; a setting goes to
// the first group with a matching name or prefix ("Other" otherwise).
var settingGroups = []struct {
	title string
	match []string
}{
	{"Node and listeners", []string{"node.id", "broker.id", "listeners", "advertised.listeners", "listener.security.protocol.map",
		"inter.broker.listener.name", "security.inter.broker.protocol", "socket.", "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
		"connections.max.idle.ms", "queued.max.request.bytes"}},
	{"Authorization and quotas", []string{"authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
		"ssl.principal.mapping.rules", "quota.", "controller.quota."}},
	{"Cluster (KRaft)", []string{"process.roles", "controller.", "broker.rack", "broker.session.timeout.ms", "broker.heartbeat.interval.ms",
		"metadata.log.dir"}},
	{"Security (TLS and SASL)", []string{"ssl.", "sasl.", "listener.name.", "connections.max.reauth.ms"}},
	{"Storage", []string{"log.dirs", "log.dir", "num.recovery.threads.per.data.dir", "strata.durable.acks", "log.flush.", "log.segment.bytes",
		"log.roll.", "strata.idle.roll.", "log.index.", "log.preallocate", "log.message.", "message.max.bytes", "compression.type"}},
	{"Retention", []string{"log.retention.", "log.cleanup.policy", "log.segment.delete.delay.ms"}},
	{"Compaction", []string{"log.cleaner."}},
	{"Topics", []string{"auto.create.topics.enable", "num.partitions", "default.replication.factor", "delete.topic.enable", "min.insync.replicas", "unclean.leader.election.enable"}},
	{"Replication", []string{"num.replica.fetchers", "replica.", "auto.leader.rebalance.enable", "leader.imbalance.",
		"leader.replication.throttled.rate", "follower.replication.throttled.rate", "replication.quota."}},
	{"Consumer groups", []string{"group.", "offsets."}},
	{"Transactions and producers", []string{"transaction", "producer."}},
	{"Operations", []string{"strata."}},
}

// commonSettings are shown by `serve --help`; --help-all shows all.
var commonSettings = map[string]bool{
	"node.id": true, "listeners": true, "advertised.listeners": true, "log.dirs": true, "strata.durable.acks": true,
	"log.retention.hours": true, "log.retention.bytes": true, "log.segment.bytes": true, "log.cleanup.policy": true,
	"auto.create.topics.enable": true, "num.partitions": true, "ssl.keystore.location": true, "sasl.enabled.mechanisms": true,
	"strata.metrics.listener": true, "strata.log.level": true, "strata.log.format": true,
	"authorizer.class.name": true,
}

// settingGroup returns the section title of a broker setting.
func settingGroup(name string) string {
	for _, g := range settingGroups {
		for _, m := range g.match {
			if name == m || (strings.HasSuffix(m, ".") && strings.HasPrefix(name, m)) || (m == "transaction" && strings.HasPrefix(name, m)) {
				return g.title
			}
		}
	}
	return "Other"
}

// helpDefault shows a setting's default: "unlimited" for Kafka's
// Long.MAX_VALUE and Double.MAX_VALUE sentinels, "none" when unset, and
// what to do for a default Strata refuses.
func helpDefault(s config.Setting) string {
	switch {
	case s.Name == "sasl.enabled.mechanisms":
		return "none; Kafka's GSSAPI is not supported"
	case s.Name == "sasl.mechanism.inter.broker.protocol":
		return "none: no inter-broker credentials; Kafka's GSSAPI is not supported"
	case s.Default == "":
		return ""
	case s.Default == "9223372036854775807" || s.Default == "1.7976931348623157E308":
		return "unlimited"
	}
	return strings.ReplaceAll(s.Default, ",", ", ") // long lists wrap at their items
}

// writeServeHelp renders `strata serve --help` (all: --help-all).
func writeServeHelp(w io.Writer, cmd *cobra.Command, all bool) error {
	width := termWidth()
	var sb strings.Builder
	sb.WriteString("Usage:\n  strata serve [flags]\n\n")
	sb.WriteString(wrap(cmd.Long, width, "") + "\n\n")
	sb.WriteString("Command options:\n")
	for _, name := range []string{"config", "override", "shutdown-timeout", "help-all"} {
		f := cmd.Flags().Lookup(name)
		writeFlag(&sb, width, "--"+f.Name+" "+flagKind(f), f.DefValue, f.Usage, "")
	}
	settings := config.BrokerSettings()
	if all {
		sb.WriteString("\n" + wrap(fmt.Sprintf("All %d settings (docs/configuration.md also lists the Kafka settings Strata accepts without effect or refuses):", len(settings)), width, "") + "\n")
	} else {
		fmt.Fprintf(&sb, "\nCommon settings (strata serve --help-all lists all %d):\n", len(settings))
	}
	var groups []string
	for _, g := range settingGroups {
		groups = append(groups, g.title)
	}
	for _, g := range append(groups, "Other") {
		var rows []config.Setting
		for _, s := range settings {
			if settingGroup(s.Name) == g && (all || commonSettings[s.Name]) {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "\n%s:\n", g)
		for _, s := range rows {
			extra := ""
			if all {
				if s.Allowed != "" {
					extra = "Valid: " + s.Allowed + ". "
				}
				extra += "Env " + config.EnvName(s.Name) + "."
			}
			writeFlag(&sb, width, "--"+s.Name+" "+s.Type.String(), helpDefault(s), s.Doc, extra)
		}
	}
	if !all {
		sb.WriteString("\n" + wrap("Each setting can also be set with STRATA_<NAME> (log.dirs -> STRATA_LOG_DIRS; strata.durable.acks -> STRATA_DURABLE_ACKS).", width, "") + "\n")
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// flagKind names a command option's value type ("" for booleans).
func flagKind(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "bool":
		return ""
	case "duration":
		return "duration"
	case "stringArray":
		return "name=value"
	}
	if f.Name == "config" {
		return "file"
	}
	return f.Value.Type()
}

// writeFlag writes "  --name type   (default d)" and the wrapped
// description indented below it.
func writeFlag(sb *strings.Builder, width int, head, dflt, doc, extra string) {
	head = strings.TrimSpace(head)
	line := "  " + head
	if dflt != "" && dflt != "false" && dflt != "[]" {
		line += " (default " + dflt + ")"
	}
	sb.WriteString(wrap(line, width, "      ") + "\n")
	text := doc
	if extra != "" {
		text += " " + extra
	}
	sb.WriteString(wrap("      "+text, width, "      ") + "\n")
}

// hanging writes prefix then text wrapped to width, continuation lines
// indented under the text's start.
func hanging(prefix, text string, width int) string {
	indent := strings.Repeat(" ", len(prefix))
	return prefix + strings.TrimLeft(wrap(indent+text, width, indent), " ")
}

// wrap breaks s into lines of at most width columns at spaces, indenting
// continuation lines with indent. A word longer than a line stays whole.
func wrap(s string, width int, indent string) string {
	var out strings.Builder
	for pi, para := range strings.Split(s, "\n") {
		if pi > 0 {
			out.WriteByte('\n')
		}
		lead := para[:len(para)-len(strings.TrimLeft(para, " "))]
		words := strings.Fields(para)
		line := lead
		first := true
		for _, w := range words {
			switch {
			case first:
				line += w
				first = false
			case len(line)+1+len(w) > width:
				out.WriteString(line + "\n")
				line = indent + w
			default:
				line += " " + w
			}
		}
		out.WriteString(line)
	}
	return out.String()
}
