package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/tlstest"
)

// startTLSBroker runs an in-process Strata broker with an SSL listener
// that requires a client certificate signed by p's CA.
func startTLSBroker(t *testing.T, p *tlstest.PKI) string {
	t.Helper()
	return startTestBroker(t, "SSL://127.0.0.1:0", map[string]string{
		"ssl.keystore.location": p.ServerKeystore, "ssl.client.auth": "required", "ssl.truststore.location": p.CAFile,
	})
}

// TestTLSFlags drives the client commands against a broker whose SSL
// listener requires mutual TLS, and checks the flag errors and the
// startup errors of `strata serve` with bad TLS settings.
func TestTLSFlags(t *testing.T) {
	bin := buildStrata(t)
	p, err := tlstest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr := startTLSBroker(t, p)
	b := "--brokers=" + addr
	mtls := []string{b, "--tls", "--tls-ca", p.CAFile, "--tls-cert", p.ClientCertFile, "--tls-key", p.ClientKeyFile}
	with := func(args ...string) []string { return append(args, mtls...) }

	ok(t, bin, "", with("topic", "create", "secure", "--partitions", "2")...)
	if out := ok(t, bin, "", with("topic", "list")...); !strings.Contains(out, "secure") {
		t.Errorf("topic list over TLS: %q", out)
	}
	ok(t, bin, "a:1\nb:2\n", with("produce", "secure", "-K:", "--partition", "1")...)
	if out := ok(t, bin, "", with("consume", "secure", "-e", "-f", `%k=%s\n`)...); out != "a=1\nb=2\n" {
		t.Errorf("consume over TLS: %q", out)
	}
	if out := ok(t, bin, "", with("consume", "secure", "-g", "tls-group", "-e")...); out != "1\n2\n" {
		t.Errorf("group consume over TLS: %q", out)
	}
	if out := ok(t, bin, "", with("group", "describe", "tls-group")...); !strings.Contains(out, "Total lag: 0") {
		t.Errorf("group describe over TLS:\n%s", out)
	}
	if out := ok(t, bin, "", with("bench", "e2e", "-t", "tls-bench", "-n", "100", "-s", "64", "-q")...); !strings.HasPrefix(out, "e2e tls-bench: 100 records") {
		t.Errorf("bench over TLS: %q", out)
	}

	// Without a client certificate the broker refuses the connection.
	r := run(t, bin, "", "topic", "list", b, "--tls-ca", p.CAFile, "--timeout", "2s")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "strata: cannot reach broker at "+addr) {
		t.Errorf("no client certificate: %+v", r)
	}
	fails(t, bin, "strata: --tls-cert needs --tls-key\n", "topic", "list", b, "--tls-cert", p.ClientCertFile)
	fails(t, bin, "strata: --tls-key needs --tls-cert\n", "bench", "produce", "-n", "1", b, "--tls-key", p.ClientKeyFile)
	missing := filepath.Join(t.TempDir(), "nope.pem")
	fails(t, bin, "strata: --tls-ca: open "+missing+": no such file or directory\n", "topic", "list", b, "--tls-ca", missing)
	fails(t, bin, "strata: --tls-ca: no PEM certificate in "+p.ClientKeyFile+"\n", "topic", "list", b, "--tls-ca", p.ClientKeyFile)

	// `strata serve` refuses TLS settings it cannot honour, before binding.
	dir := t.TempDir()
	fails(t, bin, "strata: invalid configuration: listeners (SSL://127.0.0.1:0) uses TLS but no key store is set: set ssl.keystore.location (a PEM file with the private key and certificate chain) or ssl.keystore.key and ssl.keystore.certificate.chain\n",
		"serve", "--log.dirs", dir, "--strata.metrics.listener", "", "--listeners", "SSL://127.0.0.1:0")
	fails(t, bin, "strata: invalid value \"JKS\" for configuration ssl.keystore.type: only PEM keystores are supported (JKS and PKCS12 are not): convert the keystore to PEM (allowed: PEM)\n",
		"serve", "--log.dirs", dir, "--strata.metrics.listener", "", "--listeners", "SSL://127.0.0.1:0", "--ssl.keystore.type", "JKS")
	r = run(t, bin, "", "serve", "--log.dirs", dir, "--strata.metrics.listener", "", "--listeners", "SSL://127.0.0.1:0", "--ssl.keystore.location", missing)
	if r.code != 1 || !strings.Contains(r.stderr, "ssl.keystore.location: cannot read key store: open "+missing) {
		t.Errorf("serve with a missing key store: %+v", r)
	}
}
