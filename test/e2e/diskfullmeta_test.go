package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// retriableOrNil reports whether err is nil or a Kafka error a client
// retries.
func retriableOrNil(err error) bool {
	var ke *kerr.Error
	return err == nil || (errors.As(err, &ke) && ke.Retriable)
}

// TestMetadataWritesOnFullDisk: a one-node cluster (zero configuration)
// whose log dir is full for the data plane (below strata.log.min.free.bytes)
// takes metadata writes — CreateTopics of many topics, topic and broker
// AlterConfigs, group offset commits — each succeeding or failing with a
// retriable error, and the process stays up: the metadata store writes
// into the reserve (before the reserve, a failed etcd commit on the full
// disk ended the process). Once space is freed everything works again and
// what was acknowledged survives a restart.
func TestMetadataWritesOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	p := startOnSmallDisk(t, dir, 4<<20)
	// The broker has room from here: a line below saying it is below its
	// reserve is about this fill (logged once, by the fill's last refusal
	// or by the measure after fillDisk).
	started := len(p.Lines())
	ctx := ctxFor(t, 3*time.Minute)
	adm := newAdmin(t, p.Kafka)
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "fill"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	cl := newClient(t, kgo.SeedBrokers(p.Kafka))
	// A group with a committed offset, before the disk fills.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "fill", Partition: 0, At: 0, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "g", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit before the disk fills: %v %v", err, r.Error())
	}
	var code int16
	for i := 0; i < fillRequests && code == 0; i++ {
		c, _, err := rawProduce(ctx, cl, "fill", 0, [][]byte{bigValue(4 * i), bigValue(4*i + 1), bigValue(4*i + 2), bigValue(4*i + 3)})
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		code = c
	}
	if code != kerr.KafkaStorageError.Code {
		t.Fatalf("filling the disk ended with error %d (%v), want KAFKA_STORAGE_ERROR", code, kerr.ErrorForCode(code))
	}
	fillDisk(t, dir)
	waitLine(t, p, started, reserveLowMsg)

	// CreateTopics of 300 topics in one request (the request that ended
	// a one-node cluster on a full disk before the reserve).
	var names []string
	for i := range 300 {
		names = append(names, fmt.Sprintf("full-%03d", i))
	}
	created := map[string]bool{}
	rs, err := adm.CreateTopics(ctx, 1, 1, nil, names...)
	if err != nil {
		t.Fatalf("CreateTopics on the full disk: request failed: %v (broker alive: %v)", err, p.Alive())
	}
	for _, r := range rs.Sorted() {
		if !retriableOrNil(r.Err) {
			t.Errorf("create %s on the full disk: %v (neither success nor a retriable error)", r.Topic, r.Err)
		}
		if r.Err == nil {
			created[r.Topic] = true
		}
	}
	t.Logf("CreateTopics of 300 topics on the full disk: %d created", len(created))
	if !p.Alive() {
		t.Fatalf("broker died creating topics on the full disk:\n%s", p.Log())
	}
	// Topic and broker configs (cluster default and per broker).
	set := func(k, v string) []kadm.AlterConfig {
		return []kadm.AlterConfig{{Name: k, Value: kmsg.StringPtr(v)}}
	}
	if rs, err := adm.AlterTopicConfigs(ctx, set("retention.ms", "3600000"), "fill"); err != nil || !retriableOrNil(rs[0].Err) {
		t.Errorf("topic AlterConfigs on the full disk: %v %+v", err, rs)
	} else {
		t.Logf("topic AlterConfigs on the full disk: %v", rs[0].Err)
	}
	if rs, err := adm.AlterBrokerConfigs(ctx, set("log.retention.ms", "7200000"), 1); err != nil || !retriableOrNil(rs[0].Err) {
		t.Errorf("broker AlterConfigs on the full disk: %v %+v", err, rs)
	}
	if rs, err := adm.AlterBrokerConfigs(ctx, set("log.retention.bytes", "1000000000")); err != nil || !retriableOrNil(rs[0].Err) {
		t.Errorf("cluster-default AlterConfigs on the full disk: %v %+v", err, rs)
	}
	// Group commits go to __consumer_offsets, which is data: refused
	// retriably while the disk is full (NOT_COORDINATOR, as Kafka's
	// GroupMetadataManager answers a failed append). A client that retries
	// for 5 s sees that answer as well as one that retries for kgo's
	// default 30 s (the test's longest wait).
	offs = kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "fill", Partition: 0, At: 5, LeaderEpoch: -1})
	shortRetries := newAdminFrom(newClient(t, kgo.SeedBrokers(p.Kafka), kgo.RetryTimeout(5*time.Second)))
	r, err := shortRetries.CommitOffsets(ctx, "g", offs)
	if err != nil {
		t.Errorf("offset commit on the full disk: request failed: %v", err)
	} else if !retriableOrNil(r.Error()) {
		t.Errorf("offset commit on the full disk: %v (neither success nor a retriable error)", r.Error())
	} else {
		t.Logf("offset commit on the full disk: %v", r.Error())
	}
	if !p.Alive() {
		t.Fatalf("broker died on metadata writes on the full disk:\n%s", p.Log())
	}
	if _, err := adm.ListTopics(ctx); err != nil {
		t.Errorf("metadata on the full disk: %v", err)
	}

	// Room again: everything works.
	removeFiller(t, dir)
	resizeTmpfs(t, dir, 64<<20)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, _, err := rawProduce(ctx, cl, "fill", 0, [][]byte{bigValue(0)})
		if err != nil {
			t.Fatalf("produce after freeing space: %v", err)
		}
		if c == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce still fails with %v 60 s after space was freed", kerr.ErrorForCode(c))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		r, err := adm.CommitOffsets(ctx, "g", offs)
		if err == nil && r.Error() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offset commit after freeing space: %v %v", err, r.Error())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "after-room"); err != nil || r.Err != nil {
		t.Fatalf("create after freeing space: %v %v", err, r.Err)
	}
	created["after-room"] = true
	cl.Close()

	// A clean restart keeps every acknowledged topic and the commit.
	if code := p.Term(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d", code)
	}
	p = startBroker(t, dir)
	adm = newAdmin(t, p.Kafka)
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for n := range created {
		if !tds.Has(n) {
			t.Errorf("topic %s, created (acknowledged), is gone after the restart", n)
		}
	}
	fo, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fo.Lookup("fill", 0); !ok || o.At != 5 {
		t.Errorf("committed offset after the restart: %+v %v, want 5", o, ok)
	}
}
