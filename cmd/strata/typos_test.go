package main

import (
	"strings"
	"testing"
)

// TestTyposFail checks that mistyped commands and flags exit 1 with one
// line and a "did you mean", at every level, and that a bare group prints
// its help.
func TestTyposFail(t *testing.T) {
	bin := buildStrata(t)
	fails(t, bin, "strata: unknown command \"lst\" for \"strata topic\": did you mean \"list\"?\n", "topic", "lst")
	fails(t, bin, "strata: unknown command \"creat\" for \"strata topic\": did you mean \"create\"?\n", "topic", "creat", "x")
	fails(t, bin, "strata: unknown command \"topc\" for \"strata\": did you mean \"topic\"?\n", "topc", "list")
	fails(t, bin, "strata: unknown command \"stats\" for \"strata compaction\": did you mean \"status\"?\n", "compaction", "stats")
	fails(t, bin, "strata: unknown command \"frobnicate\" for \"strata group\": run 'strata group --help' for the commands\n", "group", "frobnicate")
	fails(t, bin, "strata: unknown command \"st\" for \"strata user scram\": did you mean \"set\"?\n", "user", "scram", "st")
	// A missing or extra argument names the command and its usage.
	fails(t, bin, "strata: requires at least 1 arg(s), only received 0 (usage: strata topic create <topic>... [flags])\n", "topic", "create")
	fails(t, bin, "strata: accepts 1 arg(s), received 0 (usage: strata produce <topic> [flags])\n", "produce")
	fails(t, bin, "strata: unknown command \"x\" for \"strata topic list\" (usage: strata topic list [flags])\n", "topic", "list", "x")
	fails(t, bin, "strata: unknown flag: --form: did you mean --from?\n", "consume", "t", "--form", "beginning")
	fails(t, bin, "strata: unknown flag: --partition: did you mean --partitions?\n", "topic", "create", "t", "--partition", "3")
	fails(t, bin, "strata: unknown flag: --bogus\n", "topic", "list", "--bogus")
	fails(t, bin, "strata: unknown flag: --log.dir.s: did you mean --log.dirs?\n", "serve", "--log.dir.s", "/x")
	r := run(t, bin, "", "log", "verfy", "x")
	if r.code != 1 || r.stderr != "strata: unknown command \"verfy\" for \"strata log\": did you mean \"verify\"?\n" {
		t.Errorf("log verfy: %+v", r)
	}
	r = run(t, bin, "", "log", "verify", "--ouput", "json", "x")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "strata: unknown flag: --ouput: did you mean --output?\n") {
		t.Errorf("log verify --ouput: %+v", r)
	}
	if out := ok(t, bin, "", "topic"); !strings.HasPrefix(out, "Create, list, describe, alter, grow, trim and delete topics\n\nUsage:\n  strata topic [command]\n") {
		t.Errorf("bare group: %q", out)
	}
}

// TestVersion checks `strata version` and `strata --version`.
func TestVersion(t *testing.T) {
	bin := buildStrata(t)
	v := ok(t, bin, "", "version")
	if !strings.HasPrefix(v, "strata dev (") || !strings.HasSuffix(v, ")\n") || !strings.Contains(v, "go1.") || strings.Count(v, "\n") != 1 {
		t.Errorf("version: %q", v)
	}
	if out := ok(t, bin, "", "--version"); out != v {
		t.Errorf("--version %q, version %q", out, v)
	}
}
