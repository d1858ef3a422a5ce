package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/servertest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactionCLI drives `strata compaction status|run` against a
// Strata broker's admin API: the verdict of a run (nothing cleanable while
// the records sit in the active segment; what was removed once it rolled),
// a status table that fits 80 columns with the internal topics hidden,
// and 404s for unknown and non-compacted topics.
func TestCompactionCLI(t *testing.T) {
	bin := buildStrata(t)
	br := servertest.Start(t, servertest.Options{Metrics: true})
	b, a := "--brokers="+br.Addr(), "--admin="+br.MetricsAddr()
	ok(t, bin, "", "topic", "create", "profiles", "--config", "cleanup.policy=compact", "--config", "min.cleanable.dirty.ratio=0.01", b)
	ok(t, bin, "alice:1\nbob:1\nalice:2\n", "produce", "profiles", "-K:", b)

	out := ok(t, bin, "", "compaction", "run", "profiles", a)
	if out != "nothing cleanable in 1 partition of \"profiles\": all 3 records written since the last cleaning are in the active segment, "+
		"which is never cleaned; it rolls after segment.ms=604800000 (168h0m0s) or at segment.bytes=1073741824\n" {
		t.Errorf("run with everything in the active segment:\n%s", out)
	}

	// Roll the segment: a short segment.ms and one more record (Kafka rolls on append).
	ok(t, bin, "", "topic", "alter", "profiles", "--set", "segment.ms=1", b)
	time.Sleep(10 * time.Millisecond) // the segment must be older than segment.ms=1
	cl := br.Client(kgo.DefaultProduceTopic("profiles"))
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte("carol"), Value: []byte("1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ok(t, bin, "", "topic", "alter", "profiles", "--delete", "segment.ms", b)
	if out := ok(t, bin, "", "compaction", "run", "profiles", a); out != "removed 1 record from \"profiles\" in 1 partition\n" {
		t.Errorf("run after the roll:\n%s", out)
	}
	if out := ok(t, bin, "", "consume", "profiles", "-e", "-f", `%k=%s `, b); out != "bob=1 alice=2 carol=1 " {
		t.Errorf("after compaction: %q", out)
	}

	out = ok(t, bin, "", "compaction", "status", a)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TOPIC     PART  DIRTY  MIN  STATE  ROUNDS  REMOVED  LAST-CLEANED") ||
		!strings.HasPrefix(lines[1], "profiles  0     ") || !strings.Contains(lines[1], " 1%   idle   1       1        ") ||
		lines[2] != "(4 partitions of internal topics not shown: --internal)" {
		t.Errorf("status:\n%s", out)
	}
	for _, l := range lines {
		if len(l) > 80 {
			t.Errorf("status line wider than 80 columns: %q", l)
		}
	}
	if out := ok(t, bin, "", "compaction", "status", "--internal", a); !regexp.MustCompile(`(?m)^__consumer_offsets +0 `).MatchString(out) || strings.Contains(out, "not shown") {
		t.Errorf("status --internal:\n%s", out)
	}
	if out := ok(t, bin, "", "compaction", "status", "__consumer_offsets", a); !regexp.MustCompile(`(?m)^__consumer_offsets +1 `).MatchString(out) {
		t.Errorf("status of a named internal topic:\n%s", out)
	}
	if out := ok(t, bin, "", "compaction", "status", "profiles", "--all", a); !strings.Contains(out, "ACTIVE_SEGMENT_BASE_OFFSET") {
		t.Errorf("status --all:\n%s", out)
	}
	if out := ok(t, bin, "", "compaction", "status", "profiles", "-o", "json", a); !strings.HasPrefix(out, "[\n  {\n    \"topic\": \"profiles\"") {
		t.Errorf("status json:\n%s", out)
	}

	ok(t, bin, "", "topic", "create", "plain", b)
	fails(t, bin, "strata: unknown topic \"nope\"\n", "compaction", "status", "nope", a)
	fails(t, bin, "strata: unknown topic \"nope\"\n", "compaction", "run", "nope", a)
	fails(t, bin, "strata: topic \"plain\" is not compacted (set cleanup.policy=compact to compact it)\n", "compaction", "run", "plain", a)
	fails(t, bin, "strata: accepts 1 arg(s), received 0 (usage: strata compaction run <topic> [flags])\n", "compaction", "run", a)
	r := run(t, bin, "", "compaction", "status", "--admin", "http://127.0.0.1:1")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "strata: cannot reach admin API at http://127.0.0.1:1: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("admin down: %+v", r)
	}
}
