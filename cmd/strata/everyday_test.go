package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestClusterInfo checks `strata cluster info` against a Strata broker.
func TestClusterInfo(t *testing.T) {
	bin := buildStrata(t)
	addr := startStrata(t, nil)
	out := ok(t, bin, "", "cluster", "info", "--brokers", addr)
	lines := strings.Split(out, "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "Cluster ID: ") || lines[1] != "Controller: 1" || lines[2] != "" ||
		lines[3] != "BROKER          ADDRESS"+strings.Repeat(" ", len(addr)-5)+"RACK" || lines[4] != "1 (controller)  "+addr+"  -" {
		t.Errorf("cluster info:\n%s", out)
	}
	var info clusterInfo
	if err := json.Unmarshal([]byte(ok(t, bin, "", "cluster", "info", "-o", "json", "--brokers", addr)), &info); err != nil ||
		info.Controller != 1 || len(info.Brokers) != 1 || info.Brokers[0].ID != 1 || info.ClusterID == "" {
		t.Errorf("cluster info json: %+v %v", info, err)
	}
}

// TestTopicAddPartitionsAndTrim checks add-partitions (--to and --add)
// and trim (DeleteRecords) by offset, age and end.
func TestTopicAddPartitionsAndTrim(t *testing.T) {
	bin := buildStrata(t)
	b := "--brokers=" + startStrata(t, nil)
	ok(t, bin, "", "topic", "create", "grow", "--partitions", "2", b)
	r := run(t, bin, "", "topic", "add-partitions", "grow", "--to", "5", b)
	if r.code != 0 || r.stdout != "topic \"grow\": 2 -> 5 partitions\n" || !strings.HasPrefix(r.stderr, "note: keyed records") {
		t.Errorf("--to 5: %+v", r)
	}
	if out := ok(t, bin, "", "topic", "add-partitions", "grow", "--add", "1", b); out != "topic \"grow\": 5 -> 6 partitions\n" {
		t.Errorf("--add 1: %q", out)
	}
	fails(t, bin, "strata: topic \"grow\" already has 6 partitions: --to must be larger (partitions cannot be removed)\n", "topic", "add-partitions", "grow", "--to", "3", b)
	fails(t, bin, "strata: add-partitions needs either --to N (the new total) or --add N (how many to add)\n", "topic", "add-partitions", "grow", b)
	fails(t, bin, "strata: unknown topic \"nope\"\n", "topic", "add-partitions", "nope", "--add", "1", b)
	if out := ok(t, bin, "", "topic", "list", b); !strings.Contains(out, "grow   6") {
		t.Errorf("list after growing:\n%s", out)
	}

	ok(t, bin, "a\nb\nc\nd\ne\n", "produce", "logs", "--partition", "0", b)
	out := ok(t, bin, "", "topic", "trim", "logs", "--before", "2", b)
	if out != "PARTITION  START-BEFORE  START-AFTER  DELETED\n0          0             2            2\n" {
		t.Errorf("trim --before 2:\n%s", out)
	}
	if out := ok(t, bin, "", "consume", "logs", "-e", b); out != "c\nd\ne\n" {
		t.Errorf("after trim: %q", out)
	}
	if out := ok(t, bin, "", "topic", "trim", "logs", "--before", "-1d", b); out != "PARTITION  START-BEFORE  START-AFTER  DELETED\n0          2             2            0\n" {
		t.Errorf("trim --before -1d (nothing that old):\n%s", out)
	}
	if out := ok(t, bin, "", "topic", "trim", "logs", "--before", "end", b); out != "PARTITION  START-BEFORE  START-AFTER  DELETED\n0          2             5            3\n" {
		t.Errorf("trim --before end:\n%s", out)
	}
	if out := ok(t, bin, "", "consume", "logs", "-e", b); out != "" {
		t.Errorf("after trimming everything: %q", out)
	}
	fails(t, bin, "strata: trim needs --before: an offset, a time, an age (-7d) or end\n", "topic", "trim", "logs", b)
	fails(t, bin, "strata: invalid --before \"soon\": use an offset (42), a time (2026-12-01T10:00:00Z, timestamp:<unix ms>), an age (-7d) or end\n", "topic", "trim", "logs", "--before", "soon", b)
}

// TestBrokerConfig checks `strata broker config get|set` through
// DescribeConfigs and IncrementalAlterConfigs on the broker resource.
func TestBrokerConfig(t *testing.T) {
	bin := buildStrata(t)
	b := "--brokers=" + startStrata(t, map[string]string{"log.retention.hours": "24"})
	out := ok(t, bin, "", "broker", "config", "get", "log.retention.hours", "num.partitions", b)
	if out != "NAME                 VALUE  SOURCE\nlog.retention.hours  24     broker\nnum.partitions       1      default\n" {
		t.Errorf("get:\n%s", out)
	}
	out = ok(t, bin, "", "broker", "config", "get", b)
	if !strings.Contains(out, "\nlog.retention.hours ") || strings.Contains(out, "\nnum.partitions ") {
		t.Errorf("get (set ones only):\n%s", out)
	}
	if out := ok(t, bin, "", "broker", "config", "get", "--all", b); !strings.Contains(out, "\nnum.partitions ") {
		t.Errorf("get --all lacks num.partitions")
	}
	fails(t, bin, "strata: broker 1 has no setting \"no.such\"\n", "broker", "config", "get", "no.such", b)
	// log.dirs is not dynamic (Kafka's DynamicBrokerConfig): the broker
	// refuses, and the CLI says why, with Kafka's error code.
	fails(t, bin, "strata: alter configs of broker \"1\": Cannot update these configs dynamically: log.dirs (set them in the config file, environment or flags and restart) (INVALID_CONFIG)\n",
		"broker", "config", "set", "log.dirs=/x", b)
	// A node without the metadata store keeps no dynamic configs.
	fails(t, bin, "strata: alter configs of broker \"1\": dynamic broker configs live in the cluster metadata store, and this node runs without one: set broker settings in the config file, environment or flags (INVALID_CONFIG)\n",
		"broker", "config", "set", "log.retention.hours=48", b)
	fails(t, bin, "strata: nothing to set: give name=value arguments or --delete name\n", "broker", "config", "set", b)
}

// TestGroupResetOffsets checks the kafka-consumer-groups habits: a dry run
// by default, --execute, --shift-by, --by-duration, --all-topics, current.
func TestGroupResetOffsets(t *testing.T) {
	bin := buildStrata(t)
	b := "--brokers=" + startStrata(t, nil)
	ok(t, bin, "", "topic", "create", "a", "--partitions", "2", b)
	ok(t, bin, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", "produce", "a", "--partition", "0", b)
	ok(t, bin, "x\ny\n", "produce", "b", b)
	ok(t, bin, "", "consume", "a", "b", "-g", "g", "-e", b) // commits a/0=10, b/0=2 (a/1 is empty)

	r := run(t, bin, "", "group", "reset-offsets", "g", "--topic", "a:0", "--shift-by", "-3", b)
	if r.code != 0 || r.stdout != "TOPIC  PARTITION  CURRENT  NEW\na      0          10       7\n" || r.stderr != "dry run: nothing committed; add --execute to commit these offsets\n" {
		t.Errorf("dry run: %+v", r)
	}
	if out := ok(t, bin, "", "group", "describe", "g", b); !strings.Contains(out, "Total lag: 0") {
		t.Errorf("the dry run committed:\n%s", out)
	}
	r = run(t, bin, "", "group", "reset-offsets", "g", "--topic", "a:0", "--shift-by", "-3", "--execute", b)
	if r.code != 0 || r.stdout != "TOPIC  PARTITION  CURRENT  NEW\na      0          10       7\n" || r.stderr != "committed the new offsets of group \"g\"\n" {
		t.Errorf("--execute: %+v", r)
	}
	if out := ok(t, bin, "", "group", "describe", "g", b); !strings.Contains(out, "Total lag: 3") {
		t.Errorf("after --shift-by -3:\n%s", out)
	}
	// Shifts stay within the log; a partition without a commit cannot shift.
	if out := ok(t, bin, "", "group", "reset-offsets", "g", "--topic", "a:0", "--shift-by", "100", b); out != "TOPIC  PARTITION  CURRENT  NEW\na      0          7        10\n" {
		t.Errorf("--shift-by 100:\n%s", out)
	}
	fails(t, bin, "strata: cannot move partition a-1 of group \"g\" from its committed offset: it has none\n", "group", "reset-offsets", "g", "--topic", "a", "--shift-by", "1", b)
	// Every topic the group committed, to the first record of the last hour.
	out := ok(t, bin, "", "group", "reset-offsets", "g", "--all-topics", "--by-duration", "PT1H", b)
	if out != "TOPIC  PARTITION  CURRENT  NEW\na      0          7        0\nb      0          2        0\n" {
		t.Errorf("--all-topics --by-duration PT1H:\n%s", out)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if out := ok(t, bin, "", "group", "reset-offsets", "g", "--all-topics", "--to", future, b); out != "TOPIC  PARTITION  CURRENT  NEW\na      0          7        10\nb      0          2        2\n" {
		t.Errorf("--to a future time:\n%s", out)
	}
	if out := ok(t, bin, "", "group", "reset-offsets", "g", "--topic", "b", "--to", "current", b); out != "TOPIC  PARTITION  CURRENT  NEW\nb      0          2        2\n" {
		t.Errorf("--to current:\n%s", out)
	}
	if out := ok(t, bin, "", "group", "reset-offsets", "g", "--topic", "a", "--by-duration", "1m", "-o", "json", b); !strings.HasPrefix(out, "[\n  {\n    \"topic\": \"a\",\n    \"partition\": 0,\n    \"current\": 7,\n    \"new\": 0\n  },") {
		t.Errorf("json:\n%s", out)
	}
	fails(t, bin, "strata: reset-offsets needs one of --to, --shift-by or --by-duration\n", "group", "reset-offsets", "g", "--topic", "a", "--to", "earliest", "--shift-by", "1", b)
	fails(t, bin, "strata: use --topic or --all-topics, not both\n", "group", "reset-offsets", "g", "--topic", "a", "--all-topics", "--to", "earliest", b)
	fails(t, bin, "strata: invalid --by-duration \"soon\": use a duration such as 30m, 2h, 1d or ISO-8601 PT30M, P1D\n", "group", "reset-offsets", "g", "--topic", "a", "--by-duration", "soon", b)
	fails(t, bin, "strata: group \"nobody\" has no committed offsets: name the topics with --topic\n", "group", "reset-offsets", "nobody", "--all-topics", "--to", "earliest", b)
}
