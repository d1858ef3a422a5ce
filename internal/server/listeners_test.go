package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/servertest"
)

// listenerPort is the port of addr.
func listenerPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// requestOn sends req with a client built from opts to the broker at addr.
func requestOn(t *testing.T, addr string, req kmsg.Request, opts ...kgo.Opt) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := cl.SeedBrokers()[0].Request(ctxT(t), req)
	if err != nil {
		t.Fatalf("request to %s: %v", addr, err)
	}
	return resp
}

// TestListenersOneNode: one node serves PLAINTEXT, SASL_PLAINTEXT and SSL
// listeners at once (Kafka's listeners), each with its own settings
// (listener.name.<name>.*). A client on each listener is given this
// broker's address on that listener in Metadata, DescribeCluster and
// FindCoordinator (Kafka's rule: the endpoints of the listener the request
// came in on), produces, consumes in a group and reads back; the SASL keys
// are advertised on the SASL listener only; a client that does not
// authenticate on the SASL listener is refused while the others go on.
func TestListenersOneNode(t *testing.T) {
	p := genPKI(t)
	tb := startBroker(t, "", map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config":  saslJAAS,
		"listener.name.ssl.ssl.keystore.location":              p.ServerKeystore,
	})
	alice := kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())
	tlsOpt := kgo.DialTLSConfig(p.ClientConfig(false))
	listeners := []struct {
		name string
		opts []kgo.Opt
	}{{"PLAINTEXT", nil}, {"SASL_PLAINTEXT", []kgo.Opt{alice}}, {"SSL", []kgo.Opt{tlsOpt}}}
	for _, l := range listeners {
		t.Run(l.name, func(t *testing.T) {
			addr := tb.ListenerAddr(l.name)
			port := listenerPort(t, addr)
			md := requestOn(t, addr, &kmsg.MetadataRequest{Version: 12}, l.opts...).(*kmsg.MetadataResponse)
			if len(md.Brokers) != 1 || md.Brokers[0].Port != port {
				t.Fatalf("Metadata on %s lists %+v, want this listener's port %d", l.name, md.Brokers, port)
			}
			dc := requestOn(t, addr, kmsg.NewPtrDescribeClusterRequest(), l.opts...).(*kmsg.DescribeClusterResponse)
			if len(dc.Brokers) != 1 || dc.Brokers[0].Port != port {
				t.Fatalf("DescribeCluster on %s lists %+v, want port %d", l.name, dc.Brokers, port)
			}
			fc := requestOn(t, addr, &kmsg.FindCoordinatorRequest{Version: 4, CoordinatorKeys: []string{"g-" + l.name}}, l.opts...).(*kmsg.FindCoordinatorResponse)
			if len(fc.Coordinators) != 1 || fc.Coordinators[0].Port != port {
				t.Fatalf("FindCoordinator on %s answers %+v, want port %d", l.name, fc.Coordinators, port)
			}
			avr := kmsg.NewPtrApiVersionsRequest()
			avr.ClientSoftwareName, avr.ClientSoftwareVersion = "strata-test", "1.0"
			av := requestOn(t, addr, avr, l.opts...).(*kmsg.ApiVersionsResponse)
			sasl := slices.ContainsFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 17 })
			if sasl != (l.name == "SASL_PLAINTEXT") {
				t.Errorf("ApiVersions on %s advertises SaslHandshake: %v", l.name, sasl)
			}
			topic := "on-" + l.name
			opts := append([]kgo.Opt{kgo.SeedBrokers(addr)}, l.opts...)
			cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			for i := range 20 {
				if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
					t.Fatalf("produce on %s: %v", l.name, err)
				}
			}
			cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g-"+l.name),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			got := 0
			ctx := ctxT(t)
			for got < 20 {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("group consumer on %s read %d of 20", l.name, got)
				}
				fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch on %s: %v", l.name, err) })
				got += fs.NumRecords()
			}
			if err := cons.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatalf("commit on %s: %v", l.name, err)
			}
		})
	}
	// Unauthenticated requests on the SASL listener close the connection;
	// the other listeners are unaffected.
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.ListenerAddr("SASL_PLAINTEXT")), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).ListTopics(ctxT(t)); err == nil {
		t.Error("a client without SASL was served on the SASL listener")
	}
	if _, err := kadm.NewClient(tb.Client()).ListTopics(ctxT(t)); err != nil {
		t.Errorf("PLAINTEXT listener after a refused SASL client: %v", err)
	}
}

// clusterJAAS is the PLAIN entry of the SASL listeners of the cluster
// tests: the broker's own credentials (username, password: Kafka's
// inter-broker client credentials) and the users it accepts.
const clusterJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";`

// TestListenersCluster: three nodes, each with an EXTERNAL listener
// (PLAINTEXT) and an INTERNAL one (SASL_PLAINTEXT), custom names mapped
// through listener.security.protocol.map, INTERNAL the inter-broker
// listener with PLAIN credentials, and the authorizer on with only the
// brokers' and alice's principals as super users. Each listener's
// clients are given every broker's address on that listener; the
// principal is built per listener (User:ANONYMOUS on EXTERNAL, the SASL
// user on INTERNAL), so an ACL for User:ANONYMOUS is what lets EXTERNAL
// clients produce; a replication factor 3 topic replicates over the SASL
// inter-broker listener as User:broker, acks=all produce through EXTERNAL
// succeeds, and a consumer on INTERNAL reads everything.
func TestListenersCluster(t *testing.T) {
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3, Settings: map[string]string{
		"listeners":                                      "EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map":                 "EXTERNAL:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":                     "INTERNAL",
		"sasl.mechanism.inter.broker.protocol":           "PLAIN",
		"listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
		"listener.name.internal.plain.sasl.jaas.config":  clusterJAAS,
		"authorizer.class.name":                          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                                    "User:broker;User:alice",
		"offsets.topic.replication.factor":               "1",
		"transaction.state.log.replication.factor":       "1",
	}, Logger: servertest.TestLogger(t, slog.LevelWarn), Configure: func(i int, cfg *config.Broker) error {
		if i != 2 {
			return nil
		}
		// Node 3 alone has a third listener, EXTRA.
		if err := cfg.Set("listener.security.protocol.map", cfg.Get("listener.security.protocol.map")+",EXTRA:PLAINTEXT"); err != nil {
			return err
		}
		return cfg.Set("listeners", cfg.Get("listeners")+",EXTRA://127.0.0.1:0")
	}})
	alice := kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())
	var internal, external []string
	for _, b := range c.Brokers {
		internal = append(internal, b.ListenerAddr("INTERNAL"))
		external = append(external, b.ListenerAddr("EXTERNAL"))
	}
	// Every broker lists every broker at its address on the request's
	// listener.
	for i, b := range c.Brokers {
		for _, l := range []struct {
			name  string
			addrs []string
			opts  []kgo.Opt
		}{{"EXTERNAL", external, nil}, {"INTERNAL", internal, []kgo.Opt{alice}}} {
			eventually(t, fmt.Sprintf("node %d lists the brokers on %s", b.NodeID, l.name), func() error {
				md := requestOn(t, l.addrs[i], &kmsg.MetadataRequest{Version: 12}, l.opts...).(*kmsg.MetadataResponse)
				var ports []int32
				for _, br := range md.Brokers {
					ports = append(ports, br.Port)
				}
				var want []int32
				for _, a := range l.addrs {
					want = append(want, listenerPort(t, a))
				}
				slices.Sort(ports)
				slices.Sort(want)
				if !slices.Equal(ports, want) {
					return fmt.Errorf("ports %v, want %v", ports, want)
				}
				return nil
			})
		}
	}
	ctx := ctxT(t)
	adm := kadm.NewClient(newClient(t, internal, alice))
	if _, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, "both"); err != nil {
		t.Fatal(err)
	}
	// EXTERNAL is User:ANONYMOUS: denied until an ACL allows it.
	anon := newClient(t, external, kgo.DefaultProduceTopic("both"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(3), kgo.RetryTimeout(5*time.Second))
	if err := anon.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("anonymous produce on EXTERNAL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	acl := kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Topics("both").Operations(kadm.OpWrite, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if _, err := adm.CreateACLs(ctx, acl); err != nil {
		t.Fatal(err)
	}
	anon2 := newClient(t, external, kgo.DefaultProduceTopic("both"), kgo.RequiredAcks(kgo.AllISRAcks()))
	eventually(t, "anonymous produce allowed by the ACL", func() error {
		return anon2.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr()
	})
	for i := range 30 {
		if err := anon2.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce on EXTERNAL: %v", err)
		}
	}
	// Replicated over INTERNAL: every partition's ISR is all three.
	for p := int32(0); p < 3; p++ {
		eventually(t, fmt.Sprintf("partition %d fully in sync", p), func() error {
			md := requestOn(t, internal[0], &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("both")}}}, alice).(*kmsg.MetadataResponse)
			for _, mp := range md.Topics[0].Partitions {
				if mp.Partition == p && len(mp.ISR) != 3 {
					return fmt.Errorf("ISR %v", mp.ISR)
				}
			}
			return nil
		})
	}
	// On node 3's EXTRA listener only node 3 is listed; a partition led by
	// a broker without EXTRA is LISTENER_NOT_FOUND (v6+), else
	// LEADER_NOT_AVAILABLE (Kafka's errorUnavailableListeners).
	extra := c.Brokers[2].ListenerAddr("EXTRA")
	for _, version := range []int16{12, 5} {
		maxV := kversion.Stable()
		maxV.SetMaxKeyVersion(3, version) // franz-go sends the highest version both sides have
		md := requestOn(t, extra, &kmsg.MetadataRequest{Version: version, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("both")}}}, kgo.MaxVersions(maxV)).(*kmsg.MetadataResponse)
		if len(md.Brokers) != 1 || md.Brokers[0].NodeID != c.Brokers[2].NodeID || md.Brokers[0].Port != listenerPort(t, extra) {
			t.Fatalf("Metadata v%d on EXTRA lists %+v, want node 3 alone", version, md.Brokers)
		}
		want := kerr.ListenerNotFound.Code
		if version < 6 {
			want = kerr.LeaderNotAvailable.Code
		}
		for _, mp := range md.Topics[0].Partitions {
			leader, _ := partitionState(t, c.Brokers[0].ListenerAddr("EXTERNAL"), "both", mp.Partition)
			switch {
			case leader == c.Brokers[2].NodeID && (mp.ErrorCode != 0 || mp.Leader != leader):
				t.Errorf("v%d partition %d led by node 3: code %d leader %d", version, mp.Partition, mp.ErrorCode, mp.Leader)
			case leader != c.Brokers[2].NodeID && (mp.ErrorCode != want || mp.Leader != -1):
				t.Errorf("v%d partition %d led by node %d: code %d leader %d, want code %d leader -1", version, mp.Partition, leader, mp.ErrorCode, mp.Leader, want)
			}
		}
	}
	cons := newClient(t, internal, alice, kgo.ConsumeTopics("both"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if got := readReplicated(t, cons, 31); len(got) == 0 {
		t.Fatal("nothing read")
	}
}

// newClient is a franz-go client seeded with addrs, closed at test end.
func newClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestInterBrokerSASLSSL: three nodes whose only client listener is
// SASL_SSL (the inter-broker listener; brokers verify each other's
// certificates and host names and authenticate with SCRAM-SHA-512), the
// authorizer on with no ACL at all and the brokers' principal a super
// user (Kafka's usual set-up: replica fetches, WriteTxnMarkers and
// AddPartitionsToTxn between brokers need CLUSTER_ACTION). A replication
// factor 3 topic takes acks=all produce; the leader of a partition stops;
// another replica leads and a consumer reads every acknowledged record.
func TestInterBrokerSASLSSL(t *testing.T) {
	p := genPKI(t)
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3, Settings: map[string]string{
		"listeners":                                             "SASL_SSL://127.0.0.1:0",
		"ssl.keystore.location":                                 p.ServerKeystore,
		"ssl.truststore.location":                               p.CAFile,
		"sasl.enabled.mechanisms":                               "PLAIN,SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol":                  "SCRAM-SHA-512",
		"listener.name.sasl_ssl.plain.sasl.jaas.config":         jaas,
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"authorizer.class.name":                                 "kafka.security.authorizer.AclAuthorizer",
		"super.users":                                           "User:broker;User:admin",
		"offsets.topic.replication.factor":                      "1",
		"transaction.state.log.replication.factor":              "1",
	}, Logger: servertest.TestLogger(t, slog.LevelWarn)})
	tlsOpt := kgo.DialTLSConfig(p.ClientConfig(false))
	admin := kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())
	ctx := ctxT(t)
	adm := kadm.NewClient(newClient(t, c.Addrs(), admin, tlsOpt))
	// The brokers' SCRAM credentials live in the cluster metadata, as
	// Kafka's (created with kafka-configs before the brokers replicate).
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "broker", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "broker-secret"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every node lists three brokers", func() error {
		for _, b := range c.Brokers {
			md := requestOn(t, b.Addr(), &kmsg.MetadataRequest{Version: 12}, admin, tlsOpt).(*kmsg.MetadataResponse)
			if len(md.Brokers) != 3 {
				return fmt.Errorf("node %d lists %d brokers", b.NodeID, len(md.Brokers))
			}
		}
		return nil
	})
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, "secure"); err != nil {
		t.Fatalf("replication factor 3 on SASL_SSL: %v", err)
	}
	prod := newClient(t, c.Addrs(), admin, tlsOpt, kgo.DefaultProduceTopic("secure"), kgo.RequiredAcks(kgo.AllISRAcks()))
	eventually(t, "the ISR is complete", func() error {
		md := requestOn(t, c.Addrs()[0], &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secure")}}}, admin, tlsOpt).(*kmsg.MetadataResponse)
		if isr := md.Topics[0].Partitions[0].ISR; len(isr) != 3 {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
	acked := 0
	for i := range 50 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d: %v", i, err)
		}
		acked++
	}
	md := requestOn(t, c.Addrs()[0], &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secure")}}}, admin, tlsOpt).(*kmsg.MetadataResponse)
	leader := md.Topics[0].Partitions[0].Leader
	li := leaderIndex(c.Brokers, leader)
	c.Brokers[li].Close()
	var rest []string
	for i, b := range c.Brokers {
		if i != li {
			rest = append(rest, b.Addr())
		}
	}
	prod2 := newClient(t, rest, admin, tlsOpt, kgo.DefaultProduceTopic("secure"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 10 {
		pctx, cancel := context.WithTimeout(ctx, 25*time.Second)
		err := prod2.ProduceSync(pctx, &kgo.Record{Value: []byte("after-" + strconv.Itoa(i))}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("acks=all produce after the leader stopped: %v", err)
		}
		acked++
	}
	// The consumer authenticates with SCRAM, as the brokers do.
	cons := newClient(t, rest, tlsOpt, kgo.SASL(scram.Auth{User: "broker", Pass: "broker-secret"}.AsSha512Mechanism()),
		kgo.ConsumeTopics("secure"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	got := readReplicated(t, cons, acked)
	if len(got[0]) != acked {
		t.Fatalf("read %d records, %d acknowledged", len(got[0]), acked)
	}
	for i := range 50 {
		if got[0][i] != strconv.Itoa(i) {
			t.Fatalf("record %d is %q", i, got[0][i])
		}
	}
}
