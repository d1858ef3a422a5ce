package server_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/servertest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// secureJAAS are the PLAIN users of the authorization tests.
const secureJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
	`user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";`

// secureSettings is a combined KRaft node (ACLs live in its metadata
// store) with a SASL_PLAINTEXT listener, the authorizer on and admin a
// super user.
func secureSettings(t *testing.T, extra map[string]string) map[string]string {
	port := freePort(t)
	s := map[string]string{
		"node.id":                   "1",
		"process.roles":             "broker,controller",
		"listeners":                 fmt.Sprintf("SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", port),
		"controller.listener.names": "CONTROLLER",
		"controller.quorum.voters":  fmt.Sprintf("1@127.0.0.1:%d", port),
		"sasl.enabled.mechanisms":   "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": secureJAAS,
		"authorizer.class.name":                               "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                                         "User:admin",
	}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

func startSecure(t *testing.T, extra map[string]string) *servertest.Broker {
	t.Helper()
	return servertest.Start(t, servertest.Options{Settings: secureSettings(t, extra),
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)}})
}

// as is a client authenticated as user (PLAIN, password user-secret).
func as(tb *servertest.Broker, user string, opts ...kgo.Opt) *kgo.Client {
	return tb.Client(append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism())}, opts...)...)
}

func adminAs(tb *servertest.Broker, user string) *kadm.Client { return kadm.NewClient(as(tb, user)) }

func mustACL(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctxT(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v", r, r.Err)
		}
	}
}

// A user with READ on topic T and on group G consumes T, is refused
// producing to it, and sees no other topic; a prefixed ACL covers topics
// created later; a DENY beats an ALLOW; the super user bypasses all.
func TestAuthorizationWithFranzGo(t *testing.T) {
	tb := startSecure(t, nil)
	ctx := ctxT(t)
	admin := adminAs(tb, "admin")
	for _, topic := range []string{"t", "secret"} {
		if _, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if err := as(tb, "admin", kgo.DefaultProduceTopic("t")).ProduceSync(ctx, &kgo.Record{Value: []byte("v1")}).FirstErr(); err != nil {
		t.Fatalf("super user produce: %v", err)
	}
	mustACL(t, admin, kadm.NewACLs().Allow("User:alice").Topics("t").Groups("g").Operations(kadm.OpRead))

	// alice consumes t in group g.
	cons := as(tb, "alice", kgo.ConsumeTopics("t"), kgo.ConsumerGroup("g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatalf("alice consume: %v", err)
	}
	if n := fs.NumRecords(); n != 1 {
		t.Fatalf("alice consumed %d records", n)
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commit: %v", err)
	}
	cons.Close()

	// ... but may not produce to it.
	prod := as(tb, "alice", kgo.DefaultProduceTopic("t"), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// ... and sees only t.
	md, err := adminAs(tb, "alice").Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := md.Topics.Names(); !slices.Equal(names, []string{"t"}) {
		t.Errorf("alice sees topics %v, want [t]", names)
	}

	// A prefixed ACL covers a topic created afterwards.
	mustACL(t, admin, kadm.NewACLs().Allow("User:alice").Topics("pre-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpWrite, kadm.OpDescribe))
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "pre-new"); err != nil {
		t.Fatal(err)
	}
	p2 := as(tb, "alice", kgo.DefaultProduceTopic("pre-new"), kgo.DisableIdempotentWrite())
	if err := p2.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("alice produce under the prefixed ACL: %v", err)
	}

	// DENY beats ALLOW.
	mustACL(t, admin, kadm.NewACLs().Deny("User:alice").Topics("pre-new").Operations(kadm.OpWrite))
	p3 := as(tb, "alice", kgo.DefaultProduceTopic("pre-new"), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	if err := p3.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produce after the DENY: %v", err)
	}
	// The super user is not bound by it.
	if err := as(tb, "admin", kgo.DefaultProduceTopic("pre-new")).ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("super user produce: %v", err)
	}

	// The ACLs are listed and deleted with kadm.
	described, err := admin.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range described {
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		n += len(d.Described)
	}
	if n != 5 {
		t.Errorf("described %d ACLs, want 5", n)
	}
	deleted, err := admin.DeleteACLs(ctx, kadm.NewACLs().Deny("User:alice").DenyHosts().Topics("pre-new").Operations(kadm.OpWrite))
	if err != nil || len(deleted) != 1 || len(deleted[0].Deleted) != 1 {
		t.Fatalf("delete: %+v %v", deleted, err)
	}
	if err := p3.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("alice produce after the DENY was deleted: %v", err)
	}
}
