package server_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/internal/servertest"
)

// TestClusterScramCredentials: SCRAM credentials live in the cluster
// metadata. A user created through one broker authenticates on every
// broker; a broker that was down when a user was created (and another
// deleted) authenticates the new one and refuses the deleted one when it
// returns; DescribeUserScramCredentials through any broker lists them.
func TestClusterScramCredentials(t *testing.T) {
	c := startCluster(t, 3, map[string]string{
		// The listener named PLAINTEXT is SASL: its JAAS entry is keyed by
		// the listener name (Kafka's listener.name.<name>. prefix).
		"listener.security.protocol.map":                 "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":                        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.plaintext.plain.sasl.jaas.config": saslJAAS,
	})
	ctx := ctxT(t)
	alice := plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()
	adm := kadm.NewClient(c.Brokers[0].Client(kgo.SASL(alice)))
	upsert := func(user, pass string) {
		t.Helper()
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pass}})
		if err != nil || res.Error() != nil {
			t.Fatalf("AlterUserSCRAMs %s: %v %+v", user, err, res)
		}
	}
	authOK := func(b *servertest.Broker, mech sasl.Mechanism) {
		t.Helper()
		eventually(t, "authenticate on broker", func() error {
			cl := b.Client(kgo.SASL(mech), kgo.RetryTimeout(time.Second))
			defer cl.Close()
			_, err := kadm.NewClient(cl).ListTopics(ctx)
			return err
		})
	}
	authFails := func(b *servertest.Broker, mech sasl.Mechanism) {
		t.Helper()
		cl := b.Client(kgo.SASL(mech), kgo.RetryTimeout(time.Second))
		defer cl.Close()
		if _, err := kadm.NewClient(cl).ListTopics(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("broker %d: %v, want SASL_AUTHENTICATION_FAILED", b.NodeID, err)
		}
	}
	bob := scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()
	upsert("bob", "bob-secret")
	for _, b := range c.Brokers {
		authOK(b, bob)
	}

	b3 := c.Brokers[2]
	b3.Close()
	upsert("carl", "carl-secret")
	if _, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha256}}, nil); err != nil {
		t.Fatal(err)
	}
	b3.Open()
	carl := scram.Auth{User: "carl", Pass: "carl-secret"}.AsSha256Mechanism()
	authOK(b3, carl)
	authFails(b3, bob)
	d, err := kadm.NewClient(b3.Client(kgo.SASL(carl))).DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d["carl"]; !ok || len(d) != 1 {
		t.Fatalf("described through the returned broker: %+v", d)
	}
}
