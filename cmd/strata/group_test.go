package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestGroupCLI(t *testing.T) {
	bin := buildStrata(t)
	b := "--brokers=" + startStrata(t, nil)
	ok(t, bin, "", "topic", "create", "orders", "--partitions", "2", b)

	ok(t, bin, "a\nb\nc\n", "produce", "orders", "--partition", "0", b)
	ok(t, bin, "d\n", "produce", "orders", "--partition", "1", b)
	fails(t, bin, "strata: --partition cannot be used with --group\n", "consume", "orders", "-g", "billing", "-p", "0", b)
	// Commit offsets by resetting them: the group has no members.
	out := ok(t, bin, "", "group", "reset-offsets", "billing", "--topic", "orders", "--to", "offset:1", "--execute", b)
	if out != "TOPIC   PARTITION  CURRENT  NEW\norders  0          -        1\norders  1          -        1\n" {
		t.Errorf("reset-offsets:\n%s", out)
	}
	out = ok(t, bin, "", "group", "list", b)
	if !strings.Contains(out, "billing") {
		t.Errorf("list:\n%s", out)
	}
	out = ok(t, bin, "", "group", "describe", "billing", b)
	for _, want := range []string{"Group: billing", "Total lag: 2", "COMMITTED", "orders  0          1          3    2"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	out = ok(t, bin, "", "group", "describe", "billing", "-o", "json", b)
	if !strings.Contains(out, `"total_lag": 2`) {
		t.Errorf("describe json:\n%s", out)
	}
	ok(t, bin, "", "group", "reset-offsets", "billing", "--topic", "orders", "--to", "latest", "--execute", b)
	if out := ok(t, bin, "", "group", "describe", "billing", b); !strings.Contains(out, "Total lag: 0") {
		t.Errorf("after reset to latest:\n%s", out)
	}
	ok(t, bin, "", "group", "reset-offsets", "billing", "--topic", "orders", "--to", "earliest", "-p", "1", "--execute", b)
	if out := ok(t, bin, "", "group", "describe", "billing", b); !strings.Contains(out, "Total lag: 1") {
		t.Errorf("after reset p1 to earliest:\n%s", out)
	}

	fails(t, bin, "strata: unknown group \"nobody\"\n", "group", "describe", "nobody", b)
	fails(t, bin, "strata: unknown topic \"nope\"\n", "group", "reset-offsets", "billing", "--topic", "nope", "--to", "earliest", b)
	fails(t, bin, "strata: invalid --to \"soon\": use earliest, latest, an offset (offset:42), a time (2026-12-01T10:00:00Z, timestamp:<unix ms>) or an age (-10m, -2h, -1d)\n", "group", "reset-offsets", "billing", "--topic", "orders", "--to", "soon", b)
	fails(t, bin, "strata: reset-offsets needs --topic T or --all-topics\n", "group", "reset-offsets", "billing", b)
	fails(t, bin, "strata: reset-offsets needs one of --to, --shift-by or --by-duration\n", "group", "reset-offsets", "billing", "--topic", "orders", b)

	if out := ok(t, bin, "", "group", "delete", "billing", b); out != "deleted group \"billing\"\n" {
		t.Errorf("delete: %q", out)
	}
	fails(t, bin, "strata: unknown group \"billing\"\n", "group", "describe", "billing", b)
}

// TestGroupWithActiveMember checks describe shows a live member and its
// assignment, and that reset-offsets and delete refuse an active group.
func TestGroupWithActiveMember(t *testing.T) {
	bin := buildStrata(t)
	addr := startStrata(t, nil)
	b := "--brokers=" + addr
	ok(t, bin, "x\n", "produce", "live", b)

	joined := make(chan struct{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("watchers"), kgo.ConsumeTopics("live"),
		kgo.ClientID("watcher-1"),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { close(joined) }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	polled := make(chan struct{})
	go func() { // owner: this test; ends when ctx is cancelled
		defer close(polled)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	defer func() { cancel(); <-polled }()
	select {
	case <-joined:
	case <-time.After(time.Minute):
		t.Fatal("consumer did not join")
	}
	out := ok(t, bin, "", "group", "describe", "watchers", b)
	for _, want := range []string{"State: Stable", "Members: 1", "watcher-1", "live:0"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	fails(t, bin, "strata: group \"watchers\" has active members (state Stable): stop its consumers first\n",
		"group", "reset-offsets", "watchers", "--topic", "live", "--to", "earliest", "--execute", b)
	r := run(t, bin, "", "group", "reset-offsets", "watchers", "--topic", "live", "--to", "earliest", b)
	if r.code != 0 || r.stderr != "dry run: nothing committed; group \"watchers\" has active members (state Stable), so --execute will be refused until its consumers stop\n" {
		t.Errorf("dry run on an active group: %+v", r)
	}
	fails(t, bin, "strata: group \"watchers\" has active members: stop its consumers first\n", "group", "delete", "watchers", b)
}
