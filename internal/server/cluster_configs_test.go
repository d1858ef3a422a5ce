package server_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/servertest"
)

// alterBroker alters broker configs with kadm (IncrementalAlterConfigs)
// and returns the resource's error, with its message.
func alterBroker(t *testing.T, adm *kadm.Client, cs []kadm.AlterConfig, brokers ...int32) error {
	t.Helper()
	resps, err := adm.AlterBrokerConfigs(ctxT(t), cs, brokers...)
	if err != nil {
		return err
	}
	for _, r := range resps {
		if r.Err != nil {
			return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		}
	}
	return nil
}

// brokerConfig describes one setting of one broker.
func brokerConfig(t *testing.T, adm *kadm.Client, id int32, name string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeBrokerConfigs(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("describe broker %d: %v", id, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == name {
				return c
			}
		}
	}
	t.Fatalf("broker %d has no config %s", id, name)
	return kadm.Config{}
}

// produceSized produces one record of n random (incompressible) bytes to
// a partition.
func produceSized(ctx context.Context, cl *kgo.Client, topic string, p int32, n int) error {
	v := make([]byte, n)
	rand.Read(v)
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}).FirstErr()
}

func str(s string) *string { return &s }

// TestClusterDynamicBrokerConfigs: dynamic broker configs live in the
// metadata store and change behaviour on every broker (Kafka's
// DynamicBrokerConfig): a cluster default (resource "") applies to every
// broker, a per-broker value (resource "<id>") wins over it on that
// broker; DescribeConfigs reports the sources (DYNAMIC_BROKER_CONFIG,
// DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG) on
// broker and topic resources; what Kafka cannot update dynamically, what
// is per-broker only, and what Strata cannot apply while running are
// refused with INVALID_CONFIG and a message; a restarted broker applies
// the stored configs before it serves.
func TestClusterDynamicBrokerConfigs(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"log.retention.hours": "100"})
	ctx := ctxT(t)
	adm := kadm.NewClient(c.Client())
	// One partition led by each broker.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "d", -1, -1
	for i := int32(0); i < 3; i++ {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = i, []int32{i + 1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp := request(t, c.Brokers[0].Addr(), req).(*kmsg.CreateTopicsResponse)
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatal(err)
	}
	cl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(3))
	everyPartition := func(n int, want error) func() error {
		return func() error {
			for p := int32(0); p < 3; p++ {
				if err := produceSized(ctx, cl, "d", p, n); !errors.Is(err, want) && !(want == nil && err == nil) {
					return fmt.Errorf("partition %d (broker %d): produce %d bytes: %v, want %v", p, p+1, n, err, want)
				}
			}
			return nil
		}
	}
	eventually(t, "3000-byte records accepted", everyPartition(3000, nil))

	// The cluster default applies on every broker.
	if err := alterBroker(t, adm, []kadm.AlterConfig{{Name: "message.max.bytes", Value: str("2000")}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "message.max.bytes=2000 (cluster default) on every broker", everyPartition(3000, kerr.MessageTooLarge))
	for id := int32(1); id <= 3; id++ {
		eventually(t, "source on every broker", func() error {
			cfg := brokerConfig(t, adm, id, "message.max.bytes")
			if cfg.Value == nil || *cfg.Value != "2000" || cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
				return fmt.Errorf("broker %d message.max.bytes = %v (%v)", id, cfg.Value, cfg.Source)
			}
			return nil
		})
	}
	// The "" resource lists the cluster defaults only.
	rcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rcs) != 1 || len(rcs[0].Configs) != 1 || rcs[0].Configs[0].Key != "message.max.bytes" || rcs[0].Configs[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("cluster default resource: %+v", rcs)
	}
	// A topic's max.message.bytes comes from the dynamic default.
	trc, err := adm.DescribeTopicConfigs(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	for _, cf := range trc[0].Configs {
		if cf.Key == "max.message.bytes" && (cf.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || *cf.Value != "2000") {
			t.Fatalf("topic max.message.bytes: %v from %v", *cf.Value, cf.Source)
		}
	}

	// A per-broker value wins over the default on that broker only.
	if err := alterBroker(t, adm, []kadm.AlterConfig{{Name: "message.max.bytes", Value: str("100000")}}, 2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "broker 2 accepts 3000 bytes, 1 and 3 do not", func() error {
		for p := int32(0); p < 3; p++ {
			err := produceSized(ctx, cl, "d", p, 3000)
			if p == 1 && err != nil || p != 1 && !errors.Is(err, kerr.MessageTooLarge) {
				return fmt.Errorf("partition %d: %v", p, err)
			}
		}
		return nil
	})
	cfg := brokerConfig(t, adm, 2, "message.max.bytes")
	var srcs []string
	for _, s := range cfg.Synonyms {
		srcs = append(srcs, fmt.Sprintf("%s=%s", s.Source, *s.Value))
	}
	if cfg.Source != kmsg.ConfigSourceDynamicBrokerConfig || strings.Join(srcs, ",") != "DYNAMIC_BROKER_CONFIG=100000,DYNAMIC_DEFAULT_BROKER_CONFIG=2000,DEFAULT_CONFIG=1048588" {
		t.Fatalf("broker 2 message.max.bytes from %v, synonyms %v", cfg.Source, srcs)
	}
	// read_only: false for what Strata updates dynamically; another
	// broker's id is not this broker's to describe (Kafka's ConfigHelper).
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range []string{"1", "2"} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeBroker, name, []string{"message.max.bytes", "log.dirs"}
		dreq.Resources = append(dreq.Resources, r)
	}
	dresp := request(t, c.Brokers[0].Addr(), dreq).(*kmsg.DescribeConfigsResponse)
	if len(dresp.Resources) != 2 || dresp.Resources[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("describe broker 2 at broker 1: %+v", dresp.Resources)
	}
	for _, cf := range dresp.Resources[0].Configs {
		if cf.ReadOnly != (cf.Name == "log.dirs") {
			t.Errorf("%s read_only=%v", cf.Name, cf.ReadOnly)
		}
	}
	// A static value keeps its source.
	if st := brokerConfig(t, adm, 1, "log.retention.hours"); st.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("log.retention.hours from %v", st.Source)
	}

	// Refusals, with Kafka's error code and a message.
	for _, tc := range []struct {
		cs      []kadm.AlterConfig
		brokers []int32
		want    string
	}{
		{[]kadm.AlterConfig{{Name: "log.dirs", Value: str("/x")}}, nil, "Cannot update these configs dynamically: log.dirs"},
		{[]kadm.AlterConfig{{Name: "node.id", Value: str("7")}}, []int32{1}, "Cannot update these configs dynamically: node.id"},
		{[]kadm.AlterConfig{{Name: "listeners", Value: str("PLAINTEXT://:1")}}, nil, "Cannot update these configs at default cluster level, broker id must be specified: listeners"},
		{[]kadm.AlterConfig{{Name: "log.cleaner.threads", Value: str("2")}}, []int32{1}, "Strata cannot apply these configs while running: log.cleaner.threads"},
		{[]kadm.AlterConfig{{Name: "no.such.config", Value: str("1")}}, nil, "unknown broker configs: no.such.config"},
		{[]kadm.AlterConfig{{Name: "message.max.bytes", Value: str("-5")}}, nil, "message.max.bytes"},
		{[]kadm.AlterConfig{{Name: "log.cleanup.policy", Value: str("bogus")}}, []int32{3}, "log.cleanup.policy"},
	} {
		err := alterBroker(t, adm, tc.cs, tc.brokers...)
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("alter %v on %v: %v, want INVALID_CONFIG with %q", tc.cs[0].Name, tc.brokers, err, tc.want)
		}
	}
	if got := brokerConfig(t, adm, 1, "message.max.bytes"); *got.Value != "2000" {
		t.Fatalf("a refused alter changed message.max.bytes to %s", *got.Value)
	}

	// The legacy AlterConfigs replaces the whole set: broker 2's set
	// becomes log.retention.ms only, so its message.max.bytes falls back
	// to the default.
	if resps, err := adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: str("3600000")}}, 2); err != nil || resps[0].Err != nil {
		t.Fatalf("AlterConfigs: %v %v", err, resps)
	}
	eventually(t, "broker 2 back to the cluster default", func() error {
		if err := produceSized(ctx, cl, "d", 1, 3000); !errors.Is(err, kerr.MessageTooLarge) {
			return fmt.Errorf("partition 1: %v", err)
		}
		return nil
	})
	if rc := brokerConfig(t, adm, 2, "log.retention.ms"); rc.Source != kmsg.ConfigSourceDynamicBrokerConfig || *rc.Value != "3600000" {
		t.Fatalf("broker 2 log.retention.ms %v from %v", *rc.Value, rc.Source)
	}

	// A restarted broker applies the stored configs before it serves.
	c.Brokers[2].Restart()
	if err := produceSized(ctx, cl, "d", 2, 3000); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("restarted broker 3: %v", err)
	}

	// DELETE reverts to the static value on every broker.
	if err := alterBroker(t, adm, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "message.max.bytes"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "message.max.bytes default again on every broker", everyPartition(3000, nil))
}

// TestKRaftSingleNodeDynamicBrokerConfigs: a one-node KRaft cluster takes
// dynamic broker configs too; a node without the metadata store refuses
// them with INVALID_CONFIG and says why.
func TestKRaftSingleNodeDynamicBrokerConfigs(t *testing.T) {
	b := servertest.Start(t, servertest.Options{Settings: kraftSettings(t, 1, freePort(t))})
	ctx := ctxT(t)
	adm := b.Admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "s"); err != nil {
		t.Fatal(err)
	}
	cl := b.Client()
	if err := produceSized(ctx, cl, "s", 0, 3000); err != nil {
		t.Fatal(err)
	}
	if err := alterBroker(t, adm, []kadm.AlterConfig{{Name: "message.max.bytes", Value: str("2000")}}, 1); err != nil {
		t.Fatal(err)
	}
	// The broker that answered the alter has applied it.
	if err := produceSized(ctx, cl, "s", 0, 3000); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("produce after message.max.bytes=2000: %v", err)
	}
	if got := brokerConfig(t, adm, 1, "message.max.bytes"); got.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("source %v", got.Source)
	}
	// A node without KRaft settings has no store to keep them in.
	plain := servertest.Start(t, servertest.Options{})
	err := alterBroker(t, plain.Admin(), []kadm.AlterConfig{{Name: "message.max.bytes", Value: str("2000")}})
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), "metadata store") {
		t.Fatalf("alter without a store: %v", err)
	}
}
