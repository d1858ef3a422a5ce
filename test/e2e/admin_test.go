package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAdminStateSurvivesSIGKILL checks that acknowledged admin operations
// survive a SIGKILL: a deleted topic stays deleted (and its name can be
// reused with fresh data), DeleteRecords' new log start offset holds, and
// committed group offsets are still there.
func TestAdminStateSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	p := startBroker(t, dir)
	ctx := ctxFor(t, 2*time.Minute)
	adm := newAdmin(t, p.Kafka)
	for _, n := range []string{"doomed", "trimmed", "consumed"} {
		if res, err := adm.CreateTopic(ctx, 2, 1, nil, n); err != nil || res.Err != nil {
			t.Fatalf("create %s: %v %v", n, err, res.Err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := 0; i < 100; i++ {
		for _, n := range []string{"doomed", "trimmed", "consumed"} {
			rs = append(rs, &kgo.Record{Topic: n, Partition: int32(i % 2), Value: payload(i)})
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.Close()

	if res, err := adm.DeleteTopics(ctx, "doomed"); err != nil || res.Error() != nil {
		t.Fatalf("delete doomed: %v %v", err, res.Error())
	}
	trim := kadm.Offsets{}
	trim.Add(kadm.Offset{Topic: "trimmed", Partition: 0, At: 30})
	trim.Add(kadm.Offset{Topic: "trimmed", Partition: 1, At: 50})
	if res, err := adm.DeleteRecords(ctx, trim); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "consumed", Partition: 0, At: 17, LeaderEpoch: -1, Metadata: "m0"})
	commit.Add(kadm.Offset{Topic: "consumed", Partition: 1, At: 42, LeaderEpoch: -1, Metadata: "m1"})
	if res, err := adm.CommitOffsets(ctx, "g1", commit); err != nil || res.Error() != nil {
		t.Fatalf("commit offsets: %v %v", err, res.Error())
	}

	doomedBack := false // true once the name is deliberately reused
	check := func(when string) {
		t.Helper()
		adm := newAdmin(t, p.Kafka)
		md, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatalf("%s: list topics: %v", when, err)
		}
		if md.Has("doomed") != doomedBack {
			t.Errorf("%s: topic doomed exists=%v, want %v (deleted topic resurrected or recreated one lost)", when, md.Has("doomed"), doomedBack)
		}
		starts, err := adm.ListStartOffsets(ctx, "trimmed")
		if err != nil || starts.Error() != nil {
			t.Fatalf("%s: list start offsets: %v %v", when, err, starts.Error())
		}
		for part, want := range map[int32]int64{0: 30, 1: 50} {
			if o, _ := starts.Lookup("trimmed", part); o.Offset != want {
				t.Errorf("%s: trimmed-%d log start offset %d, want %d (DeleteRecords undone)", when, part, o.Offset, want)
			}
		}
		got := readAll(t, ctx, p.Kafka, "trimmed")
		if len(got[0]) != 20 || len(got[1]) != 0 || (len(got[0]) > 0 && got[0][0].offset != 30) {
			t.Errorf("%s: trimmed holds %d+%d records (first offset of p0 %v), want 20 from offset 30, and 0", when, len(got[0]), len(got[1]), got[0])
		}
		fo, err := adm.FetchOffsets(ctx, "g1")
		if err != nil || fo.Error() != nil {
			t.Fatalf("%s: fetch offsets: %v %v", when, err, fo.Error())
		}
		for part, want := range map[int32]int64{0: 17, 1: 42} {
			if o, ok := fo.Lookup("consumed", part); !ok || o.At != want {
				t.Errorf("%s: committed offset of consumed-%d is %+v, want %d", when, part, o, want)
			}
		}
	}
	check("before restart")
	p.Kill()
	p = startBroker(t, dir)
	check("after SIGKILL and restart")

	// The deleted name can be reused, starting empty.
	adm = newAdmin(t, p.Kafka)
	if res, err := adm.CreateTopic(ctx, 1, 1, nil, "doomed"); err != nil || res.Err != nil {
		t.Fatalf("recreate doomed: %v %v", err, res.Err)
	}
	doomedBack = true
	if got := readAll(t, ctx, p.Kafka, "doomed"); len(got[0]) != 0 {
		t.Errorf("recreated doomed holds %d old records", len(got[0]))
	}
	p.Kill()
	p = startBroker(t, dir)
	check("after a second SIGKILL")
	if got := readAll(t, ctx, p.Kafka, "doomed"); len(got[0]) != 0 {
		t.Errorf("recreated doomed holds %d old records after restart", len(got[0]))
	}
}
