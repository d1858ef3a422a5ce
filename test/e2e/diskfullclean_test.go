package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDiskFullDuringCompaction fills a tmpfs with 4 MiB of room above the
// free-space reserve with a compacted topic
// whose keys are all distinct, so the cleaner must copy nearly everything
// and runs out of space. The broker must keep serving every acknowledged
// record byte for byte, and after more room and a restart still hold them
// all with no cleaner leftovers.
func TestDiskFullDuringCompaction(t *testing.T) {
	dir := t.TempDir()
	flags := []string{"--log.cleaner.backoff.ms", "50", "--strata.idle.roll.check.interval.ms", "100"}
	p := startOnSmallDisk(t, dir, 4<<20, flags...)
	ctx := ctxFor(t, 2*time.Minute)
	cfg := func(s string) *string { return &s }
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": cfg("compact"), "segment.bytes": cfg("524288"), "segment.ms": cfg("100"),
		"min.cleanable.dirty.ratio": cfg("0.01"),
	}, "cfull"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.DefaultProduceTopic("cfull"),
		kgo.RecordRetries(2), kgo.ProducerBatchMaxBytes(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for ; acked < 170; acked++ { // 170 x 16 KiB ~ 2.7 MiB of 4
		v := bigValue(acked)[:16<<10]
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("k%04d", acked)), Value: v}).FirstErr(); err != nil {
			t.Logf("produce stopped at %d records: %v", acked, err)
			break
		}
	}
	cl.Close()
	check := func(when string) {
		t.Helper()
		got := readAll(t, ctx, p.Kafka, "cfull")[0]
		if len(got) != acked {
			t.Errorf("%s: %d records, want all %d acknowledged ones (distinct keys: compaction removes nothing)", when, len(got), acked)
		}
		for i, r := range got {
			if r.offset != int64(i) || string(r.key) != fmt.Sprintf("k%04d", i) || !bytes.Equal(r.value, bigValue(i)[:16<<10]) {
				t.Fatalf("%s: offset %d (record at %d, key %q) differs from what was acknowledged", when, i, r.offset, r.key)
			}
		}
	}
	// Bounded wait for the cleaner to fail for lack of space (or succeed).
	deadline := time.Now().Add(20 * time.Second)
	var cleanerLines []string
	for time.Now().Before(deadline) && len(cleanerLines) == 0 {
		for _, l := range p.Lines() {
			if strings.Contains(l, `"cleaning failed`) || strings.Contains(l, `"cleaned log"`) {
				cleanerLines = append(cleanerLines, l)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("cleaner on the full disk: %s", strings.Join(cleanerLines, "\n"))
	if !p.Alive() {
		t.Fatalf("broker died while the cleaner ran out of space:\n%s", p.Log())
	}
	check("cleaner out of space")
	resizeTmpfs(t, dir, 64<<20)
	check("after remount")
	allLines := p.Lines()
	if code := p.Term(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d", code)
	}
	p = startBroker(t, dir, flags...)
	check("after restart")
	if code := p.Term(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d", code)
	}
	t.Run("log lines have unique keys", func(t *testing.T) {
		var bad []string
		for _, l := range append(allLines, p.Lines()...) {
			if d := duplicateKeys(l); len(d) > 0 {
				bad = append(bad, fmt.Sprintf("%v in %s", d, l))
			}
		}
		if len(bad) > 0 {
			t.Errorf("JSON log lines with a repeated key (%d), first: %s", len(bad), bad[0])
		}
	})
	var leftovers []string
	filepath.Walk(filepath.Join(dir, "cfull-0"), func(path string, info os.FileInfo, err error) error {
		if err == nil && (strings.HasSuffix(path, ".cleaned") || strings.HasSuffix(path, ".swap")) {
			leftovers = append(leftovers, filepath.Base(path))
		}
		return nil
	})
	if len(leftovers) > 0 {
		t.Errorf("cleaner files left after a clean shutdown: %v", leftovers)
	}
}

// duplicateKeys returns the top-level keys that occur more than once in a
// JSON object line.
func duplicateKeys(line string) []string {
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	var dups []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return dups
		}
		k, _ := tok.(string)
		if seen[k] {
			dups = append(dups, k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return dups
		}
	}
	return dups
}
