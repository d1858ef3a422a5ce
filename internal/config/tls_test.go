package config

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/tlstest"
)

func genPKI(t *testing.T) *tlstest.PKI {
	t.Helper()
	p, err := tlstest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sslBroker(t *testing.T, p *tlstest.PKI, extra map[string]string) (*Broker, error) {
	t.Helper()
	ovr := map[string]string{"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": p.ServerKeystore}
	for k, v := range extra {
		if v == "-" {
			delete(ovr, k)
			continue
		}
		ovr[k] = v
	}
	return LoadBroker("", nil, ovr)
}

func TestServerTLSValid(t *testing.T) {
	p := genPKI(t)
	b, err := sslBroker(t, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := b.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS13 || cfg.ClientAuth != tls.NoClientCert ||
		len(cfg.Certificates) != 1 || len(cfg.Certificates[0].Certificate) != 2 || cfg.CipherSuites != nil {
		t.Errorf("defaults: %+v", cfg)
	}
	b, err = sslBroker(t, p, map[string]string{
		"ssl.keystore.location": "-", "ssl.keystore.key": p.ServerKeyPEM, "ssl.keystore.certificate.chain": p.ServerChainPEM,
		"ssl.client.auth": "required", "ssl.truststore.certificates": p.CAPEM, "ssl.enabled.protocols": "TLSv1.2",
		"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = b.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.RequireAndVerifyClientCert ||
		cfg.ClientCAs == nil || len(cfg.CipherSuites) != 2 || cfg.CipherSuites[0] != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 {
		t.Errorf("explicit: %+v", cfg)
	}
	b, err = sslBroker(t, p, map[string]string{"ssl.client.auth": "requested", "ssl.truststore.location": p.CAFile, "ssl.enabled.protocols": "TLSv1.3"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = b.ServerTLS(); err != nil || cfg.ClientAuth != tls.VerifyClientCertIfGiven || cfg.MinVersion != tls.VersionTLS13 {
		t.Errorf("requested: %+v %v", cfg, err)
	}
	if cfg, err := DefaultBroker().ServerTLS(); cfg != nil || err != nil {
		t.Errorf("PLAINTEXT: %v %v", cfg, err)
	}
}

// TestTLSSettingsRejected checks that every TLS setting Strata cannot
// honour stops startup with a message naming the setting and the value.
func TestTLSSettingsRejected(t *testing.T) {
	p := genPKI(t)
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cliKey, _ := os.ReadFile(p.ClientKeyFile)
	encrypted := string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}})) + p.ServerChainPEM
	legacy := "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00112233445566778899AABBCCDDEEFF\n\nAAAA\n-----END EC PRIVATE KEY-----\n" + p.ServerChainPEM
	cases := []struct {
		name  string
		extra map[string]string
		want  string // in the LoadBroker or ServerTLS error
	}{
		{"jks keystore", map[string]string{"ssl.keystore.type": "JKS"}, `invalid value "JKS" for configuration ssl.keystore.type: only PEM keystores are supported (JKS and PKCS12 are not)`},
		{"pkcs12 truststore", map[string]string{"ssl.truststore.type": "PKCS12"}, `invalid value "PKCS12" for configuration ssl.truststore.type: only PEM truststores are supported`},
		{"key password", map[string]string{"ssl.key.password": "secret"}, `invalid value "[hidden]" for configuration ssl.key.password: encrypted private keys are not supported`},
		{"encrypted pkcs8 key", map[string]string{"ssl.keystore.location": write("enc.pem", encrypted)}, "the private key is encrypted, which is not supported"},
		{"encrypted legacy key", map[string]string{"ssl.keystore.location": write("legacy.pem", legacy)}, "the private key is encrypted, which is not supported"},
		{"missing keystore", map[string]string{"ssl.keystore.location": filepath.Join(dir, "nope.pem")}, "ssl.keystore.location: cannot read key store: open " + filepath.Join(dir, "nope.pem")},
		{"missing truststore", map[string]string{"ssl.client.auth": "required", "ssl.truststore.location": filepath.Join(dir, "ca-nope.pem")}, "ssl.truststore.location: cannot read trust store: open "},
		{"empty truststore", map[string]string{"ssl.client.auth": "required", "ssl.truststore.location": write("empty.pem", "nothing\n")}, "no PEM CERTIFICATE block found"},
		{"no key", map[string]string{"ssl.keystore.location": p.CAFile}, "no PEM PRIVATE KEY block found"},
		{"no certificate", map[string]string{"ssl.keystore.location": p.ClientKeyFile}, "no PEM CERTIFICATE block found"},
		{"mismatched key", map[string]string{"ssl.keystore.location": "-", "ssl.keystore.key": string(cliKey), "ssl.keystore.certificate.chain": p.ServerChainPEM}, "invalid key store: tls: private key does not match public key"},
		{"old protocol", map[string]string{"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, `invalid value "TLSv1.1,TLSv1.2" for configuration ssl.enabled.protocols: "TLSv1.1" is not one of TLSv1.2, TLSv1.3`},
		{"unknown cipher", map[string]string{"ssl.cipher.suites": "TLS_FOO_WITH_BAR"}, `invalid value "TLS_FOO_WITH_BAR" for configuration ssl.cipher.suites: unknown cipher suite "TLS_FOO_WITH_BAR"`},
		{"tls13 cipher", map[string]string{"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "TLS_AES_128_GCM_SHA256 is a TLS 1.3 suite"},
		{"insecure cipher", map[string]string{"ssl.cipher.suites": "TLS_RSA_WITH_RC4_128_SHA"}, "is an insecure cipher suite"},
		{"ciphers unused", map[string]string{"ssl.enabled.protocols": "TLSv1.3", "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, "ssl.cipher.suites applies to TLS 1.2 only"},
		{"suites unusable with the key", map[string]string{"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "no suite can be used with the key store's ECDSA key"},
		{"client auth value", map[string]string{"ssl.client.auth": "yes"}, `invalid value "yes" for configuration ssl.client.auth: must be one of none, requested, required`},
		{"no keystore", map[string]string{"ssl.keystore.location": "-"}, "listeners (SSL://127.0.0.1:0) uses TLS but no key store is set"},
		{"two keystores", map[string]string{"ssl.keystore.key": p.ServerKeyPEM}, "set either ssl.keystore.location or ssl.keystore.key"},
		{"half inline", map[string]string{"ssl.keystore.location": "-", "ssl.keystore.key": p.ServerKeyPEM}, "must be set together"},
		{"auth without truststore", map[string]string{"ssl.client.auth": "required"}, "ssl.client.auth=required needs a trust store"},
		{"truststore unused", map[string]string{"ssl.truststore.location": p.CAFile}, "a trust store is set but ssl.client.auth=none"},
		{"advertised plaintext", map[string]string{"advertised.listeners": "PLAINTEXT://h:9092"}, "advertised.listeners names listener PLAINTEXT, which is not in listeners (SSL://127.0.0.1:0)"},
		{"plaintext with ssl", map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0"}, "ssl.keystore.location is set but no listener in listeners (PLAINTEXT://127.0.0.1:0) is SSL or SASL_SSL"},
		{"sasl listener", map[string]string{"listeners": "SASL_SSL://127.0.0.1:0"}, "GSSAPI (Kafka's default) is not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := sslBroker(t, p, c.extra)
			if err == nil {
				_, err = b.ServerTLS()
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want it to contain %q", err, c.want)
			}
		})
	}
}
