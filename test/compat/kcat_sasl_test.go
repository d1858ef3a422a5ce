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
	b := startBroker(t, brokerOpts{extra: map[string]string{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`,
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "sasl"); err != nil {
		t.Fatalf("create topic over SASL: %v", err)
	}
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "scram256", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw-256"},
		{User: "scram512", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "pw-512"},
	}); err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
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
