package compat

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"testing"
	"time"
)

// allClients builds every client under test; a missing external client is
// skipped (or fails under CI) inside its own subtest.
var allClients = []struct {
	name string
	make func(t *testing.T) *Client
}{
	{"sarama", func(*testing.T) *Client { return saramaClient() }},
	{"kafka-go", func(*testing.T) *Client { return kafkaGoClient() }},
	{"kcat", kcatClient},
	{"confluent-kafka-python", confluentClient},
	{"kafka-python", kafkaPythonClient},
	{"kafkajs", kafkaJSClient},
}

// cleanerStatus is the part of GET /v1/compaction the test reads.
type cleanerStatus struct {
	Partition        int32 `json:"partition"`
	FirstUncleanable int64 `json:"first_uncleanable_offset"`
	LogEndOffset     int64 `json:"log_end_offset"`
}

func (b *testBroker) cleanerStatus(topic string) ([]cleanerStatus, error) {
	resp, err := http.Get("http://" + b.metrics + "/v1/compaction?topic=" + topic)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/compaction: HTTP %d", resp.StatusCode)
	}
	var st []cleanerStatus
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// TestCompactionHeadline is the developers' guide scenario: user-42 written
// twice and user-7 deleted; after cleaning, offset 0 is gone, offsets are not
// renumbered, and every client fetching at 0 starts at 1.
func TestCompactionHeadline(t *testing.T) {
	t.Parallel()
	b := startBroker(t, brokerOpts{metrics: true, extra: map[string]string{"strata.idle.roll.check.interval.ms": "50"}})
	const topic = "user-profiles"
	// min.cleanable.dirty.ratio=1: the cleaner never picks this log by itself
	// (a log qualifies when its dirty ratio is strictly above the setting, as
	// Kafka's LogCleanerManager), so slow clients still see the uncleaned log
	// in the "before" checks; b.Compact forces the round.
	adminCreate(t, b, topic, 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "1"})
	waitTopic(t, b, topic, 1)

	// Produce with kcat -Z -K: exactly as the guide does.
	lines := "user-42:v1\nuser-42:v2\nuser-7:\n"
	path, err := exec.LookPath("kcat")
	if err != nil {
		missing(t, "kcat: "+err.Error())
	}
	cmd := exec.Command(path, "-P", "-b", b.Addr(), "-t", topic, "-p", "0", "-Z", "-K:", "-X", "acks=all")
	cmd.Stdin = stringsReader(lines)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce: %v: %s", err, out)
	}
	before := []Rec{
		{Key: strp("user-42"), Value: strp("v1"), Offset: 0},
		{Key: strp("user-42"), Value: strp("v2"), Offset: 1},
		{Key: strp("user-7"), Value: nil, Offset: 2},
	}
	for _, c := range allClients {
		t.Run("before/"+c.name, func(t *testing.T) {
			cl := c.make(t)
			got := cl.Must(t, b.Addr(), Op{Op: opFetch, Topic: topic, Offset: -2, Max: 3}).Records
			checkRecords(t, c.name+" before cleaning", got, before, false)
		})
	}

	if !targetKfake() {
		// The cleaner never touches the active segment: wait until the idle
		// roll (segment.ms=100) made offsets 0..2 cleanable.
		waitFor(t, "idle segment roll", 20*time.Second, func() error {
			st, err := b.cleanerStatus(topic)
			if err != nil {
				return err
			}
			if len(st) != 1 || st[0].FirstUncleanable < 3 {
				return fmt.Errorf("status %+v", st)
			}
			return nil
		})
	}
	if err := b.Compact(topic); err != nil {
		t.Fatalf("compaction: %v", err)
	}

	after := before[1:]
	check := func(t *testing.T, c *Client) {
		got := c.Must(t, b.Addr(), Op{Op: opFetch, Topic: topic, Offset: 0, Max: 2}).Records
		checkRecords(t, c.Name+" fetch at 0 after cleaning", got, after, false)
		got = c.Must(t, b.Addr(), Op{Op: opFetch, Topic: topic, Offset: -2, Max: 2}).Records
		checkRecords(t, c.Name+" fetch from beginning after cleaning", got, after, false)
		if c.can(opWatermarks) {
			r := c.Must(t, b.Addr(), Op{Op: opWatermarks, Topic: topic})
			if r.Low != 0 || r.High != 3 {
				t.Errorf("%s watermarks after cleaning: low %d high %d, want 0 and 3 (offsets are never renumbered)", c.Name, r.Low, r.High)
			}
		}
	}
	for _, c := range allClients {
		t.Run("after/"+c.name, func(t *testing.T) { check(t, c.make(t)) })
	}
	t.Run("after-restart/sarama", func(t *testing.T) {
		b.Restart()
		check(t, saramaClient())
	})
}

// TestCompactionCompressedBatches cleans a topic whose batches are gzip and
// uncompressed, with headers, then every client reads the survivors from a
// removed offset in the middle of a cleaned batch.
func TestCompactionCompressedBatches(t *testing.T) {
	t.Parallel()
	b := startBroker(t, brokerOpts{metrics: true, extra: map[string]string{"strata.idle.roll.check.interval.ms": "50"}})
	const topic = "compressed-compacted"
	// min.cleanable.dirty.ratio=1: the cleaner never picks this log by itself
	// (a log qualifies when its dirty ratio is strictly above the setting, as
	// Kafka's LogCleanerManager), so slow clients still see the uncleaned log
	// in the "before" checks; b.Compact forces the round.
	adminCreate(t, b, topic, 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "1"})
	waitTopic(t, b, topic, 1)
	h := [][2]string{{"source", "compat"}}
	batches := []struct {
		codec string
		recs  []Rec
	}{
		{"gzip", []Rec{{Key: strp("k1"), Value: strp("a"), Headers: h}, {Key: strp("k2"), Value: strp("b")}, {Key: strp("k3"), Value: strp("c")}}},
		{"none", []Rec{{Key: strp("k1"), Value: strp("a2"), Headers: h}, {Key: strp("k2")}, {Key: strp("k4"), Value: strp("d")}}},
		{"gzip", []Rec{{Key: strp("k3"), Value: strp("c3")}}},
	}
	for _, bt := range batches {
		saramaClient().Must(t, b.Addr(), Op{Op: opProduce, Topic: topic, Records: bt.recs, Compression: bt.codec})
	}
	if !targetKfake() {
		waitFor(t, "idle segment roll", 20*time.Second, func() error {
			st, err := b.cleanerStatus(topic)
			if err != nil {
				return err
			}
			if len(st) != 1 || st[0].FirstUncleanable < 7 {
				return fmt.Errorf("status %+v", st)
			}
			return nil
		})
	}
	if err := b.Compact(topic); err != nil {
		t.Fatalf("compaction: %v", err)
	}
	want := []Rec{
		{Key: strp("k1"), Value: strp("a2"), Headers: h, Offset: 3},
		{Key: strp("k2"), Offset: 4},
		{Key: strp("k4"), Value: strp("d"), Offset: 5},
		{Key: strp("k3"), Value: strp("c3"), Offset: 6},
	}
	for _, c := range allClients {
		t.Run(c.name, func(t *testing.T) {
			cl := c.make(t)
			got := cl.Must(t, b.Addr(), Op{Op: opFetch, Topic: topic, Offset: 1, Max: len(want)}).Records
			checkRecords(t, cl.Name+" fetch at removed offset 1", got, want, false)
		})
	}
}
