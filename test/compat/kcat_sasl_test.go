package compat

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/sasl"
	"github.com/strata-io/strata/internal/tlstest"
)

// TestKcatSASL runs kcat (librdkafka) against a SASL_PLAINTEXT listener
// with PLAIN (a JAAS user), SCRAM-SHA-256 and SCRAM-SHA-512 (users created
// with kadm's AlterUserSCRAMs): each produces and consumes; a wrong
// password is refused with librdkafka's authentication error.
func TestKcatSASL(t *testing.T) {
	t.Parallel()
	if targetKfake() {
		t.Skip("kfake's SASL is configured differently; this test drives Strata's SASL listener")
	}
	path := requireTool(t, "kcat", "-V")
	b, adm := startSASLBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "sasl"); err != nil {
		t.Fatalf("create topic over SASL: %v", err)
	}
	sasl := func(mech, user, pass string) []string {
		return []string{"-b", b.Addr(), "-t", "sasl", "-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=" + mech,
			"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass}
	}
	var want []string
	for i, c := range [][3]string{{"PLAIN", "admin", "admin-secret"}, {"SCRAM-SHA-256", "scram256", "pw-256"}, {"SCRAM-SHA-512", "scram512", "pw-512"}} {
		var in strings.Builder
		for j := range 20 {
			fmt.Fprintf(&in, "k%d-%d:v\n", i, j)
			want = append(want, fmt.Sprintf("k%d-%d=v", i, j))
		}
		args := append([]string{"-P", "-K:", "-X", "acks=all"}, sasl(c[0], c[1], c[2])...)
		if _, stderr, err := kcatRun(ctx, path, []byte(in.String()), args...); err != nil || strings.Contains(stderr, "Delivery failed") {
			t.Fatalf("kcat %s produce: %v: %s", c[0], err, stderr)
		}
		args = append([]string{"-C", "-o", "beginning", "-e", "-f", `%k=%s\n`}, sasl(c[0], c[1], c[2])...)
		stdout, stderr, err := kcatRun(ctx, path, nil, args...)
		if err != nil {
			t.Fatalf("kcat %s consume: %v: %s", c[0], err, stderr)
		}
		got := strings.Fields(stdout)
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("kcat %s consumed %d records, want %d:\nstderr: %s", c[0], len(got), len(want), stderr)
		}
	}
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		user := map[string]string{"PLAIN": "admin", "SCRAM-SHA-256": "scram256"}[mech]
		args := append([]string{"-L", "-m", "2"}, sasl(mech, user, "wrong")...)
		_, stderr, err := kcatRun(ctx, path, nil, args...)
		if err == nil || !strings.Contains(stderr, "Authentication failed") {
			t.Errorf("kcat %s with a wrong password: err %v, stderr:\n%s", mech, err, stderr)
		}
	}
}

// TestKcatSASLSSL runs kcat with SCRAM-SHA-512 over a SASL_SSL listener
// (the TLS test certificates): produce and consume.
func TestKcatSASLSSL(t *testing.T) {
	t.Parallel()
	if targetKfake() {
		t.Skip("this test drives Strata's SASL_SSL listener")
	}
	path := requireTool(t, "kcat", "-V")
	p, err := tlstest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, brokerOpts{extra: map[string]string{
		"listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.location": p.ServerKeystore,
		"sasl.enabled.mechanisms": "SCRAM-SHA-512",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The first SCRAM user is created over TLS before any user exists: the
	// admin API needs an authenticated connection on a SASL listener, so
	// bootstrap it through the broker's own store.
	if res := b.srv.Server().Broker().AlterScram(nil, []broker.ScramUpsertion{scramUpsert(t, "kc", "kc-secret")}); res["kc"] != nil {
		t.Fatal(res["kc"])
	}
	args := []string{"-b", b.Addr(), "-t", "sasl-ssl", "-X", "security.protocol=sasl_ssl", "-X", "ssl.ca.location=" + p.CAFile,
		"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=kc", "-X", "sasl.password=kc-secret"}
	if _, stderr, err := kcatRun(ctx, path, []byte("a:1\nb:2\n"), append([]string{"-P", "-K:", "-X", "acks=all"}, args...)...); err != nil || strings.Contains(stderr, "Delivery failed") {
		t.Fatalf("kcat SASL_SSL produce: %v: %s", err, stderr)
	}
	stdout, stderr, err := kcatRun(ctx, path, nil, append([]string{"-C", "-o", "beginning", "-c", "2", "-e", "-f", `%k=%s\n`}, args...)...)
	if err != nil || stdout != "a=1\nb=2\n" {
		t.Fatalf("kcat SASL_SSL consume: %q %v: %s", stdout, err, stderr)
	}
}

// scramUpsert salts password for SCRAM-SHA-512 as a client would.
func scramUpsert(t *testing.T, user, password string) broker.ScramUpsertion {
	t.Helper()
	salt := []byte("compat-salt-" + user)
	sp, err := sasl.SaltPassword(sasl.ScramSHA512, password, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return broker.ScramUpsertion{User: user, Mechanism: sasl.ScramSHA512, Iterations: 4096, Salt: salt, SaltedPassword: sp}
}

// saslUsers are the users startSASLBroker sets up: PLAIN from the JAAS
// setting, SCRAM through AlterUserScramCredentials.
var saslUsers = []SASLAuth{
	{"PLAIN", "admin", "admin-secret"},
	{"SCRAM-SHA-256", "scram256", "pw-256"},
	{"SCRAM-SHA-512", "scram512", "pw-512"},
}

// startSASLBroker starts a broker with a SASL_PLAINTEXT listener serving
// PLAIN (JAAS user admin) and SCRAM-SHA-256/512 (users created with kadm's
// AlterUserSCRAMs) and returns it with an admin client logged in as admin.
func startSASLBroker(t *testing.T) (*testBroker, *kadm.Client) {
	t.Helper()
	b := startBroker(t, brokerOpts{extra: map[string]string{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`,
	}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "scram256", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw-256"},
		{User: "scram512", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "pw-512"},
	}); err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
	return b, adm
}
