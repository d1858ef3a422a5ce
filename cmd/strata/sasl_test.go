package main

import (
	"maps"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/servertest"
)

// startSASLBroker runs an in-process Strata broker with a SASL_PLAINTEXT
// listener: PLAIN user admin, SCRAM-SHA-256 and SCRAM-SHA-512 enabled.
func startSASLBroker(t *testing.T) string {
	t.Helper()
	return startSASLBrokerWith(t, map[string]string{
		"log.dirs":                t.TempDir(),
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`,
	})
}

// startSASLBrokerWith runs a SASL_PLAINTEXT broker with extra settings.
func startSASLBrokerWith(t *testing.T, extra map[string]string) string {
	t.Helper()
	return startTestBroker(t, "SASL_PLAINTEXT://127.0.0.1:0", extra)
}

// startTestBroker runs an in-process Strata broker (servertest) on
// listener with extra settings; it stops when the test ends.
func startTestBroker(t *testing.T, listener string, extra map[string]string) string {
	t.Helper()
	settings := map[string]string{"listeners": listener}
	maps.Copy(settings, extra)
	return servertest.Start(t, servertest.Options{Settings: settings}).Addr()
}

// TestSASLFlags drives the client commands against a SASL_PLAINTEXT
// broker: the PLAIN admin creates a SCRAM user with `user scram set`, that
// user produces, consumes and benchmarks; wrong passwords and bad flags
// are refused; `serve` rejects a SASL listener without mechanisms.
func TestSASLFlags(t *testing.T) {
	bin := buildStrata(t)
	addr := startSASLBroker(t)
	b := "--brokers=" + addr
	admin := []string{b, "--sasl-mechanism", "PLAIN", "--sasl-user", "admin", "--sasl-password", "admin-secret"}
	bob := []string{b, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "bob", "--sasl-password", "bob-secret"}
	with := func(auth []string, args ...string) []string { return append(args, auth...) }

	if out := ok(t, bin, "", with(admin, "user", "scram", "set", "bob", "--mechanism", "SCRAM-SHA-512", "--password", "bob-secret", "--iterations", "8192")...); out != "SCRAM-SHA-512 credential of \"bob\" set (8192 iterations)\n" {
		t.Errorf("user scram set: %q", out)
	}
	if out := ok(t, bin, "", with(admin, "user", "scram", "list")...); !strings.Contains(out, "bob") || !strings.Contains(out, "SCRAM-SHA-512") || !strings.Contains(out, "8192") {
		t.Errorf("user scram list:\n%s", out)
	}
	ok(t, bin, "", with(bob, "topic", "create", "secure", "--partitions", "1")...)
	ok(t, bin, "a:1\nb:2\n", with(bob, "produce", "secure", "-K:")...)
	if out := ok(t, bin, "", with(bob, "consume", "secure", "-e", "-f", `%k=%s\n`)...); out != "a=1\nb=2\n" {
		t.Errorf("consume over SASL: %q", out)
	}
	if out := ok(t, bin, "", with(bob, "bench", "e2e", "-t", "sasl-bench", "-n", "100", "-s", "64", "-q")...); !strings.HasPrefix(out, "e2e sasl-bench: 100 records") {
		t.Errorf("bench over SASL: %q", out)
	}

	r := run(t, bin, "", "topic", "list", b, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "bob", "--sasl-password", "wrong", "--timeout", "2s")
	if r.code != 1 || !strings.Contains(r.stderr, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("wrong password: %+v", r)
	}
	r = run(t, bin, "", "topic", "list", b, "--timeout", "2s")
	if r.code != 1 {
		t.Errorf("no SASL against a SASL listener: %+v", r)
	}
	fails(t, bin, "strata: --sasl-user needs --sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)\n", "topic", "list", b, "--sasl-user", "bob")
	fails(t, bin, "strata: --sasl-mechanism PLAIN needs --sasl-user and --sasl-password (or env STRATA_SASL_PASSWORD)\n", "topic", "list", b, "--sasl-mechanism", "PLAIN", "--sasl-user", "bob")
	fails(t, bin, "strata: --sasl-mechanism \"GSSAPI\": must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512\n", "topic", "list", b, "--sasl-mechanism", "GSSAPI", "--sasl-user", "bob", "--sasl-password", "x")
	fails(t, bin, "strata: --mechanism \"SCRAM-SHA-1\": must be SCRAM-SHA-256 or SCRAM-SHA-512\n", with(admin, "user", "scram", "set", "carol", "--mechanism", "SCRAM-SHA-1", "--password", "x")...)
	r = run(t, bin, "", with(admin, "user", "scram", "set", "carol", "--password", "x", "--iterations", "100")...)
	if r.code != 1 || !strings.Contains(r.stderr, "iterations 100 is outside the allowed 4096 to 16384 range") { // kadm checks before sending
		t.Errorf("too few iterations: %+v", r)
	}

	if out := ok(t, bin, "", with(admin, "user", "scram", "delete", "bob", "--mechanism", "SCRAM-SHA-512")...); out != "SCRAM-SHA-512 credential of \"bob\" deleted\n" {
		t.Errorf("user scram delete: %q", out)
	}
	if out := ok(t, bin, "", with(admin, "user", "scram", "list", "-o", "json")...); strings.TrimSpace(out) != "[]" {
		t.Errorf("user scram list after delete: %q", out)
	}

	dir := t.TempDir()
	fails(t, bin, "strata: invalid value \"GSSAPI\" for configuration sasl.enabled.mechanisms: GSSAPI (Kafka's default) is not supported (Strata has no Kerberos): set sasl.enabled.mechanisms to a subset of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512\n",
		"serve", "--log.dirs", dir, "--strata.metrics.listener", "", "--listeners", "SASL_PLAINTEXT://127.0.0.1:0")
}

// TestScramOfflineBootstrap creates the first user of a SCRAM-only
// listener in a stopped broker's log dir (`user scram set --log.dirs`),
// then that user administers the running broker; the offline command
// refuses a log dir a running broker holds.
func TestScramOfflineBootstrap(t *testing.T) {
	bin := buildStrata(t)
	dir := t.TempDir()
	if out := ok(t, bin, "", "user", "scram", "set", "root", "--mechanism", "SCRAM-SHA-512", "--password", "root-secret", "--log.dirs", dir); out != "SCRAM-SHA-512 credential of \"root\" set (4096 iterations) in "+dir+"\n" {
		t.Errorf("offline set: %q", out)
	}
	addr := startSASLBrokerWith(t, map[string]string{"log.dirs": dir, "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
	root := []string{"--brokers=" + addr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "root", "--sasl-password", "root-secret"}
	ok(t, bin, "", append([]string{"user", "scram", "set", "app", "--mechanism", "SCRAM-SHA-512", "--password", "app-secret"}, root...)...)
	if out := ok(t, bin, "", append([]string{"user", "scram", "list"}, root...)...); !strings.Contains(out, "app") || !strings.Contains(out, "root") {
		t.Errorf("list after bootstrap:\n%s", out)
	}
	r := run(t, bin, "", "user", "scram", "set", "x", "--password", "x", "--log.dirs", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "is another broker using it?") {
		t.Errorf("offline set on a running broker's dir: %+v", r)
	}
}

// TestScramOfflineUserDeletedStaysDeleted: on the cluster path (zero
// configuration, as `strata serve` runs), users bootstrapped offline with
// `user scram set --log.dirs` are moved into the cluster metadata at
// start; one deleted through the cluster afterwards stays deleted across
// a restart (before, the local file was adopted again at every start and
// the deleted user's password worked again), and a user bootstrapped
// offline later is still adopted.
func TestScramOfflineUserDeletedStaysDeleted(t *testing.T) {
	bin := buildStrata(t)
	dir := t.TempDir()
	for _, u := range []string{"root", "temp"} {
		ok(t, bin, "", "user", "scram", "set", u, "--mechanism", "SCRAM-SHA-512", "--password", u+"-secret", "--log.dirs", dir)
	}
	b := servertest.Start(t, servertest.Options{Dir: dir, OneNodeCluster: true, Settings: map[string]string{
		"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512"}})
	as := func(user string) []string {
		return []string{"--brokers=" + b.Addr(), "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", user, "--sasl-password", user + "-secret", "--timeout", "5s"}
	}
	ok(t, bin, "", append([]string{"user", "scram", "delete", "temp", "--mechanism", "SCRAM-SHA-512"}, as("root")...)...)
	b.Restart()
	if out := ok(t, bin, "", append([]string{"user", "scram", "list", "-o", "json"}, as("root")...)...); strings.Contains(out, "temp") {
		t.Errorf("the deleted user is back after a restart:\n%s", out)
	}
	if r := run(t, bin, "", append([]string{"topic", "list"}, as("temp")...)...); r.code == 0 || !strings.Contains(r.stderr, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("the deleted user authenticates after a restart: %+v", r)
	}
	b.Close()
	ok(t, bin, "", "user", "scram", "set", "late", "--mechanism", "SCRAM-SHA-512", "--password", "late-secret", "--log.dirs", dir)
	b.Open()
	ok(t, bin, "", append([]string{"topic", "list"}, as("late")...)...)
}
