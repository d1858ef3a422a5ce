package server_test

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/servertest"
	"github.com/strata-io/strata/internal/tlstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func genPKI(t *testing.T) *tlstest.PKI {
	t.Helper()
	p, err := tlstest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// apiVersionsRoundTrip sends an ApiVersions v0 request on c and reads the
// answer's frame; an error means the broker closed or refused the
// connection.
func apiVersionsRoundTrip(c net.Conn) error {
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff} // size, key 18, v0, corr 7, null client id
	if _, err := c.Write(req); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	if corr := binary.BigEndian.Uint32(body); corr != 7 {
		return fmt.Errorf("correlation id %d", corr)
	}
	return nil
}

// produceConsumeTLS creates a topic, produces n records and reads them back
// over TLS with franz-go.
func produceConsumeTLS(t *testing.T, tb *servertest.Broker, cfg *tls.Config, topic string, n int) {
	t.Helper()
	ctx := ctxT(t)
	adm := kadm.NewClient(tb.Client(kgo.DialTLSConfig(cfg)))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatalf("create topic over TLS: %v", err)
	}
	cl := tb.Client(kgo.DialTLSConfig(cfg), kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{'v'}, 1000)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce over TLS: %v", err)
	}
	got := consumeAll(t, tb, topic, n, kgo.DialTLSConfig(cfg), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if len(got) != n {
		t.Fatalf("consumed %d of %d records", len(got), n)
	}
	for _, r := range got {
		if len(r.Value) != 1000 {
			t.Fatalf("record %s/%d at %d: %d value bytes", r.Topic, r.Partition, r.Offset, len(r.Value))
		}
	}
}

// TestTLSListener serves an SSL listener (inline PEM key store): franz-go
// creates a topic, produces and consumes through the copy path (no
// sendfile on TLS); the private key is not readable with DescribeConfigs.
func TestTLSListener(t *testing.T) {
	p := genPKI(t)
	tb := startBroker(t, "", map[string]string{
		"listeners":                      "SSL://127.0.0.1:0",
		"ssl.keystore.key":               p.ServerKeyPEM,
		"ssl.keystore.certificate.chain": p.ServerChainPEM,
	})
	produceConsumeTLS(t, tb, p.ClientConfig(false), "tls", 200)
	if calls, _ := tb.Server().Protocol().SendfileCalls(); calls != 0 {
		t.Errorf("sendfile used on a TLS connection: %d calls", calls)
	}
	adm := kadm.NewClient(tb.Client(kgo.DialTLSConfig(p.ClientConfig(false))))
	rcs, err := adm.DescribeBrokerConfigs(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "ssl.keystore.key" || c.Key == "ssl.keystore.certificate.chain" {
				found = true
				if c.Value != nil || !c.Sensitive {
					t.Errorf("%s described with value %v, sensitive %v", c.Key, c.Value, c.Sensitive)
				}
			}
		}
	}
	if !found {
		t.Error("ssl.keystore.key not described")
	}
}

// TestTLSBadClientsClosedAlone checks that a plaintext client and a client
// that does not trust the broker's CA each lose only their own connection,
// with a log line, while a TLS client keeps working.
func TestTLSBadClientsClosedAlone(t *testing.T) {
	p := genPKI(t)
	logs := &syncBuffer{}
	tb := startBrokerLog(t, "", map[string]string{"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": p.ServerKeystore}, logs)
	good, err := tls.Dial("tcp", tb.Addr(), p.ClientConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if err := apiVersionsRoundTrip(good); err != nil {
		t.Fatalf("TLS client: %v", err)
	}

	plain, err := net.Dial("tcp", tb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_ = plain.SetDeadline(time.Now().Add(20 * time.Second)) // a hang fails instead of blocking the package
	if err := apiVersionsRoundTrip(plain); err == nil {
		t.Fatal("plaintext client got an answer from the SSL listener")
	}
	if !strings.Contains(logs.String(), "closing connection: TLS handshake failed") {
		t.Errorf("no log line for the plaintext client:\n%s", logs.String())
	}

	if _, err := tls.Dial("tcp", tb.Addr(), &tls.Config{ServerName: "127.0.0.1"}); err == nil {
		t.Error("a client not trusting the test CA completed the handshake")
	}

	if err := apiVersionsRoundTrip(good); err != nil {
		t.Fatalf("TLS client after the bad clients: %v", err)
	}
	produceConsumeTLS(t, tb, p.ClientConfig(false), "after-bad", 10)
}

// TestTLSClientAuth checks ssl.client.auth: required refuses a client
// without a certificate and serves one with; requested serves both.
func TestTLSClientAuth(t *testing.T) {
	p := genPKI(t)
	logs := &syncBuffer{}
	tb := startBrokerLog(t, "", map[string]string{
		"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": p.ServerKeystore,
		"ssl.client.auth": "required", "ssl.truststore.location": p.CAFile,
	}, logs)
	anon, err := tls.Dial("tcp", tb.Addr(), p.ClientConfig(false))
	if err == nil { // TLS 1.3: the refusal arrives after the client's side of the handshake
		defer anon.Close()
		_ = anon.SetDeadline(time.Now().Add(20 * time.Second))
		err = apiVersionsRoundTrip(anon)
	}
	if err == nil {
		t.Fatal("client without a certificate was served with ssl.client.auth=required")
	}
	// The refusal alert reaches the client before the broker logs it: wait.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), "TLS handshake failed"); {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the refused client:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	produceConsumeTLS(t, tb, p.ClientConfig(true), "mtls", 20)

	tb2 := startBroker(t, "", map[string]string{
		"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": p.ServerKeystore,
		"ssl.client.auth": "requested", "ssl.truststore.certificates": p.CAPEM,
	})
	for _, withCert := range []bool{false, true} {
		c, err := tls.Dial("tcp", tb2.Addr(), p.ClientConfig(withCert))
		if err != nil {
			t.Fatalf("requested, client cert %v: %v", withCert, err)
		}
		if err := apiVersionsRoundTrip(c); err != nil {
			t.Errorf("requested, client cert %v: %v", withCert, err)
		}
		c.Close()
	}
}
