package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// helpOf runs `strata <path> <flag>` in process and returns its output.
func helpOf(t *testing.T, path []string, flag string) string {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(append([]string(nil), path...), flag))
	if err := root.Execute(); err != nil {
		t.Fatalf("strata %s %s: %v", strings.Join(path, " "), flag, err)
	}
	return out.String()
}

// commandPaths lists every command of the tree as its argument path.
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	out := [][]string{prefix}
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			out = append(out, commandPaths(sub, append(append([]string(nil), prefix...), sub.Name()))...)
		}
	}
	return out
}

// TestHelpFitsColumns checks that the help of every command fits 100
// columns on any terminal, and the default 80 when $COLUMNS says nothing
// wider, serve --help-all included.
func TestHelpFitsColumns(t *testing.T) {
	for _, c := range []struct {
		columns string
		limit   int
	}{{"", 80}, {"200", 100}} {
		t.Setenv("COLUMNS", c.columns)
		for _, path := range commandPaths(newRootCmd(), nil) {
			flags := []string{"--help"}
			if len(path) == 1 && path[0] == "serve" {
				flags = append(flags, "--help-all")
			}
			for _, flag := range flags {
				out := helpOf(t, path, flag)
				for i, line := range strings.Split(out, "\n") {
					if len(line) > c.limit {
						t.Errorf("COLUMNS=%q strata %s %s: line %d has %d columns (limit %d):\n%s", c.columns, strings.Join(path, " "), flag, i+1, len(line), c.limit, line)
					}
				}
			}
		}
	}
}

// TestServeHelp checks the shape of `serve --help`: short, grouped, typed,
// no sentinel defaults, no unsupported default offered.
func TestServeHelp(t *testing.T) {
	t.Setenv("COLUMNS", "")
	short := helpOf(t, []string{"serve"}, "--help")
	all := helpOf(t, []string{"serve"}, "--help-all")
	if n := strings.Count(short, "\n"); n > 100 {
		t.Errorf("serve --help has %d lines", n)
	}
	for _, want := range []string{
		"Common settings (strata serve --help-all lists all ", "Node and listeners:\n  --advertised.listeners string\n",
		"  --listeners string (default PLAINTEXT://127.0.0.1:9092)\n", "  --log.dirs string (default ./strata-data)\n",
		"  --strata.durable.acks boolean (default true)\n", "  --log.retention.hours int (default 168)\n",
		"  --sasl.enabled.mechanisms list (default none; Kafka's GSSAPI is not supported)\n",
	} {
		if !strings.Contains(short, want) {
			t.Errorf("serve --help lacks %q:\n%s", want, short)
		}
	}
	for _, want := range []string{
		"Compaction:\n", "Consumer groups:\n", "Transactions and producers:\n", "Security (TLS and SASL):\n", "Retention:\n",
		"  --log.flush.interval.messages long (default unlimited)\n", "  --log.cleaner.io.max.bytes.per.second double (default unlimited)\n",
		"  --log.cleaner.min.cleanable.ratio double (default 0.5)\n", "Env STRATA_DURABLE_ACKS.",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("serve --help-all lacks %q", want)
		}
	}
	for _, bad := range []string{"9223372036854775807", "1.7976931348623157E308", "(default GSSAPI)"} {
		if strings.Contains(all, bad) {
			t.Errorf("serve --help-all shows %q", bad)
		}
	}
	if i := strings.Index(all, "\nOther:\n"); i >= 0 {
		t.Errorf("settings without a group in serve --help (add a rule to settingGroups in help.go):\n%s", all[i:])
	}
}
