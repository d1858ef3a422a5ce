package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/sasl"
	"github.com/strata-io/strata/internal/vfs"
)

// Crash-at-every-step tests of topic creation and deletion, in the manner
// of storage's TestReplaceSegmentsCrashAtEveryStep: the broker runs over a
// vfs.CrashFS; for each file-system operation k of the admin call, the
// power is cut just before k (a crash image is taken) and k itself fails
// in the running broker. Both the image, reopened as after a crash, and
// the running broker must show the topic either whole or not at all: a
// topic that exists has every partition and serves appends and reads, one
// that does not can be created again and is then empty, and the topic
// next to it keeps its records.

// crashLogDir is the log dir inside the CrashFS.
const crashLogDir = "/data"

func openCrashBroker(t *testing.T, fsys vfs.FS) *Broker {
	t.Helper()
	// Small index files: CrashFS holds every preallocated index in memory.
	b, err := OpenFS(testConfig(t, crashLogDir, "log.index.size.max.bytes", "4096"), slog.New(slog.NewTextHandler(io.Discard, nil)), fsys)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return b
}

// crashFixture is a broker over a fresh CrashFS holding topic "keep" (two
// partitions, three records each), plus the topics in extra (one record
// per partition each).
func crashFixture(t *testing.T, extra map[string]int32) (*vfs.CrashFS, *Broker) {
	t.Helper()
	fsys := vfs.NewCrashFS()
	b := openCrashBroker(t, fsys)
	mustCreate := func(name string, parts int32, records int) {
		if _, err := b.CreateTopic(CreateTopicRequest{Name: name, NumPartitions: parts, ReplicationFactor: 1}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		for p := int32(0); p < parts; p++ {
			appendOne(t, b, name, p, records)
		}
	}
	mustCreate("keep", 2, 3)
	for name, parts := range extra {
		mustCreate(name, parts, 1)
	}
	return fsys, b
}

// appendOne appends a durable batch of n records to topic-p.
func appendOne(t *testing.T, b *Broker, topic string, p int32, n int) {
	t.Helper()
	part, err := b.Partition(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := part.Append(context.Background(), testBatch(t, n), -1); err != nil {
		t.Fatalf("append %s-%d: %v", topic, p, err)
	}
}

// records counts the records of topic-p below the high watermark.
func records(t *testing.T, b *Broker, topic string, p int32) int {
	t.Helper()
	part, err := b.Partition(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return int(part.Log.HighWatermark() - part.Log.LogStartOffset())
}

// checkKeep checks that topic "keep" holds its three records per partition.
func checkKeep(t *testing.T, b *Broker, when string) {
	t.Helper()
	for p := int32(0); p < 2; p++ {
		if n := records(t, b, "keep", p); n != 3 {
			t.Fatalf("%s: keep-%d has %d records, want 3", when, p, n)
		}
	}
}

// checkWholeOrAbsent checks that topic name either does not exist (then it
// is created anew and must be empty) or exists with parts partitions, each
// holding want records and accepting an append; it reports which.
func checkWholeOrAbsent(t *testing.T, b *Broker, name string, parts int32, want int, when string) string {
	t.Helper()
	top := b.Topic(name)
	state := "present"
	if top == nil {
		state = "absent"
		var err error
		if top, err = b.CreateTopic(CreateTopicRequest{Name: name, NumPartitions: parts, ReplicationFactor: 1}); err != nil {
			t.Fatalf("%s: create %s again: %v", when, name, err)
		}
		want = 0
	}
	if int32(len(top.Partitions)) != parts {
		t.Fatalf("%s: %s has %d partitions, want %d", when, name, len(top.Partitions), parts)
	}
	for p := int32(0); p < parts; p++ {
		if n := records(t, b, name, p); n != want {
			t.Fatalf("%s: %s-%d (%s) has %d records, want %d", when, name, p, state, n, want)
		}
		appendOne(t, b, name, p, 1)
	}
	return state
}

// countOps returns how many mutating file-system operations op makes on a
// fresh fixture.
func countOps(t *testing.T, extra map[string]int32, op func(*Broker) error) int {
	t.Helper()
	fsys, b := crashFixture(t, extra)
	ops, err := fsys.Steps(func() error { return op(b) })
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return ops
}

// crashAt runs op on a fresh fixture with a power cut before operation k
// (the image returned) and operation k failing; with k past the last
// operation the power is cut right after op returned. It returns op's
// error and the still running broker.
func crashAt(t *testing.T, k int, extra map[string]int32, op func(*Broker) error) (*vfs.CrashFS, *vfs.CrashFS, *Broker, error) {
	t.Helper()
	fsys, b := crashFixture(t, extra)
	img, err := fsys.CrashAt(k, func() error { return op(b) })
	return fsys, img, b, err
}

// recovered opens a broker over fsys (after a crash or a failure), checks
// "keep" and lets check inspect and change topic name; it then restarts
// the broker cleanly and checks that "keep" and name's partitions hold what
// check left (parts partitions of n records each).
func recovered(t *testing.T, fsys vfs.FS, when, name string, parts int32, check func(b *Broker) (n int)) {
	t.Helper()
	b := openCrashBroker(t, fsys)
	checkKeep(t, b, when)
	n := check(b)
	if err := b.Close(); err != nil {
		t.Fatalf("%s: close: %v", when, err)
	}
	b = openCrashBroker(t, fsys)
	defer b.Close()
	when += ", restarted"
	checkKeep(t, b, when)
	top := b.Topic(name)
	if top == nil || int32(len(top.Partitions)) != parts {
		t.Fatalf("%s: topic %s: %v", when, name, top)
	}
	for p := int32(0); p < parts; p++ {
		if got := records(t, b, name, p); got != n {
			t.Fatalf("%s: %s-%d has %d records, want %d", when, name, p, got, n)
		}
	}
}

func TestCreateTopicCrashAtEveryStep(t *testing.T) {
	const parts = 3
	create := func(b *Broker) error {
		_, err := b.CreateTopic(CreateTopicRequest{Name: "new", NumPartitions: parts, ReplicationFactor: 1})
		return err
	}
	ops := countOps(t, nil, create)
	if ops < 3*parts {
		t.Fatalf("only %d operations", ops)
	}
	for k := 0; k <= ops; k++ {
		fsys, img, b, err := crashAt(t, k, nil, create)
		when := fmt.Sprintf("step %d of %d", k, ops)
		// The running broker: a failed create leaves no topic behind and
		// answers KAFKA_STORAGE_ERROR.
		if err != nil && !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("%s: create failed with %v, want KAFKA_STORAGE_ERROR", when, err)
		}
		if (err == nil) != (b.Topic("new") != nil) {
			t.Fatalf("%s: create returned %v, topic present %v", when, err, b.Topic("new") != nil)
		}
		if k == ops && err != nil {
			t.Fatalf("undisturbed create: %v", err)
		}
		checkKeep(t, b, when+", running")
		checkWholeOrAbsent(t, b, "new", parts, 0, when+", running")
		if err := b.Close(); err != nil {
			t.Fatalf("%s: close: %v", when, err)
		}
		recovered(t, fsys, when+", after the failure", "new", parts, func(b *Broker) int { return 1 })
		// The power cut: an acknowledged create (k == ops) survives it.
		recovered(t, img, when+", power cut", "new", parts, func(b *Broker) int {
			if k == ops && b.Topic("new") == nil {
				t.Fatalf("%s: an acknowledged create was lost", when)
			}
			checkWholeOrAbsent(t, b, "new", parts, 0, when+", power cut")
			return 1
		})
	}
}

func TestDeleteTopicCrashAtEveryStep(t *testing.T) {
	const parts = 3
	extra := map[string]int32{"gone": parts}
	del := func(b *Broker) error { return b.DeleteTopic("gone") }
	ops := countOps(t, extra, del)
	if ops < 2 {
		t.Fatalf("only %d operations", ops)
	}
	deleted := 0
	for k := 0; k <= ops; k++ {
		fsys, img, b, err := crashAt(t, k, extra, del)
		when := fmt.Sprintf("step %d of %d", k, ops)
		// The running broker: a failed delete keeps the whole topic and
		// answers KAFKA_STORAGE_ERROR; a successful one removed it.
		if err != nil && !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("%s: delete failed with %v, want KAFKA_STORAGE_ERROR", when, err)
		}
		if (err == nil) != (b.Topic("gone") == nil) {
			t.Fatalf("%s: delete returned %v, topic present %v", when, err, b.Topic("gone") != nil)
		}
		if k == ops && err != nil {
			t.Fatalf("undisturbed delete: %v", err)
		}
		checkKeep(t, b, when+", running")
		n := 0
		if checkWholeOrAbsent(t, b, "gone", parts, 1, when+", running") == "present" {
			n = 1
		}
		if err := b.Close(); err != nil {
			t.Fatalf("%s: close: %v", when, err)
		}
		recovered(t, fsys, when+", after the failure", "gone", parts, func(b *Broker) int { return n + 1 })
		// The power cut: the topic is whole with its records, or gone (and
		// a new topic of that name starts empty); an acknowledged delete
		// (k == ops) survives it.
		recovered(t, img, when+", power cut", "gone", parts, func(b *Broker) int {
			if b.Topic("gone") != nil {
				if k == ops {
					t.Fatalf("%s: an acknowledged delete was lost", when)
				}
				checkWholeOrAbsent(t, b, "gone", parts, 1, when+", power cut")
				return 2
			}
			deleted++
			checkWholeOrAbsent(t, b, "gone", parts, 0, when+", power cut")
			return 1
		})
	}
	t.Logf("%d steps; a power cut left the topic deleted %d times", ops, deleted)
	if deleted < 2 {
		t.Fatalf("power cuts deleted the topic only %d times: the steps do not reach past the metadata write", deleted)
	}
}

// TestAlterScramCrashAtEveryStep cuts the power before, and fails, each
// file-system operation of a SCRAM alteration (add bob, delete alice): the
// credentials after a crash, and in the running broker after a failure,
// are the old set or the new one, and what the running broker reports is
// what a restart finds.
func TestAlterScramCrashAtEveryStep(t *testing.T) {
	salt := []byte("salt")
	sp, err := sasl.SaltPassword(sasl.ScramSHA256, "pw", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	up := func(user string) []ScramUpsertion {
		return []ScramUpsertion{{User: user, Mechanism: sasl.ScramSHA256, Iterations: 4096, Salt: salt, SaltedPassword: sp}}
	}
	users := func(b *Broker) string {
		var out []string
		for u := range b.DescribeScram() {
			out = append(out, u)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	alter := func(b *Broker) error {
		for u, err := range b.AlterScram([]ScramDeletion{{User: "alice", Mechanism: sasl.ScramSHA256}}, up("bob")) {
			if err != nil {
				return fmt.Errorf("%s: %w", u, err)
			}
		}
		return nil
	}
	fixture := func() (*vfs.CrashFS, *Broker) {
		fsys := vfs.NewCrashFS()
		b := openCrashBroker(t, fsys)
		if res := b.AlterScram(nil, up("alice")); res["alice"] != nil {
			t.Fatal(res["alice"])
		}
		return fsys, b
	}
	fsys, b := fixture()
	ops, err := fsys.Steps(func() error { return alter(b) })
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	for k := 0; k <= ops; k++ {
		when := fmt.Sprintf("step %d of %d", k, ops)
		fsys, b := fixture()
		img, err := fsys.CrashAt(k, func() error { return alter(b) })
		want := "bob"
		if err != nil {
			want = "alice"
			if !errors.Is(err, kerr.KafkaStorageError) {
				t.Fatalf("%s: %v, want KAFKA_STORAGE_ERROR", when, err)
			}
		}
		if got := users(b); got != want {
			t.Fatalf("%s: running broker has %q after %v", when, got, err)
		}
		b.Close()
		b = openCrashBroker(t, fsys)
		if got := users(b); got != want {
			t.Fatalf("%s: restart after the failure finds %q, the broker said %q", when, got, want)
		}
		b.Close()
		b = openCrashBroker(t, img)
		got := users(b)
		b.Close()
		if got != "alice" && got != "bob" || k == ops && got != "bob" {
			t.Fatalf("%s: power cut leaves %q", when, got)
		}
	}
}
