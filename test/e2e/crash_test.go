package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// crashRounds is 3 (CI's default run: every scenario still kills and
// recovers more than once), or 50 with STRATA_LONG=1.
func crashRounds() int {
	if os.Getenv("STRATA_LONG") == "1" {
		return 50
	}
	return 3
}

const crashPartitions = 3

// crashScenario is one topic layout for the SIGKILL test.
type crashScenario struct {
	topic   string
	configs map[string]*string
	flags   []string
	mk      func(n int) *kgo.Record
	// check verifies the topic as read back after a restart.
	check func(t *testing.T, got map[int32][]stored, a *ackLog)
	// producerOpts are extra kgo options for the producer.
	producerOpts []kgo.Opt
	// compacted: cleanup.policy=compact only, so the log start offset must
	// stay 0 (compaction never moves it).
	compacted bool
	// stop ends the broker in a round (default: SIGKILL).
	stop func(t *testing.T, p *proc, dir string)
	// partitions of the topic (default crashPartitions), rounds of kills
	// (default crashRounds()).
	partitions int32
	rounds     int
}

// killRounds runs sc: start the broker, then each round produce with
// acks=all, SIGKILL the broker after a random number of acknowledgements,
// restart it and check the topic. It returns the broker started after the
// last round, still running.
func killRounds(t *testing.T, sc crashScenario) *proc {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	p := startBroker(t, dir, sc.flags...)
	ctx := ctxFor(t, 10*time.Minute)
	adm := newAdmin(t, p.Kafka)
	parts, rounds := sc.partitions, sc.rounds
	if parts == 0 {
		parts = crashPartitions
	}
	if rounds == 0 {
		rounds = crashRounds()
	}
	res, err := adm.CreateTopic(ctx, parts, 1, sc.configs, sc.topic)
	if err != nil || res.Err != nil {
		t.Fatalf("create %s: %v %v", sc.topic, err, res.Err)
	}
	a := newAckLog()
	for round := 1; round <= rounds; round++ {
		before := a.ackedCount()
		target := before + 50 + rng.IntN(1500)
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- produceUntil(p.Kafka, sc.topic, a, sc.mk, stop, sc.producerOpts...) }() // owner: this loop; ends after stop
		deadline := time.Now().Add(90 * time.Second)
		for a.ackedCount() < target && time.Now().Before(deadline) && p.Alive() {
			time.Sleep(time.Millisecond)
		}
		if got := a.ackedCount(); got < target {
			close(stop)
			<-done
			t.Fatalf("round %d: only %d of %d acknowledgements within 90s (broker alive: %v); producer errors: %v; broker log:\n%s",
				round, got-before, target-before, p.Alive(), a.errs, logTail(p, 40))
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		cleaned := 0
		if sc.compacted {
			checkLogStartZero(t, ctx, p.Kafka, sc.topic, fmt.Sprintf("round %d, before the kill", round))
			if t.Failed() {
				t.Fatalf("round %d, before the kill: broker log:\n%s", round, logTail(p, 40))
			}
			cleaned = cleanerRounds(p, sc.topic)
		}
		if sc.stop != nil {
			sc.stop(t, p, dir)
		} else {
			p.Kill()
		}
		close(stop)
		if err := <-done; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		p = startBroker(t, dir, sc.flags...)
		if sc.compacted {
			checkLogStartZero(t, ctx, p.Kafka, sc.topic, fmt.Sprintf("round %d, after the restart", round))
		}
		got := readAll(t, ctx, p.Kafka, sc.topic)
		total := 0
		for _, rs := range got {
			total += len(rs)
		}
		a.mu.Lock()
		t.Logf("round %d: sent %d, acknowledged %d, stored %d records after the broker stopped and restarted (logs loaded in %s)", round, a.sent, len(a.acked), total, p.logsLoaded())
		a.mu.Unlock()
		if sc.compacted {
			t.Logf("round %d: the killed broker finished %d cleaning rounds of %s; %d offsets without a record after the restart", round, cleaned, sc.topic, countGaps(got))
		}
		sc.check(t, got, a)
		seekCheck(t, ctx, p.Kafka, sc.topic, got, rng, sc.compacted)
		if t.Failed() {
			t.Fatalf("round %d failed; stopping; broker log since the restart:\n%s", round, logTail(p, 40))
		}
	}
	return p
}

// cleanerRounds counts the cleaning rounds of topic the broker logged as
// finished ("cleaned log").
func cleanerRounds(p *proc, topic string) int {
	n := 0
	for _, l := range p.Lines() {
		if a := parseLine(l); a["msg"] == "cleaned log" && a["topic"] == topic {
			n++
		}
	}
	return n
}

// latestAckedPerKey is the highest acknowledged record number of each key
// (record n has key n % keys). a.mu is held.
func latestAckedPerKey(a *ackLog, keys int) map[int]int {
	latest := map[int]int{}
	for n := range a.acked {
		if k := n % keys; n >= latest[k] {
			latest[k] = n
		}
	}
	return latest
}

// latestPerKey walks a compacted topic as read back: offsets strictly
// increase in each partition, number checks a record and returns its
// record number, and each key's numbers (key n % keys) strictly increase,
// so nothing is duplicated or reordered. It returns each key's last
// record number, or false once it reported a violation.
func latestPerKey(t *testing.T, got map[int32][]stored, keys int, number func(stored) (int, error)) (map[int]int, bool) {
	t.Helper()
	lastSeen := map[int]int{}
	for part, rs := range got {
		prev := int64(-1)
		for _, r := range rs {
			if r.offset <= prev {
				t.Errorf("partition %d: offset %d after %d", part, r.offset, prev)
				return lastSeen, false
			}
			prev = r.offset
			n, err := number(r)
			if err != nil {
				t.Error(err)
				return lastSeen, false
			}
			k := n % keys
			if last, ok := lastSeen[k]; ok && n <= last {
				t.Errorf("partition %d offset %d: key %d: record %d follows record %d (duplicate or out of order)", part, r.offset, k, n, last)
				return lastSeen, false
			}
			lastSeen[k] = n
		}
	}
	return lastSeen, true
}

// countGaps is the number of offsets below each partition's last record
// that hold no record: the records the cleaner removed.
func countGaps(got map[int32][]stored) int {
	gaps := 0
	for _, rs := range got {
		if len(rs) > 0 {
			gaps += int(rs[len(rs)-1].offset) + 1 - len(rs)
		}
	}
	return gaps
}

// requireCompaction checks the cleaner removed records from topic: gaps
// already seen in the rounds' read-backs, or else on the running broker p
// within two minutes. The cleaner runs at nice +10 (cleaner.workerNice),
// so on a loaded machine a round may not finish between a restart and the
// next kill in any round; that is no failure, and waiting for the
// condition (not for a time) keeps the test independent of the load.
func requireCompaction(t *testing.T, p *proc, topic string, gaps int) {
	t.Helper()
	t.Logf("records removed by compaction, summed over the rounds: %d", gaps)
	if gaps > 0 || t.Failed() {
		return
	}
	ctx := ctxFor(t, 2*time.Minute)
	for {
		if g := countGaps(readAll(t, ctx, p.Kafka, topic)); g > 0 {
			t.Logf("no round's read-back had a record removed; the running broker's cleaner removed %d after the last restart", g)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the cleaner removed no record of %s, in any round or within 2 minutes after the last restart: compaction does not run; broker log:\n%s", topic, logTail(p, 40))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// logTail is the last n lines the broker printed (a failed round shows
// what the broker was doing).
func logTail(p *proc, n int) string {
	lines := p.Lines()
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestCrashAcksAll SIGKILLs the broker under idempotent acks=all load to a
// 3-partition topic with small segments and proves every acknowledged record
// survives exactly once, in order, byte for byte.
func TestCrashAcksAll(t *testing.T) {
	seg := "16384"
	killRounds(t, crashScenario{
		topic:   "crash",
		configs: map[string]*string{"segment.bytes": &seg},
		mk: func(n int) *kgo.Record {
			return &kgo.Record{Key: []byte(fmt.Sprintf("n%09d", n)), Value: payload(n), Partition: int32(n % crashPartitions)}
		},
		check: checkAppendOnly,
	})
}

// TestCrashAcksAllManyPartitions is TestCrashAcksAll over a topic of 1,000
// partitions (issue 18): the producer's requests span hundreds of
// partitions, so the broker's group-commit rounds go through the log
// dir's write-ahead journal; every acknowledged record survives each
// SIGKILL exactly once, in order, byte for byte. One round (ten with
// STRATA_LONG=1).
func TestCrashAcksAllManyPartitions(t *testing.T) {
	const parts = 1000
	rounds := 1
	if os.Getenv("STRATA_LONG") == "1" {
		rounds = 10
	}
	killRounds(t, crashScenario{
		topic:      "crashmany",
		flags:      []string{"--strata.log.journal.bytes", "67108864"},
		partitions: parts,
		rounds:     rounds,
		mk: func(n int) *kgo.Record {
			return &kgo.Record{Key: []byte(fmt.Sprintf("n%09d", n)), Value: payload(n), Partition: int32(n % parts)}
		},
		check: func(t *testing.T, got map[int32][]stored, a *ackLog) { checkAppendOnlyN(t, got, a, parts) },
	})
}

// checkAppendOnly: offsets contiguous from 0, record numbers strictly
// increasing per partition (so nothing twice, all in order), every record
// one we sent byte for byte, every acknowledged record present.
func checkAppendOnly(t *testing.T, got map[int32][]stored, a *ackLog) {
	t.Helper()
	checkAppendOnlyN(t, got, a, crashPartitions)
}

// checkAppendOnlyN is checkAppendOnly for record n sent to partition n %
// parts.
func checkAppendOnlyN(t *testing.T, got map[int32][]stored, a *ackLog, parts int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	present := map[int]bool{}
	for part, rs := range got {
		last := -1
		for i, r := range rs {
			if r.offset != int64(i) {
				t.Errorf("partition %d: record %d has offset %d (want contiguous offsets from 0)", part, i, r.offset)
				return
			}
			n, _ := numberOf(r.value)
			if err := checkValue(r, []byte(fmt.Sprintf("n%09d", n)), int32(n%parts)); err != nil {
				t.Error(err)
				return
			}
			if n >= a.sent {
				t.Errorf("partition %d offset %d: record %d was never sent", part, r.offset, n)
			}
			if n <= last {
				var around []string
				for _, x := range rs[max(0, i-3):min(len(rs), i+3)] {
					xn, _ := numberOf(x.value)
					around = append(around, fmt.Sprintf("offset %d: record %d (producer %d epoch %d)", x.offset, xn, x.pid, x.epoch))
				}
				dups := 0
				seen := map[int]bool{}
				for _, x := range rs {
					xn, _ := numberOf(x.value)
					if seen[xn] {
						dups++
					}
					seen[xn] = true
				}
				t.Errorf("partition %d offset %d: record %d follows record %d (duplicate or out of order); %d duplicates in the partition; around it:\n%s",
					part, r.offset, n, last, dups, strings.Join(around, "\n"))
				return
			}
			last = n
			present[n] = true
		}
	}
	var missing []int
	for _, n := range sortedKeys(a.acked) {
		if !present[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d acknowledged records lost, first ones: %v", len(missing), missing[:min(len(missing), 20)])
	}
}

// compactKeys is the key space of the compacted scenario.
const compactKeys = 60

// TestCrashCompacted SIGKILLs the broker while the cleaner compacts a
// 3-partition topic (segments roll every 100 ms, cleaner backoff 50 ms) and
// checks the latest acknowledged value of every key survives each kill.
func TestCrashCompacted(t *testing.T) {
	cfg := func(s string) *string { return &s }
	gaps := 0
	p := killRounds(t, crashScenario{
		topic: "compacted",
		configs: map[string]*string{
			"cleanup.policy":            cfg("compact"),
			"segment.bytes":             cfg("16384"),
			"segment.ms":                cfg("100"),
			"min.cleanable.dirty.ratio": cfg("0.01"),
		},
		flags: []string{"--log.cleaner.backoff.ms", "50", "--strata.idle.roll.check.interval.ms", "100"},
		mk: func(n int) *kgo.Record {
			k := n % compactKeys
			return &kgo.Record{Key: []byte(fmt.Sprintf("key%03d", k)), Value: payload(n), Partition: int32(k % crashPartitions)}
		},
		check: func(t *testing.T, got map[int32][]stored, a *ackLog) {
			gaps += checkCompacted(t, got, a)
		},
		compacted: true,
	})
	requireCompaction(t, p, "compacted", gaps)
}

// checkCompacted: every record is one we sent, byte for byte, under its key
// and partition; offsets strictly increase; per key the numbers increase;
// the last value of each key is at least its latest acknowledged one. It
// returns the number of offset gaps (records removed by the cleaner).
func checkCompacted(t *testing.T, got map[int32][]stored, a *ackLog) int {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	latestAcked := latestAckedPerKey(a, compactKeys)
	gaps := countGaps(got)
	lastSeen, ok := latestPerKey(t, got, compactKeys, func(r stored) (int, error) {
		n, _ := numberOf(r.value)
		k := n % compactKeys
		if err := checkValue(r, []byte(fmt.Sprintf("key%03d", k)), int32(k%crashPartitions)); err != nil {
			return 0, err
		}
		if n >= a.sent {
			t.Errorf("partition %d offset %d: record %d was never sent", r.partition, r.offset, n)
		}
		return n, nil
	})
	if !ok {
		return gaps
	}
	var lost []string
	for _, k := range sortedKeys(latestAcked) {
		if seen, ok := lastSeen[k]; !ok || seen < latestAcked[k] {
			lost = append(lost, fmt.Sprintf("key%03d: acked %d, latest stored %d (present %v)", k, latestAcked[k], seen, ok))
		}
	}
	if len(lost) > 0 {
		t.Errorf("latest acknowledged value lost for %d keys:\n%s", len(lost), strings.Join(lost, "\n"))
	}
	return gaps
}

// TestCrashAcksLeader is TestCrashAcksAll with acks=1 (no idempotence, one
// request in flight, no retries, so nothing can legitimately be duplicated
// or reordered). A SIGKILL does not lose the page cache, so every record
// acknowledged after its write must survive too.
func TestCrashAcksLeader(t *testing.T) {
	seg := "16384"
	killRounds(t, crashScenario{
		topic:   "crash1",
		configs: map[string]*string{"segment.bytes": &seg},
		mk: func(n int) *kgo.Record {
			return &kgo.Record{Key: []byte(fmt.Sprintf("n%09d", n)), Value: payload(n), Partition: int32(n % crashPartitions)}
		},
		check: checkAppendOnly,
		producerOpts: []kgo.Opt{
			kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(1), kgo.RecordRetries(0),
		},
	})
}

// TestShutdownUnderLoad is TestCrashAcksAll with SIGTERM instead of SIGKILL:
// a clean shutdown while acks=all produce requests keep arriving must exit
// 0, leave the clean-shutdown marker and lose no acknowledged record.
func TestShutdownUnderLoad(t *testing.T) {
	seg := "16384"
	killRounds(t, crashScenario{
		topic:   "term",
		configs: map[string]*string{"segment.bytes": &seg},
		mk: func(n int) *kgo.Record {
			return &kgo.Record{Key: []byte(fmt.Sprintf("n%09d", n)), Value: payload(n), Partition: int32(n % crashPartitions)}
		},
		check: checkAppendOnly,
		stop: func(t *testing.T, p *proc, dir string) {
			if code := p.Term(); code != 0 {
				t.Errorf("exit code after SIGTERM under load = %d, want 0:\n%s", code, p.Log())
			}
			if _, err := os.Stat(filepath.Join(dir, cleanMarker)); err != nil {
				t.Errorf("no clean shutdown marker after SIGTERM under load: %v", err)
			}
		},
	})
}

// seekCheck starts fetches at random stored offsets (indexes rebuilt by
// recovery must find them) and checks the first record returned. Without
// compaction it must be the stored record at that offset. With compaction
// the cleaner may have removed more since readAll, so it must be a stored
// record at or after that offset.
func seekCheck(t *testing.T, ctx context.Context, addr, topic string, got map[int32][]stored, rng *rand.Rand, compacted bool) {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	want := map[int32]stored{}
	byOffset := map[int32]map[int64]stored{}
	for part, rs := range got {
		if len(rs) == 0 {
			continue
		}
		byOffset[part] = map[int64]stored{}
		for _, r := range rs {
			byOffset[part][r.offset] = r
		}
		r := rs[rng.IntN(len(rs))]
		at := r.offset
		if compacted && rng.IntN(2) == 0 && r.offset > 0 {
			at = r.offset - 1 // may have been compacted away
		}
		offsets[part] = kgo.NewOffset().At(at)
		want[part] = stored{offset: at, value: r.value}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("seek check: no record for partitions %v before the deadline", want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("seek fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			w, ok := want[r.Partition]
			if !ok {
				return
			}
			delete(want, r.Partition)
			s, known := byOffset[r.Partition][r.Offset]
			switch {
			case !compacted && (r.Offset != w.offset || string(r.Value) != string(w.value)):
				t.Errorf("seek to %s-%d at %d: first record at offset %d (%.12q), want %.12q", topic, r.Partition, w.offset, r.Offset, r.Value, w.value)
			case compacted && (r.Offset < w.offset || !known || string(s.value) != string(r.Value)):
				t.Errorf("seek to %s-%d at %d: first record at offset %d (%.12q) is not a stored record at or after it", topic, r.Partition, w.offset, r.Offset, r.Value)
			}
		})
	}
}

// checkLogStartZero checks ListOffsets(earliest) is 0 on every partition of
// a compact-only topic.
func checkLogStartZero(t *testing.T, ctx context.Context, addr, topic, when string) {
	t.Helper()
	starts, err := newAdmin(t, addr).ListStartOffsets(ctx, topic)
	if err != nil || starts.Error() != nil {
		t.Fatalf("%s: list start offsets: %v %v", when, err, starts.Error())
	}
	starts.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("%s: %s-%d log start offset %d, want 0 (compaction must not move it; Kafka keeps the first segment's base offset)", when, topic, o.Partition, o.Offset)
		}
	})
}

// TestCrashCompressed is TestCrashAcksAll with zstd- and lz4-compressed
// batches: recovery must validate and keep compressed batches byte for
// byte.
func TestCrashCompressed(t *testing.T) {
	for name, codec := range map[string]kgo.CompressionCodec{"zstd": kgo.ZstdCompression(), "lz4": kgo.Lz4Compression()} {
		t.Run(name, func(t *testing.T) {
			seg := "16384"
			killRounds(t, crashScenario{
				topic:   "compressed",
				configs: map[string]*string{"segment.bytes": &seg},
				mk: func(n int) *kgo.Record {
					return &kgo.Record{Key: []byte(fmt.Sprintf("n%09d", n)), Value: payload(n), Partition: int32(n % crashPartitions)}
				},
				check:        checkAppendOnly,
				producerOpts: []kgo.Opt{kgo.ProducerBatchCompression(codec)},
			})
		})
	}
}
