package server_test

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/servertest"
	"github.com/strata-io/strata/internal/tlstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// mtlsBroker is a combined KRaft node with an SSL listener requiring client
// certificates, the authorizer on, the principals mapped by rules and
// User:CN=admin a super user; it returns the broker, the PKI and the
// admin's certificate.
func mtlsBroker(t *testing.T, rules string) (*servertest.Broker, *tlstest.PKI, *tlstest.ClientCert) {
	t.Helper()
	p := genPKI(t)
	port := freePort(t)
	tb := servertest.Start(t, servertest.Options{Settings: map[string]string{
		"node.id":                     "1",
		"process.roles":               "broker,controller",
		"listeners":                   fmt.Sprintf("SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", port),
		"controller.listener.names":   "CONTROLLER",
		"controller.quorum.voters":    fmt.Sprintf("1@127.0.0.1:%d", port),
		"ssl.keystore.location":       p.ServerKeystore,
		"ssl.truststore.location":     p.CAFile,
		"ssl.client.auth":             "required",
		"ssl.principal.mapping.rules": rules,
		"authorizer.class.name":       "kafka.security.authorizer.AclAuthorizer",
		"super.users":                 "User:CN=admin",
	}})
	admin, err := p.NewClient(pkix.Name{CommonName: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	return tb, p, admin
}

// TestMTLSPrincipals: over mutual TLS the principal is the client
// certificate's distinguished name (RFC 2253) mapped by
// ssl.principal.mapping.rules (Kafka's SslPrincipalMapper): a rule turns
// CN=Alice,OU=Payments,O=Example into User:alice@payments, a subject no
// rule matches falls to DEFAULT (User:CN=bob); ACLs name those principals.
func TestMTLSPrincipals(t *testing.T) {
	tb, p, adminCert := mtlsBroker(t, `RULE:^CN=([^,]+),OU=([^,]+),O=.*$/$1@$2/L,DEFAULT`)
	ctx := ctxT(t)
	client := func(c *tlstest.ClientCert, opts ...kgo.Opt) *kgo.Client {
		return tb.Client(append([]kgo.Opt{kgo.DialTLSConfig(c.TLS)}, opts...)...)
	}
	admin := kadm.NewClient(client(adminCert))
	for _, topic := range []string{"payments", "other"} {
		if _, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatalf("super user (certificate CN=admin) creates %s: %v", topic, err)
		}
	}
	alice, err := p.NewClient(pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"Payments"}, Organization: []string{"Example"}})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := p.NewClient(pkix.Name{CommonName: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	mustACL(t, admin, kadm.NewACLs().Allow("User:alice@payments").Topics("payments").Operations(kadm.OpWrite))

	produce := func(c *tlstest.ClientCert) error {
		cl := client(c, kgo.DefaultProduceTopic("payments"), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
		defer cl.Close()
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	}
	if err := produce(alice); err != nil {
		t.Fatalf("User:alice@payments with WRITE: %v", err)
	}
	if err := produce(bob); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("User:CN=bob without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// bob's principal is his DN unchanged (the DEFAULT rule).
	mustACL(t, admin, kadm.NewACLs().Allow("User:CN=bob").Topics("payments").Operations(kadm.OpWrite))
	if err := produce(bob); err != nil {
		t.Fatalf("User:CN=bob with WRITE: %v", err)
	}
	// alice's Metadata shows only the topic she may describe (WRITE
	// implies DESCRIBE).
	md, err := kadm.NewClient(client(alice)).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := md.Topics.Names(); !slices.Equal(names, []string{"payments"}) {
		t.Errorf("alice sees %v, want [payments]", names)
	}
}

// TestMTLSNoMatchingRule: a certificate no rule maps (no DEFAULT) fails
// authentication, as Kafka's SslPrincipalMapper (NoMatchingRule): the
// connection is closed and the broker keeps serving others.
func TestMTLSNoMatchingRule(t *testing.T) {
	tb, p, adminCert := mtlsBroker(t, `RULE:^CN=(admin)$/$1/`)
	_ = adminCert
	stranger, err := p.NewClient(pkix.Name{CommonName: "stranger", Organization: []string{"Elsewhere"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	cl := tb.Client(kgo.DialTLSConfig(stranger.TLS), kgo.RequestRetries(0))
	if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl); err == nil {
		t.Fatal("a certificate no rule maps was served")
	}
	// User:admin (mapped by the rule) is no super user here (super.users
	// names User:CN=admin) but may still describe the cluster's metadata.
	adm := kadm.NewClient(tb.Client(kgo.DialTLSConfig(adminCert.TLS)))
	if _, err := adm.BrokerMetadata(ctx); err != nil {
		t.Fatalf("mapped client after the refused one: %v", err)
	}
}

// The include_*_authorized_operations fields of Metadata (v8+),
// DescribeGroups (v3+) and DescribeCluster are the operations the
// principal may perform, implied ones included (KIP-430).
func TestAuthorizedOperations(t *testing.T) {
	tb := startSecure(t, nil)
	ctx := ctxT(t)
	admin := adminAs(tb, "admin")
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	mustACL(t, admin, kadm.NewACLs().Allow("User:alice").Topics("t").Groups("g").Operations(kadm.OpRead))
	mustACL(t, admin, kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpAlterConfigs))
	mustACL(t, admin, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpDescribe))

	// Form group g so DescribeGroups has a group to answer for.
	cons := as(tb, "alice", kgo.ConsumeTopics("t"), kgo.ConsumerGroup("g"))
	defer cons.Close()
	alice := as(tb, "alice")
	for deadline := time.Now().Add(20 * time.Second); ; {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"g"}
		req.IncludeAuthorizedOperations = true
		resp, err := req.RequestWith(ctx, alice)
		var g kmsg.DescribeGroupsResponseGroup
		switch {
		case err == nil:
			g = resp.Groups[0]
		case !kerr.IsRetriable(err): // the coordinator may still be loading
			t.Fatal(err)
		}
		if err == nil && g.ErrorCode == 0 && g.State == "Stable" {
			// READ implies DESCRIBE; nothing else on the group.
			want := opsBits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe)
			if g.AuthorizedOperations != want {
				t.Errorf("group authorized operations %b, want %b", g.AuthorizedOperations, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group g never stable: %+v %v", g, err)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = cons.PollFetches(pctx) // join
		cancel()
	}

	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 8
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("t")
	mreq.Topics = append(mreq.Topics, mt)
	mreq.IncludeTopicAuthorizedOperations = true
	mreq.IncludeClusterAuthorizedOperations = true
	// Metadata v8-v10 (a Kafka 2.7 client) carries the cluster's
	// authorized operations; v11 dropped them for DescribeCluster (KIP-700).
	alice27 := as(tb, "alice", kgo.MaxVersions(kversion.V2_7_0()))
	mresp, err := mreq.RequestWith(ctx, alice27)
	if err != nil {
		t.Fatal(err)
	}
	// READ and ALTER_CONFIGS, with DESCRIBE (by READ) and
	// DESCRIBE_CONFIGS (by ALTER_CONFIGS) implied.
	wantTopic := opsBits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationDescribeConfigs)
	if got := mresp.Topics[0].AuthorizedOperations; got != wantTopic {
		t.Errorf("topic authorized operations %b, want %b", got, wantTopic)
	}
	if got, want := mresp.AuthorizedOperations, opsBits(kmsg.ACLOperationDescribe); got != want {
		t.Errorf("cluster authorized operations (Metadata v8) %b, want %b", got, want)
	}
	// Not asked: Kafka answers -2^31 (the field's default).
	mreq.IncludeTopicAuthorizedOperations, mreq.IncludeClusterAuthorizedOperations = false, false
	if mresp, err = mreq.RequestWith(ctx, alice27); err != nil {
		t.Fatal(err)
	}
	if got := mresp.Topics[0].AuthorizedOperations; got != -2147483648 {
		t.Errorf("topic authorized operations not asked for: %d, want -2147483648", got)
	}

	dreq := kmsg.NewPtrDescribeClusterRequest()
	dreq.IncludeClusterAuthorizedOperations = true
	dresp, err := dreq.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dresp.ClusterAuthorizedOperations, opsBits(kmsg.ACLOperationDescribe); got != want {
		t.Errorf("DescribeCluster authorized operations %b, want %b", got, want)
	}
	// The super user may do everything on the cluster.
	dresp, err = dreq.RequestWith(ctx, as(tb, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	all := opsBits(kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe)
	if got := dresp.ClusterAuthorizedOperations; got&all != all {
		t.Errorf("super user's cluster authorized operations %b, want at least %b", got, all)
	}
}

func opsBits(ops ...kmsg.ACLOperation) int32 {
	var b int32
	for _, op := range ops {
		b |= 1 << int(op)
	}
	return b
}

// A controller_mutation_rate quota (KIP-599): CreateTopics v6+ over the
// quota is refused per topic with THROTTLING_QUOTA_EXCEEDED 89 and a
// throttle_time_ms; the request that first exceeds it is still accepted
// (the token bucket may go negative once, as Kafka's
// StrictControllerMutationQuota); older versions are throttled without
// being refused (PermissiveControllerMutationQuota).
func TestControllerMutationQuota(t *testing.T) {
	tb := startSecure(t, map[string]string{"allow.everyone.if.no.acl.found": "true"})
	ctx := ctxT(t)
	admin := adminAs(tb, "admin")
	alice := kadm.ClientQuotaEntityComponent{Type: "user", Name: kadm.StringPtr("alice")}
	if res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{alice},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 1}},
	}}); err != nil || res[0].Err != nil {
		t.Fatalf("alter quotas: %+v %v", res, err)
	}
	// Each request on a fresh connection: a throttled connection is muted
	// for the throttle time, which would refill the bucket meanwhile.
	// (kgo sends the highest version both sides speak: v5 is what a
	// Kafka 2.6 client sends.)
	create := func(version int16, topic string, partitions int32) *kmsg.CreateTopicsResponse {
		var opts []kgo.Opt
		if version < 6 {
			opts = append(opts, kgo.MaxVersions(kversion.V2_6_0()))
		}
		cl := as(tb, "alice", opts...)
		defer cl.Close()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = version
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// 1 partition/s over 11 one-second samples: a burst of up to 11
	// partitions is within the quota; 30 exceed it but are accepted.
	resp := create(6, "big", 30)
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("first creation: %v", kerr.ErrorForCode(code))
	}
	resp = create(6, "refused", 1)
	if code := resp.Topics[0].ErrorCode; code != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("creation over the quota (v6): %v, want THROTTLING_QUOTA_EXCEEDED", kerr.ErrorForCode(code))
	}
	if resp.ThrottleMillis <= 0 {
		t.Errorf("refused creation throttle_time_ms %d", resp.ThrottleMillis)
	}
	// v5 predates KIP-599: the creation goes through, throttled.
	resp = create(5, "permitted", 1)
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("creation over the quota (v5): %v, want success", kerr.ErrorForCode(code))
	}
	if resp.ThrottleMillis <= 0 {
		t.Errorf("v5 creation over the quota: throttle_time_ms %d", resp.ThrottleMillis)
	}
	// The super user has no quota set: not throttled.
	sreq := kmsg.NewPtrCreateTopicsRequest()
	sreq.TimeoutMillis = 5000
	st := kmsg.NewCreateTopicsRequestTopic()
	st.Topic, st.NumPartitions, st.ReplicationFactor = "admins", 30, 1
	sreq.Topics = append(sreq.Topics, st)
	sresp, err := sreq.RequestWith(ctx, as(tb, "admin"))
	if err != nil || sresp.Topics[0].ErrorCode != 0 || sresp.ThrottleMillis != 0 {
		t.Fatalf("admin creation: %+v %v", sresp, err)
	}
}

// A request_percentage quota throttles a client whose requests take more
// than its share of the broker's request handling time: with 0.01 %
// (0.1 ms of handling per second) a client sending Metadata requests is
// throttled within a bounded number of them, and the response says so.
func TestRequestPercentageQuota(t *testing.T) {
	tb := startSecure(t, map[string]string{"allow.everyone.if.no.acl.found": "true"})
	ctx := ctxT(t)
	admin := adminAs(tb, "admin")
	if res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("busy")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0.01}},
	}}); err != nil || res[0].Err != nil {
		t.Fatalf("alter quotas: %+v %v", res, err)
	}
	cl := as(tb, "alice", kgo.ClientID("busy"))
	for i := 0; ; i++ {
		if i == 5000 {
			t.Fatal("5000 Metadata requests at 0.01 % of a thread and never throttled")
		}
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ThrottleMillis > 0 {
			break
		}
	}
	// Another client id of the same user has no such quota.
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, as(tb, "alice", kgo.ClientID("calm")))
	if err != nil || resp.ThrottleMillis != 0 {
		t.Fatalf("client id without a quota: throttle %d, %v", resp.ThrottleMillis, err)
	}
}

// On a PLAINTEXT listener every client is User:ANONYMOUS (Kafka's
// DefaultKafkaPrincipalBuilder): named a super user it may do anything;
// otherwise, with no ACL and allow.everyone.if.no.acl.found=false, it may
// not create a topic.
func TestPlaintextIsAnonymous(t *testing.T) {
	start := func(supers string) *servertest.Broker {
		port := freePort(t)
		return servertest.Start(t, servertest.Options{Settings: map[string]string{
			"node.id":                   "1",
			"process.roles":             "broker,controller",
			"listeners":                 fmt.Sprintf("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", port),
			"controller.listener.names": "CONTROLLER",
			"controller.quorum.voters":  fmt.Sprintf("1@127.0.0.1:%d", port),
			"authorizer.class.name":     "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users":               supers,
		}})
	}
	ctx := ctxT(t)
	if _, err := kadm.NewClient(start("User:ANONYMOUS").Client()).CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatalf("User:ANONYMOUS as a super user: %v", err)
	}
	_, err := kadm.NewClient(start("User:admin").Client()).CreateTopic(ctx, 1, 1, nil, "t")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("User:ANONYMOUS without ACLs creates a topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
