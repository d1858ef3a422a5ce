package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/servertest"
)

// startSecureCluster starts three combined nodes forming one cluster,
// each with a SASL_PLAINTEXT client listener (PLAIN users admin, alice,
// bob), the authorizer on and admin a super user.
func startSecureCluster(t *testing.T) *servertest.Cluster {
	t.Helper()
	return servertest.StartN(t, 3, servertest.Options{
		Controllers: 3,
		Settings: map[string]string{
			"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users":           "User:admin",
		},
		Configure: func(_ int, cfg *config.Broker) error {
			for _, kv := range [][2]string{
				{"listeners", strings.Replace(cfg.Get("listeners"), "PLAINTEXT://", "SASL_PLAINTEXT://", 1)},
				{"sasl.enabled.mechanisms", "PLAIN"},
				{"listener.name.sasl_plaintext.plain.sasl.jaas.config", secureJAAS},
			} {
				if err := cfg.Set(kv[0], kv[1]); err != nil {
					return err
				}
			}
			return nil
		},
		Logger:     servertest.TestLogger(t, slog.LevelWarn),
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)},
	})
}

// onBroker is a client of user that talks to one broker only.
func onBroker(t *testing.T, b *servertest.Broker, user string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// describes reports whether user sees topic in broker b's Metadata.
func describes(t *testing.T, b *servertest.Broker, user, topic string) (bool, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), onBroker(t, b, user))
	if err != nil {
		return false, err
	}
	switch code := resp.Topics[0].ErrorCode; code {
	case 0:
		return true, nil
	case kerr.TopicAuthorizationFailed.Code:
		return false, nil
	default:
		return false, kerr.ErrorForCode(code)
	}
}

// ACLs live in the cluster metadata: an ACL created through broker 1 is
// enforced by brokers 2 and 3 (each applies it from its watch of the
// store; the test waits for that, it does not time it), and one deleted
// through broker 2 stops being enforced on broker 1. A super user is one on
// every broker.
func TestACLsAcrossBrokers(t *testing.T) {
	c := startSecureCluster(t)
	ctx := ctxT(t)
	admin := kadm.NewClient(onBroker(t, c.Brokers[0], "admin"))
	if _, err := admin.CreateTopic(ctx, 3, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Brokers {
		b := b
		eventually(t, fmt.Sprintf("broker %d knows t", b.NodeID), func() error {
			if ok, err := describes(t, b, "admin", "t"); !ok {
				return fmt.Errorf("admin does not see t: %v", err)
			}
			return nil
		})
		if ok, err := describes(t, b, "alice", "t"); ok || err != nil {
			t.Fatalf("broker %d: alice describes t before any ACL (%v)", b.NodeID, err)
		}
	}

	// CreateAcls sent to broker 1 itself (kadm would send it to any broker
	// the client knows): broker 1 answered after applying it, so it is
	// enforced there at once.
	create := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host = "User:alice", "*"
	cr.Operation, cr.PermissionType = kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow
	create.Creations = append(create.Creations, cr)
	resp, err := onBroker(t, c.Brokers[0], "admin").SeedBrokers()[0].Request(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.CreateACLsResponse).Results[0].ErrorCode); err != nil {
		t.Fatalf("create ACL through broker 1: %v", err)
	}
	if ok, err := describes(t, c.Brokers[0], "alice", "t"); !ok {
		t.Fatalf("broker 1 right after CreateAcls: alice does not see t (%v)", err)
	}
	for _, b := range c.Brokers[1:] {
		eventually(t, fmt.Sprintf("broker %d applies the ACL", b.NodeID), func() error {
			if ok, err := describes(t, b, "alice", "t"); !ok {
				return fmt.Errorf("alice does not see t (%v)", err)
			}
			return nil
		})
	}
	// alice produces to every partition, each through its leader.
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p := range int32(3) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("alice produces to t/%d: %v", p, err)
		}
	}

	// Deleted through broker 2: broker 1 stops allowing it.
	described, err := kadm.NewClient(onBroker(t, c.Brokers[1], "admin")).DeleteACLs(ctx,
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("t").Operations(kadm.OpWrite))
	if err != nil || len(described) != 1 || len(described[0].Deleted) != 1 {
		t.Fatalf("delete through broker 2: %+v %v", described, err)
	}
	for _, b := range c.Brokers {
		eventually(t, fmt.Sprintf("broker %d applies the deletion", b.NodeID), func() error {
			if ok, err := describes(t, b, "alice", "t"); ok || err != nil {
				return fmt.Errorf("alice still sees t (%v)", err)
			}
			return nil
		})
	}
	prod2, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.DefaultProduceTopic("t"), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer prod2.Close()
	if err := prod2.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces after the deletion: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// UNREGISTER_BROKER (64) Alter Cluster, the operations-table row that
	// only a cluster serves (TestOperationsTable has the others): refused
	// without ALTER on the cluster; with it, the request reaches the
	// controller's check (broker 99 was never registered).
	unregister := func() int16 {
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = 99
		resp, err := req.RequestWith(ctx, onBroker(t, c.Brokers[0], "alice"))
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	if code := unregister(); code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("UNREGISTER_BROKER (64) without ALTER on the cluster: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	mustACL(t, admin, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpAlter))
	// The request goes to the active controller, which applies the ACL
	// asynchronously when another broker answered the CreateAcls.
	eventually(t, "UNREGISTER_BROKER (64) with ALTER on the cluster", func() error {
		switch code := unregister(); code {
		case kerr.BrokerIDNotRegistered.Code:
			return nil
		case kerr.ClusterAuthorizationFailed.Code:
			return fmt.Errorf("the controller has not applied the ACL yet: %v", kerr.ErrorForCode(code))
		default:
			t.Fatalf("UNREGISTER_BROKER (64) with ALTER on the cluster: %v, want BROKER_ID_NOT_REGISTERED", kerr.ErrorForCode(code))
			return nil
		}
	})
}

// Client quotas live in the cluster metadata and are enforced per broker,
// as Kafka does: each broker measures the bytes it receives itself. A
// quota set through broker 1 is described by broker 3; a producer over it
// on one partition leader is throttled there, while the same user's first
// produce to another broker is not (that broker has measured nothing);
// the same burst is then throttled on each of the other two brokers.
func TestQuotasPerBroker(t *testing.T) {
	c := startSecureCluster(t)
	ctx := ctxT(t)
	admin := kadm.NewClient(onBroker(t, c.Brokers[0], "admin"))
	if _, err := admin.CreateTopic(ctx, 3, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	mustACL(t, admin, kadm.NewACLs().Allow("User:alice").Topics("q").Operations(kadm.OpWrite))
	alice := kadm.ClientQuotaEntityComponent{Type: "user", Name: kadm.StringPtr("alice")}
	if res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{alice},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 10240}},
	}}); err != nil || res[0].Err != nil {
		t.Fatalf("alter quotas: %+v %v", res, err)
	}
	adm3 := kadm.NewClient(onBroker(t, c.Brokers[2], "admin"))
	eventually(t, "broker 3 describes the quota", func() error {
		d, err := adm3.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kadm.StringPtr("alice")}})
		if err != nil || len(d) != 1 || d[0].Values[0].Value != 10240 {
			return fmt.Errorf("%+v %v", d, err)
		}
		return nil
	})

	// The leaders of q's partitions, from any broker's Metadata.
	leaders := map[int32]*servertest.Broker{}
	eventually(t, "q's leaders on three brokers", func() error {
		md, err := admin.Metadata(ctx, "q")
		if err != nil {
			return err
		}
		for _, p := range md.Topics["q"].Partitions {
			for _, b := range c.Brokers {
				if b.NodeID == p.Leader {
					leaders[p.Partition] = b
				}
			}
		}
		if len(leaders) != 3 || leaders[0] == leaders[1] || leaders[1] == leaders[2] || leaders[0] == leaders[2] {
			return fmt.Errorf("leaders %v", leaders)
		}
		return nil
	})
	produce := func(p int32, size int) *kmsg.ProduceResponse {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "q"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		h := recordtest.NoProducer
		h.BaseTimestamp = time.Now().UnixMilli()
		rp.Records = recordtest.Batch(h, record.Record{Value: make([]byte, size)})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), onBroker(t, leaders[p], "alice"))
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce to q/%d on broker %d: %v", p, leaders[p].NodeID, kerr.ErrorForCode(code))
		}
		return resp
	}
	// Wait until every leader holds the quota.
	for _, p := range []int32{0, 1, 2} {
		b := leaders[p]
		eventually(t, fmt.Sprintf("broker %d holds the quota", b.NodeID), func() error {
			d, err := kadm.NewClient(onBroker(t, b, "admin")).DescribeClientQuotas(ctx, false,
				[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kadm.StringPtr("alice")}})
			if err != nil || len(d) != 1 {
				return fmt.Errorf("%+v %v", d, err)
			}
			return nil
		})
	}
	// 125 KiB at once against 10 KiB/s over 10 s: throttled on that broker.
	if resp := produce(0, 125<<10); resp.ThrottleMillis < 1000 {
		t.Fatalf("125 KiB at 10 KiB/s on broker %d: throttle_time_ms %d", leaders[0].NodeID, resp.ThrottleMillis)
	}
	// A small produce to another broker: nothing measured there yet.
	if resp := produce(1, 100); resp.ThrottleMillis != 0 {
		t.Errorf("first produce on broker %d throttled %d ms: quotas are per broker", leaders[1].NodeID, resp.ThrottleMillis)
	}
	// The quota holds on every broker: each throttles the same burst.
	for _, p := range []int32{1, 2} {
		if resp := produce(p, 125<<10); resp.ThrottleMillis < 1000 {
			t.Errorf("125 KiB at 10 KiB/s on broker %d: throttle_time_ms %d", leaders[p].NodeID, resp.ThrottleMillis)
		}
	}
}

// Replica fetchers are clients of the leader's listener like any other
// (Kafka: the inter-broker principal needs CLUSTER_ACTION on the cluster).
// On PLAINTEXT they are User:ANONYMOUS: once an ACL names the cluster,
// ANONYMOUS's CLUSTER_ACTION grant is what lets the followers fetch, so
// that an acks=all produce completes (the ISR cannot shrink meanwhile:
// replica.lag.time.max.ms is ten minutes).
func TestReplicationWithAuthorizer(t *testing.T) {
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3,
		Settings: map[string]string{
			"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"allow.everyone.if.no.acl.found": "true",
			"replica.fetch.wait.max.ms":      "200",
			"replica.lag.time.max.ms":        "600000",
		},
		Logger: servertest.TestLogger(t, slog.LevelWarn)})
	ctx := ctxT(t)
	adm := kadm.NewClient(c.Client())
	mustACL(t, adm, kadm.NewACLs().Allow("User:ANONYMOUS").Clusters().Operations(kadm.OpClusterAction, kadm.OpDescribe))
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "rep"); err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Brokers {
		eventually(t, fmt.Sprintf("broker %d applies the ACL", b.NodeID), func() error {
			d, err := kadm.NewClient(onPlain(t, b)).DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().
				Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
			if err != nil || len(d) == 0 || len(d[0].Described) != 2 {
				return fmt.Errorf("%+v %v", d, err)
			}
			return nil
		})
	}
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("rep"))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("acks=all produce to a topic replicated on three brokers: %v", err)
	}
	if _, isr := partitionState(t, c.Brokers[0].Addr(), "rep", 0); len(isr) != 3 {
		t.Errorf("ISR %v after the produce", isr)
	}
}

func onPlain(t *testing.T, b *servertest.Broker) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
