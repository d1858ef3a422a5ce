package main

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProduceConsumeCLI(t *testing.T) {
	bin := buildStrata(t)
	addr := newCluster(t, kfake.SeedTopics(1, "t"), kfake.SeedTopics(2, "two"))
	b := "--brokers=" + addr

	r := run(t, bin, "k1:v1\nk2:\nnokey\n:v4\n", "produce", "t", "-K:", "-Z", "-H", "h1=x", "-H", "h2=y", b)
	if r.code != 0 || r.stderr != "produced 4 records to \"t\"\n" || r.stdout != "" {
		t.Fatalf("produce: %+v", r)
	}
	out := ok(t, bin, "", "consume", "t", "-e", "-f", `%p %o k=%k(%K) v=%s(%S) h=%h\n`, b)
	want := "0 0 k=k1(2) v=v1(2) h=h1=x,h2=y\n" +
		"0 1 k=k2(2) v=(-1) h=h1=x,h2=y\n" +
		"0 2 k=(-1) v=nokey(5) h=h1=x,h2=y\n" +
		"0 3 k=(-1) v=v4(2) h=h1=x,h2=y\n"
	if out != want {
		t.Errorf("consume -f:\n got %q\nwant %q", out, want)
	}
	if out := ok(t, bin, "", "consume", "t", "-e", b); out != "v1\n\nnokey\nv4\n" {
		t.Errorf("default format: %q", out)
	}
	if out := ok(t, bin, "", "consume", "t", "-c", "2", "-K", "=", b); out != "k1=v1\nk2=\n" {
		t.Errorf("-c 2 with -K: %q", out)
	}
	if out := ok(t, bin, "", "consume", "t", "-e", "--from", "2", "-f", `%o\n`, b); out != "2\n3\n" {
		t.Errorf("--from 2: %q", out)
	}
	if out := ok(t, bin, "", "consume", "t", "-e", "--from", "end", b); out != "" {
		t.Errorf("--from end -e: %q", out)
	}
	if out := ok(t, bin, "", "consume", "t", "-e", "--from", "timestamp:0", "-f", `%o `, b); out != "0 1 2 3 " {
		t.Errorf("--from timestamp:0: %q", out)
	}
	out = ok(t, bin, "", "consume", "t", "-c", "1", "-o", "json", b)
	if !strings.HasPrefix(out, `{"topic":"t","partition":0,"offset":0,"timestamp":`) || !strings.HasSuffix(out, `"key":"k1","value":"v1","headers":{"h1":"x","h2":"y"}}`+"\n") {
		t.Errorf("json: %q", out)
	}

	// Partition choice and an empty partition with -e.
	ok(t, bin, "a\nb\n", "produce", "two", "--partition", "1", "--acks", "1", b)
	if out := ok(t, bin, "", "consume", "two", "-e", "-f", `%p:%s `, b); out != "1:a 1:b " {
		t.Errorf("two partitions: %q", out)
	}
	if out := ok(t, bin, "", "consume", "two", "-e", "-p", "0", b); out != "" {
		t.Errorf("empty partition: %q", out)
	}

	// A group commits what it printed; the next run continues after it.
	if out := ok(t, bin, "", "consume", "t", "-g", "g1", "-c", "3", "-f", `%o `, b); out != "0 1 2 " {
		t.Errorf("group first run: %q", out)
	}
	if out := ok(t, bin, "", "consume", "t", "-g", "g1", "-e", "-f", `%o `, b); out != "3 " {
		t.Errorf("group second run: %q", out)
	}

	fails(t, bin, "strata: unknown topic \"nope\"\n", "consume", "nope", b)
	fails(t, bin, "strata: invalid --from \"middle\": use beginning, end, an offset (42), -N (the last N records of each partition), a time (2026-12-01T10:00:00Z, timestamp:<unix ms>) or an age (-10m, -2h, -1d)\n", "consume", "t", "--from", "middle", b)
	fails(t, bin, "strata: invalid --acks \"2\": use all, 1 or 0\n", "produce", "t", "--acks", "2", b)
	fails(t, bin, "strata: invalid --header \"x\": expected key=value\n", "produce", "t", "-H", "x", b)
	fails(t, bin, "strata: topic \"t\" has no partition 5\n", "consume", "t", "-p", "5", b)
	fails(t, bin, "strata: requires at least 1 arg(s), only received 0 (usage: strata consume <topic|^regex>... [flags])\n", "consume", b)
	r = run(t, bin, "x\n", "produce", "t", "--brokers", deadAddr(t), "--timeout", "3s")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "strata: cannot reach broker at 127.0.0.1:1: ") {
		t.Errorf("broker down: %+v", r)
	}
}

// TestProduceAutoCreate checks that produce creates a missing topic when
// the broker allows it (as kcat does), says so, and otherwise says how to
// create it.
func TestProduceAutoCreate(t *testing.T) {
	bin := buildStrata(t)
	addr := startStrata(t, nil)
	r := run(t, bin, "x\n", "produce", "fresh", "--brokers", addr)
	if r.code != 0 || r.stderr != "topic \"fresh\" did not exist: the broker created it (auto.create.topics.enable)\nproduced 1 record to \"fresh\"\n" {
		t.Errorf("auto-create: %+v", r)
	}
	if r := run(t, bin, "y\n", "produce", "fresh", "--brokers", addr); r.code != 0 || r.stderr != "produced 1 record to \"fresh\"\n" {
		t.Errorf("existing: %+v", r)
	}
	addr = startStrata(t, map[string]string{"auto.create.topics.enable": "false"})
	r = run(t, bin, "x\n", "produce", "missing", "--brokers", addr)
	if r.code != 1 || r.stderr != "strata: unknown topic \"missing\": the broker does not create topics on first use (auto.create.topics.enable=false); create it with: strata topic create missing\n" {
		t.Errorf("auto-create disabled: %+v", r)
	}
}

// TestProduceKey checks -k (one key for every record) against -K.
func TestProduceKey(t *testing.T) {
	bin := buildStrata(t)
	b := "--brokers=" + startStrata(t, nil)
	ok(t, bin, "a\nb:c\n", "produce", "keyed", "-k", "user-1", b)
	if out := ok(t, bin, "", "consume", "keyed", "-e", "-f", `%k=%s\n`, b); out != "user-1=a\nuser-1=b:c\n" {
		t.Errorf("-k: %q", out)
	}
	fails(t, bin, "strata: use -k (one key for every record) or -K (a key on each line), not both\n", "produce", "keyed", "-k", "x", "-K:", b)
}

// TestProduceNotEnoughReplicas checks that min.insync.replicas above the
// replication factor fails at once with the reason and what to do,
// instead of a timeout (Kafka accepts the topic; produce then fails with
// NOT_ENOUGH_REPLICAS).
func TestProduceNotEnoughReplicas(t *testing.T) {
	bin := buildStrata(t)
	b := "--brokers=" + startStrata(t, nil)
	r := run(t, bin, "", "topic", "create", "strict", "--config", "min.insync.replicas=2", b)
	if r.code != 0 || r.stdout != "created topic \"strict\" with 1 partition\n" ||
		r.stderr != "warning: topic \"strict\" has min.insync.replicas=2 but 1 replica(s): acks=all produce will fail with NOT_ENOUGH_REPLICAS until min.insync.replicas is lowered\n" {
		t.Errorf("create: %+v", r)
	}
	r = run(t, bin, "x\n", "produce", "strict", b)
	if r.code != 1 || r.stderr != "strata: produce to \"strict\": NOT_ENOUGH_REPLICAS: the topic has min.insync.replicas=2 but 1 replica(s), so no acks=all write can succeed: lower it (strata topic alter strict --set min.insync.replicas=1) or produce with --acks 1\n" {
		t.Errorf("produce: %+v", r)
	}
	if r := run(t, bin, "x\n", "produce", "strict", "--acks", "1", b); r.code != 0 {
		t.Errorf("acks=1: %+v", r)
	}
	// A retriable error that persists is explained, not reported as a bare
	// timeout: the broker's min.insync.replicas=2 applies to an
	// auto-created topic, which the pre-check does not see.
	b2 := "--brokers=" + startStrata(t, map[string]string{"min.insync.replicas": "2"})
	r = run(t, bin, "x\n", "produce", "auto", "--timeout", "3s", b2)
	if r.code != 1 || r.stderr != "strata: produce to \"auto\": no acknowledgement within 3s: NOT_ENOUGH_REPLICAS: partition 0 has 1 in-sync replica(s) but the topic has min.insync.replicas=2, which acks=all needs: lower it (strata topic alter auto --set min.insync.replicas=1) or produce with --acks 1\n" {
		t.Errorf("retriable error: %+v", r)
	}
	r = run(t, bin, "", "topic", "alter", "strict", "--set", "min.insync.replicas=3", b)
	if r.code != 0 || r.stderr != "warning: topic \"strict\" has min.insync.replicas=3 but 1 replica(s): acks=all produce will fail with NOT_ENOUGH_REPLICAS until min.insync.replicas is lowered\n" {
		t.Errorf("alter: %+v", r)
	}
}

// TestConsumeExitAfterTransaction checks that -e ends when a partition's
// last offset is a transaction marker (not a printable record).
func TestConsumeExitAfterTransaction(t *testing.T) {
	bin := buildStrata(t)
	addr := newCluster(t, kfake.SeedTopics(1, "tx"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("cli-test"), kgo.DefaultProduceTopic("tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("committed")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, bin, "", "consume", "tx", "-e", "--brokers", addr); out != "committed\n" {
		t.Errorf("consume: %q", out)
	}
}
