package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumeKcatHabits checks what kcat users type: -o <offset> is
// recognised and pointed at --from; --from -N, times and ages; %T as a
// readable time; several topics, a regex, and a key filter.
func TestConsumeKcatHabits(t *testing.T) {
	bin := buildStrata(t)
	addr := startStrata(t, nil)
	b := "--brokers=" + addr
	ok(t, bin, "", "topic", "create", "orders-eu", "--partitions", "2", b)
	ok(t, bin, "", "topic", "create", "orders-us", b)
	ok(t, bin, "", "topic", "create", "payments", b)
	ok(t, bin, "a:1\nb:2\na:3\nc:4\n", "produce", "orders-eu", "-K:", "--partition", "0", b)
	ok(t, bin, "z:9\n", "produce", "orders-eu", "-K:", "--partition", "1", b)
	ok(t, bin, "a:5\n", "produce", "orders-us", "-K:", b)
	ok(t, bin, "p:1\n", "produce", "payments", "-K:", b)

	fails(t, bin, "strata: invalid output format \"beginning\": -o is the output format here (table or json); to start at beginning use --from beginning (kcat's -o is --from)\n",
		"consume", "orders-eu", "-o", "beginning", b)
	fails(t, bin, "strata: invalid output format \"-2\": -o is the output format here (table or json); to start at -2 use --from -2 (kcat's -o is --from)\n",
		"consume", "orders-eu", "-o", "-2", b)
	fails(t, bin, "strata: invalid output format \"s@1700000000000\": -o is the output format here (table or json); to start at s@1700000000000 use --from timestamp:1700000000000 (kcat's -o is --from)\n",
		"consume", "orders-eu", "-o", "s@1700000000000", b)

	// The last 2 records of each partition (partition 1 has only one).
	if out := ok(t, bin, "", "consume", "orders-eu", "--from", "-2", "-e", "-f", `%p:%o:%k `, b); !sameWords(out, "0:2:a 0:3:c 1:0:z") {
		t.Errorf("--from -2: %q", out)
	}
	if out := ok(t, bin, "", "consume", "orders-eu", "--from", "-10m", "-e", "-f", `%o `, "-p", "0", b); out != "0 1 2 3 " {
		t.Errorf("--from -10m: %q", out)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if out := ok(t, bin, "", "consume", "orders-eu", "--from", future, "-e", b); out != "" {
		t.Errorf("--from a future time: %q", out)
	}
	past := time.Now().Add(-time.Hour).Format(time.RFC3339)
	if out := ok(t, bin, "", "consume", "orders-eu", "--from", past, "-e", "-p", "0", "-f", `%o `, b); out != "0 1 2 3 " {
		t.Errorf("--from a past time: %q", out)
	}
	fails(t, bin, "strata: invalid --from \"2026-12-01 10:00\": a time must be RFC 3339 with a zone, e.g. 2026-12-01T10:00:00Z or 2026-12-01T11:00:00+01:00\n",
		"consume", "orders-eu", "--from", "2026-12-01 10:00", b)
	fails(t, bin, "strata: invalid --from \"-10x\": use beginning, end, an offset (42), -N (the last N records of each partition), a time (2026-12-01T10:00:00Z, timestamp:<unix ms>) or an age (-10m, -2h, -1d)\n",
		"consume", "orders-eu", "--from", "-10x", b)

	// %T readable.
	out := ok(t, bin, "", "consume", "payments", "-e", "-f", `%T\n`, "--time-format", "rfc3339", b)
	if ts, err := time.Parse(time.RFC3339, strings.TrimSpace(out)); err != nil || time.Since(ts) > time.Hour || !strings.HasSuffix(strings.TrimSpace(out), "Z") {
		t.Errorf("--time-format rfc3339: %q %v", out, err)
	}
	fails(t, bin, "strata: invalid --time-format \"iso\": use ms, rfc3339 or local\n", "consume", "payments", "--time-format", "iso", b)

	// Several topics, a regex, a key filter.
	if out := ok(t, bin, "", "consume", "orders-us", "payments", "-e", "-f", `%t:%k `, b); !sameWords(out, "orders-us:a payments:p") {
		t.Errorf("two topics: %q", out)
	}
	if out := ok(t, bin, "", "consume", "^orders-.*", "-e", "-f", `%t:%p:%o `, b); !sameWords(out, "orders-eu:0:0 orders-eu:0:1 orders-eu:0:2 orders-eu:0:3 orders-eu:1:0 orders-us:0:0") {
		t.Errorf("regex: %q", out)
	}
	if out := ok(t, bin, "", "consume", "^orders-.*", "-e", "-k", "a", "-f", `%t:%o=%s `, b); !sameWords(out, "orders-eu:0=1 orders-eu:2=3 orders-us:0=5") {
		t.Errorf("--key a: %q", out)
	}
	if out := ok(t, bin, "", "consume", "orders-eu", "-e", "-k", "b", "-k", "z", "-f", `%k `, b); !sameWords(out, "b z") {
		t.Errorf("--key b --key z: %q", out)
	}
	fails(t, bin, "strata: no topic matches \"^nothing\"\n", "consume", "^nothing", b)
	fails(t, bin, "strata: unknown topic \"nope\"\n", "consume", "payments", "nope", b)
}

// sameWords compares space-separated words regardless of order (records
// of different partitions arrive in any order).
func sameWords(got, want string) bool {
	g, w := strings.Fields(got), strings.Fields(want)
	if len(g) != len(w) {
		return false
	}
	count := map[string]int{}
	for _, s := range g {
		count[s]++
	}
	for _, s := range w {
		count[s]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestConsumeJSONBinary checks that -o json keeps every byte: values that
// are not UTF-8 come out in base64 with a marker, never as U+FFFD.
func TestConsumeJSONBinary(t *testing.T) {
	bin := buildStrata(t)
	addr := startStrata(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	raw := []byte{0xff, 0x00, 0xfe, 'x'}
	recs := []*kgo.Record{
		{Topic: "bin", Key: []byte("text-key"), Value: raw, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{0xc3}}, {Key: "ok", Value: []byte("é")}}},
		{Topic: "bin", Key: raw, Value: []byte("héllo")},
		{Topic: "bin", Value: nil},
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := ok(t, bin, "", "consume", "bin", "-e", "-o", "json", "--brokers", addr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Contains(out, "\\ufffd") || strings.Contains(out, "\ufffd") {
		t.Fatalf("json output:\n%s", out)
	}
	b64 := base64.StdEncoding.EncodeToString(raw)
	for i, want := range []string{
		`"key":"text-key","value":"` + b64 + `","value_encoding":"base64","headers":{"h":"ww==","ok":"é"},"header_encodings":{"h":"base64"}}`,
		`"key":"` + b64 + `","key_encoding":"base64","value":"héllo"}`,
		`"key":null,"value":null}`,
	} {
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("record %d: %s\nwant suffix %s", i, lines[i], want)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Errorf("record %d is not JSON: %v", i, err)
		}
	}
}

// TestConsumeReportsLostBroker follows a topic while its broker stops and
// starts again: stderr says when the broker is lost and when it is back,
// and records produced after the restart are printed.
func TestConsumeReportsLostBroker(t *testing.T) {
	bin := buildStrata(t)
	br := startPinned(t)
	addr := br.Addr()
	b := "--brokers=" + addr
	ok(t, bin, "before\n", "produce", "follow", b) // auto-created
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "consume", "follow", b)
	cmd.Env = os.Environ()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	outLines, errLines := lines(stdout), lines(stderr)
	expect := func(ch <-chan string, want string) {
		t.Helper()
		select {
		case l, open := <-ch:
			if !open || l != want {
				t.Fatalf("got %q (open %v), want %q", l, open, want)
			}
		case <-ctx.Done():
			t.Fatalf("no %q before the deadline", want)
		}
	}
	expect(outLines, "before")
	br.Close()
	expect(errLines, "strata: lost the broker at "+addr+" (connection refused); retrying")
	br.Open()
	ok(t, bin, "after\n", "produce", "follow", b)
	expect(errLines, "strata: broker at "+addr+" is back")
	expect(outLines, "after")
}

// lines streams r line by line.
func lines(r interface{ Read([]byte) (int, error) }) <-chan string {
	ch := make(chan string, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}
