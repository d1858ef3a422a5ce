package e2e

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tombKeys is the key space of the tombstone scenario; op j of a key (record
// n = key + j*tombKeys) is a tombstone when j%4 == 3.
const tombKeys = 30

func isTombstone(n int) bool { return (n/tombKeys)%4 == 3 }

// TestCrashCompactedTombstones SIGKILLs the broker while the cleaner
// compacts a topic whose keys get deleted (tombstones, delete.retention.ms
// 100) and recreated, and checks no acknowledged value or delete is lost
// and no deleted value comes back.
func TestCrashCompactedTombstones(t *testing.T) {
	cfg := func(s string) *string { return &s }
	gaps := 0
	p := killRounds(t, crashScenario{
		topic: "tombs",
		configs: map[string]*string{
			"cleanup.policy":            cfg("compact"),
			"segment.bytes":             cfg("16384"),
			"segment.ms":                cfg("100"),
			"min.cleanable.dirty.ratio": cfg("0.01"),
			"delete.retention.ms":       cfg("100"),
		},
		flags: []string{"--log.cleaner.backoff.ms", "50", "--strata.idle.roll.check.interval.ms", "100"},
		mk: func(n int) *kgo.Record {
			k := n % tombKeys
			r := &kgo.Record{Key: []byte(fmt.Sprintf("key%03d", k)), Partition: int32(k % crashPartitions),
				Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(strconv.Itoa(n))}}}
			if !isTombstone(n) {
				r.Value = payload(n)
			}
			return r
		},
		check: func(t *testing.T, got map[int32][]stored, a *ackLog) {
			gaps += checkTombstones(t, got, a)
		},
		compacted: true,
	})
	requireCompaction(t, p, "tombs", gaps)
}

func checkTombstones(t *testing.T, got map[int32][]stored, a *ackLog) int {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	latestAcked := latestAckedPerKey(a, tombKeys)
	gaps := countGaps(got)
	lastSeen, ok := latestPerKey(t, got, tombKeys, func(r stored) (int, error) {
		n := r.num
		k := n % tombKeys
		switch {
		case n < 0 || n >= a.sent:
			return 0, fmt.Errorf("partition %d offset %d: header n=%d is no record we sent", r.partition, r.offset, n)
		case string(r.key) != fmt.Sprintf("key%03d", k) || r.partition != int32(k%crashPartitions):
			return 0, fmt.Errorf("partition %d offset %d: record %d has key %q", r.partition, r.offset, n, r.key)
		case isTombstone(n) && r.value != nil:
			return 0, fmt.Errorf("partition %d offset %d: record %d is a tombstone but has a %d-byte value", r.partition, r.offset, n, len(r.value))
		case !isTombstone(n) && !bytes.Equal(r.value, payload(n)):
			return 0, fmt.Errorf("partition %d offset %d: value of record %d differs from what was sent (len %d)", r.partition, r.offset, n, len(r.value))
		}
		return n, nil
	})
	if !ok {
		return gaps
	}
	var bad []string
	for _, k := range sortedKeys(latestAcked) {
		l := latestAcked[k]
		s, ok := lastSeen[k]
		switch {
		case ok && s < l && isTombstone(l):
			bad = append(bad, fmt.Sprintf("key%03d: deleted by acknowledged tombstone %d, but older record %d is the latest stored (resurrected)", k, l, s))
		case ok && s < l:
			bad = append(bad, fmt.Sprintf("key%03d: acknowledged %d, latest stored %d", k, l, s))
		case !ok && !isTombstone(l) && !laterTombstone(l, a.sent):
			bad = append(bad, fmt.Sprintf("key%03d: acknowledged value %d, but the key is gone and no later delete was sent", k, l))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d keys wrong:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	return gaps
}

// laterTombstone reports whether a tombstone for n's key was sent after n.
func laterTombstone(n, sent int) bool {
	for m := n + tombKeys; m < sent; m += tombKeys {
		if isTombstone(m) {
			return true
		}
	}
	return false
}
