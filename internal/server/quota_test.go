package server_test

import (
	"errors"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas are set, described and removed with kadm (AlterClientQuotas
// / DescribeClientQuotas); a producer over its producer_byte_rate gets
// throttle_time_ms in the produce response and its connection is held that
// long before its next request is handled; a consumer over its
// consumer_byte_rate gets throttle_time_ms in the fetch response.
func TestProducerQuotaThrottles(t *testing.T) {
	tb := startSecure(t, map[string]string{"allow.everyone.if.no.acl.found": "true"})
	ctx := ctxT(t)
	admin := adminAs(tb, "admin")
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	alice := kadm.ClientQuotaEntityComponent{Type: "user", Name: kadm.StringPtr("alice")}
	res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{alice},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 10240}, {Key: "request_percentage", Value: 200}},
	}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("alter quotas: %+v %v", res, err)
	}
	described, err := admin.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kadm.StringPtr("alice")}})
	if err != nil || len(described) != 1 || len(described[0].Values) != 2 {
		t.Fatalf("describe quotas: %+v %v", described, err)
	}

	cl := as(tb, "alice")
	produce := func(size int) (*kmsg.ProduceResponse, time.Duration) {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "q"
		rp := kmsg.NewProduceRequestTopicPartition()
		h := recordtest.NoProducer
		h.BaseTimestamp = time.Now().UnixMilli()
		rp.Records = recordtest.Batch(h, record.Record{Value: make([]byte, size)})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
		return resp, time.Since(start)
	}
	// 11 samples of 1 s: at least 10 s are measured, so 125 KiB at once
	// is 12.5 KiB/s against 10 KiB/s: (12.5-10)/10 x 10 s = ~2.5 s.
	resp, _ := produce(125 << 10)
	throttle := time.Duration(resp.ThrottleMillis) * time.Millisecond
	if throttle < time.Second {
		t.Fatalf("throttle_time_ms %d after 125 KiB at 10 KiB/s", resp.ThrottleMillis)
	}
	// Lift the quota (through another connection): the muted connection
	// still waits out its throttle before its next request is handled.
	if res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{alice},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}, {Key: "request_percentage", Remove: true}},
	}}); err != nil || res[0].Err != nil {
		t.Fatalf("remove quotas: %+v %v", res, err)
	}
	_, took := produce(10)
	if took < throttle/2 {
		t.Errorf("next request answered after %v on a connection throttled for %v", took, throttle)
	}
	described, err = admin.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(described) != 0 {
		t.Fatalf("after removal: %+v %v", described, err)
	}

	// consumer_byte_rate: bob reading the 125 KiB back at 10 KiB/s gets
	// throttle_time_ms in his fetch response.
	bob := kadm.ClientQuotaEntityComponent{Type: "user", Name: kadm.StringPtr("bob")}
	if res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{bob},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 10240}},
	}}); err != nil || res[0].Err != nil {
		t.Fatalf("alter quotas: %+v %v", res, err)
	}
	tds, err := admin.ListTopics(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxBytes, fetch.SessionEpoch = -1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "q", tds["q"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	// Kafka's handleFetchRequest: a fetch is capped at what the quota window
	// allows, and once over the quota the answer is an empty response with
	// the throttle time (the bytes are not counted).
	bobCl := as(tb, "bob")
	for i := 0; ; i++ {
		fresp, err := fetch.RequestWith(ctx, bobCl)
		if err != nil {
			t.Fatal(err)
		}
		if fresp.ThrottleMillis > 0 {
			if len(fresp.Topics) > 0 && len(fresp.Topics[0].Partitions) > 0 && len(fresp.Topics[0].Partitions[0].RecordBatches) > 0 {
				t.Errorf("a throttled fetch response carries %d bytes of records", len(fresp.Topics[0].Partitions[0].RecordBatches))
			}
			break
		}
		if i == 5 {
			t.Fatalf("%d fetches of q at a consumer_byte_rate of 10 KiB/s: never throttled", i+1)
		}
	}
}

// Kafka's AlterClientQuotas checks, each with its message: an unknown key,
// a fractional byte rate, IP entities (not enforced by Strata); and
// DescribeClientQuotas refuses an unknown entity type.
func TestClientQuotaValidation(t *testing.T) {
	tb := startSecure(t, nil)
	ctx := ctxT(t)
	admin := adminAs(tb, "admin")
	user := kadm.ClientQuotaEntity{{Type: "user", Name: kadm.StringPtr("u")}}
	res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: user, Ops: []kadm.AlterClientQuotaOp{{Key: "bogus", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: kadm.StringPtr("1.2.3.4")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !errors.Is(r.Err, kerr.InvalidRequest) {
			t.Errorf("%v: %v (%s), want INVALID_REQUEST", r.Entity, r.Err, r.ErrMessage)
		}
	}
	_, err = admin.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "group"}})
	if !errors.Is(err, kerr.UnsupportedVersion) {
		t.Errorf("describe with an unknown entity type: %v", err)
	}
	// Only ALTER_CONFIGS / DESCRIBE_CONFIGS on the cluster may.
	bob := adminAs(tb, "bob")
	res, err = bob.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: user, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}})
	if err != nil || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("bob alters quotas: %+v %v", res, err)
	}
	if _, err := bob.DescribeClientQuotas(ctx, false, nil); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("bob describes quotas: %v", err)
	}
}
