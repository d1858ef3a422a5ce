package server_test

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/servertest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const saslJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_carol="carol-secret";`

// saslOverrides configures a SASL_PLAINTEXT listener with PLAIN and both
// SCRAM mechanisms.
func saslOverrides() map[string]string {
	return map[string]string{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": saslJAAS,
	}
}

// roundTrip creates topic (if new), produces n records and reads them
// back with a client authenticating with mech.
func roundTrip(t *testing.T, tb *servertest.Broker, mech sasl.Mechanism, topic string, n int, extra ...kgo.Opt) {
	t.Helper()
	ctx := ctxT(t)
	opts := append([]kgo.Opt{kgo.SASL(mech)}, extra...)
	adm := kadm.NewClient(tb.Client(opts...))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("%s: create topic: %v", mech.Name(), err)
	}
	cl := tb.Client(append(opts, kgo.DefaultProduceTopic(topic))...)
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Value: []byte{byte(i)}})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("%s: produce: %v", mech.Name(), err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := end[topic][0].Offset
	got := consumeAll(t, tb, topic, int(want), append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if int64(len(got)) != want {
		t.Fatalf("%s: consumed %d of %d", mech.Name(), len(got), want)
	}
}

// authFails checks that mech is refused with SASL_AUTHENTICATION_FAILED.
func authFails(t *testing.T, tb *servertest.Broker, mech sasl.Mechanism, extra ...kgo.Opt) {
	t.Helper()
	cl := tb.Client(append([]kgo.Opt{kgo.SASL(mech), kgo.RetryTimeout(time.Second)}, extra...)...)
	_, err := kadm.NewClient(cl).ListTopics(ctxT(t))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("%s with a wrong password: got %v, want SASL_AUTHENTICATION_FAILED", mech.Name(), err)
	}
}

// TestSASLPlainAndScram serves PLAIN and SCRAM on a SASL_PLAINTEXT
// listener: a PLAIN user creates SCRAM users through kadm, they
// authenticate with both SHA-256 and SHA-512, wrong passwords are refused
// while others keep working, and credentials survive a restart.
func TestSASLPlainAndScram(t *testing.T) {
	logs := &syncBuffer{}
	tb := startBrokerLog(t, "", saslOverrides(), logs)
	alice := plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()
	roundTrip(t, tb, alice, "sasl", 10)

	adm := kadm.NewClient(tb.Client(kgo.SASL(alice)))
	res, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "bob-512"},
		{User: "dave", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "dave-secret"},
	})
	if err != nil || res.AllFailed() || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %+v", err, res)
	}
	bob256 := scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()
	bob512 := scram.Auth{User: "bob", Pass: "bob-512"}.AsSha512Mechanism()
	roundTrip(t, tb, bob256, "sasl", 10)
	roundTrip(t, tb, bob512, "sasl", 10)

	authFails(t, tb, plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism())
	authFails(t, tb, plain.Auth{User: "nobody", Pass: "x"}.AsMechanism())
	authFails(t, tb, scram.Auth{User: "bob", Pass: "wrong"}.AsSha256Mechanism())
	authFails(t, tb, scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()) // the 256 password
	authFails(t, tb, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())
	if !strings.Contains(logs.String(), "SASL authentication failed") {
		t.Error("no log line for a failed authentication")
	}
	roundTrip(t, tb, alice, "sasl", 5) // the broker keeps serving

	d, err := adm.DescribeUserSCRAMs(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if b := d["bob"]; len(b.CredInfos) != 2 || b.CredInfos[0].Iterations != 4096 || b.CredInfos[1].Iterations != 8192 || len(d) != 2 {
		t.Errorf("described %+v", d)
	}
	if _, err := adm.AlterUserSCRAMs(ctxT(t), []kadm.DeleteSCRAM{{User: "dave", Mechanism: kadm.ScramSha256}}, nil); err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeBrokerConfigs(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	jaasSeen := false
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "listener.name.sasl_plaintext.plain.sasl.jaas.config" {
				jaasSeen = true
				if c.Value != nil || !c.Sensitive {
					t.Errorf("JAAS setting described with value %v, sensitive %v", c.Value, c.Sensitive)
				}
			}
		}
	}
	if !jaasSeen {
		t.Error("JAAS setting not described")
	}

	tb.Restart()
	roundTrip(t, tb, bob256, "sasl", 3)
	roundTrip(t, tb, bob512, "sasl", 3)
	authFails(t, tb, scram.Auth{User: "dave", Pass: "dave-secret"}.AsSha256Mechanism())
}

// TestScramAdminErrors checks Kafka's per-user errors of
// AlterUserScramCredentials and DescribeUserScramCredentials, on a
// PLAINTEXT listener (served there as by Kafka without an authorizer).
func TestScramAdminErrors(t *testing.T) {
	tb := startBroker(t, "", nil)
	cl := tb.Client()
	ctx := ctxT(t)
	up := func(user string, mech int8, iters int32, salt []byte) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, mech, iters, salt, []byte("0123456789abcdef0123456789abcdef")
		return u
	}
	del := func(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = user, mech
		return d
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("gone", 1), del("twice", 1)}
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("ok", 1, 4096, []byte("salt")), up("few", 1, 4095, []byte("salt")), up("many", 2, 16385, []byte("salt")),
		up("mech", 3, 4096, []byte("salt")), up("nosalt", 1, 4096, nil), up("twice", 1, 4096, []byte("salt")), up("", 1, 4096, []byte("s")),
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{
		"gone": kerr.ResourceNotFound.Code, "twice": kerr.DuplicateResource.Code, "ok": 0,
		"few": kerr.UnacceptableCredential.Code, "many": kerr.UnacceptableCredential.Code, "mech": kerr.UnsupportedSaslMechanism.Code,
		"nosalt": kerr.UnacceptableCredential.Code, "": kerr.UnacceptableCredential.Code,
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(resp.Results), len(want))
	}
	for _, r := range resp.Results {
		if r.ErrorCode != want[r.User] || (r.ErrorCode != 0) != (r.ErrorMessage != nil) {
			t.Errorf("user %q: code %d (%v), want %d", r.User, r.ErrorCode, r.ErrorMessage, want[r.User])
		}
	}
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"ok", "nobody", "ok2", "ok2"} {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		dreq.Users = append(dreq.Users, ru)
	}
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Results) != 3 || dresp.Results[0].ErrorCode != 0 || len(dresp.Results[0].CredentialInfos) != 1 ||
		dresp.Results[0].CredentialInfos[0].Mechanism != 1 || dresp.Results[0].CredentialInfos[0].Iterations != 4096 ||
		dresp.Results[1].ErrorCode != kerr.ResourceNotFound.Code || dresp.Results[2].ErrorCode != kerr.DuplicateResource.Code {
		t.Errorf("describe: %+v", dresp.Results)
	}
	keys := apiKeys(t, cl)
	if !slices.Contains(keys, 50) || !slices.Contains(keys, 51) || slices.Contains(keys, 17) || slices.Contains(keys, 36) {
		t.Errorf("PLAINTEXT listener advertises %v", keys)
	}
}

// apiKeys returns the keys ApiVersions advertises.
func apiKeys(t *testing.T, cl *kgo.Client) []int16 {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	var out []int16
	for _, k := range resp.ApiKeys {
		out = append(out, k.ApiKey)
	}
	return out
}

// saslRawRequest writes one request (non-flexible header v1) on c and reads
// the response body (after the correlation id); an error means the
// connection was closed.
func saslRawRequest(c net.Conn, req kmsg.Request, corr int32) ([]byte, error) {
	body := kbin.AppendInt16(nil, req.Key())
	body = kbin.AppendInt16(body, req.GetVersion())
	body = kbin.AppendInt32(body, corr)
	body = kbin.AppendNullableString(body, nil)
	body = req.AppendTo(body)
	frame := kbin.AppendInt32(nil, int32(len(body)))
	if _, err := c.Write(append(frame, body...)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		return nil, err
	}
	return resp[4:], nil
}

// TestSASLUnauthenticatedClosed checks that a request other than
// ApiVersions, SaslHandshake and SaslAuthenticate before authentication
// closes the connection with a log line; a disabled mechanism gets
// UNSUPPORTED_SASL_MECHANISM with the enabled list.
func TestSASLUnauthenticatedClosed(t *testing.T) {
	logs := &syncBuffer{}
	ov := saslOverrides()
	ov["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256"
	tb := startBrokerLog(t, "", ov, logs)
	c := dialT(t, tb)
	if err := apiVersionsRoundTrip(c); err != nil {
		t.Fatalf("ApiVersions before authentication: %v", err)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-512"
	body, err := saslRawRequest(c, hs, 1)
	if err != nil {
		t.Fatal(err)
	}
	hresp := kmsg.NewPtrSASLHandshakeResponse()
	hresp.Version = 1
	if err := hresp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if hresp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hresp.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256" {
		t.Errorf("handshake for a disabled mechanism: %+v", hresp)
	}
	if err := apiVersionsRoundTrip(c); err == nil {
		t.Error("connection still open after a disabled mechanism")
	}
	c = dialT(t, tb)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	if _, err := saslRawRequest(c, md, 2); err == nil {
		t.Fatal("Metadata before authentication was answered")
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), "before SASL authentication"); {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the unauthenticated request:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A request larger than 512 KiB before authentication closes the
	// connection (Kafka's sasl.server.max.receive.size).
	c = dialT(t, tb)
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, 600<<10)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
		t.Error("oversized request before authentication: connection still open")
	}
	// After authentication large requests are served (a 1 MiB record).
	carol := kgo.SASL(plain.Auth{User: "carol", Pass: "carol-secret"}.AsMechanism())
	if err := tb.Client(carol, kgo.ProducerBatchMaxBytes(2<<20), kgo.AllowAutoTopicCreation()).ProduceSync(ctxT(t), &kgo.Record{Topic: "big", Value: make([]byte, 1<<20)}).FirstErr(); err != nil {
		t.Errorf("1 MiB record after authentication: %v", err)
	}
	keys := apiKeys(t, tb.Client(carol))
	for _, k := range []int16{17, 36, 50, 51} {
		if !slices.Contains(keys, k) {
			t.Errorf("SASL listener does not advertise key %d", k)
		}
	}
}

// TestSASLSSL serves PLAIN and SCRAM over TLS (SASL_SSL with the test
// certificates).
func TestSASLSSL(t *testing.T) {
	p := genPKI(t)
	tb := startBroker(t, "", map[string]string{
		"listeners":               "SASL_SSL://127.0.0.1:0",
		"ssl.keystore.location":   p.ServerKeystore,
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
		"listener.name.sasl_ssl.plain.sasl.jaas.config": saslJAAS,
	})
	tlsOpt := kgo.DialTLSConfig(p.ClientConfig(false))
	alice := plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()
	roundTrip(t, tb, alice, "sasl-ssl", 5, tlsOpt)
	adm := kadm.NewClient(tb.Client(kgo.SASL(alice), tlsOpt))
	if _, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{{User: "erin", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "erin-secret"}}); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, tb, scram.Auth{User: "erin", Pass: "erin-secret"}.AsSha512Mechanism(), "sasl-ssl", 5, tlsOpt)
	authFails(t, tb, plain.Auth{User: "alice", Pass: "nope"}.AsMechanism(), tlsOpt)
	if _, err := tls.Dial("tcp", tb.Addr(), &tls.Config{ServerName: "127.0.0.1"}); err == nil {
		t.Error("a client not trusting the test CA completed the handshake")
	}
}

// dialT opens a raw connection closed at test end, with a deadline so a
// hang fails instead of blocking the package.
func dialT(t *testing.T, tb *servertest.Broker) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", tb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// rawToken sends one unframed SASL token and reads the unframed answer.
func rawToken(c net.Conn, tok []byte) ([]byte, error) {
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	out := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c, out)
	return out, err
}

// TestSASLHandshakeV0 authenticates with unframed tokens after a
// SaslHandshake v0 (PLAIN), then serves Kafka requests; a wrong password
// closes the connection.
func TestSASLHandshakeV0(t *testing.T) {
	tb := startBroker(t, "", saslOverrides())
	for _, pass := range []string{"alice-secret", "wrong"} {
		c := dialT(t, tb)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 0, "PLAIN"
		body, err := saslRawRequest(c, hs, 1)
		if err != nil {
			t.Fatal(err)
		}
		if body[0] != 0 || body[1] != 0 {
			t.Fatalf("handshake v0 error code %v", body[:2])
		}
		ans, err := rawToken(c, []byte("\x00alice\x00"+pass))
		if pass == "wrong" {
			if err == nil {
				t.Error("wrong password: answered")
			}
			continue
		}
		if err != nil || len(ans) != 0 {
			t.Fatalf("unframed PLAIN: %q %v", ans, err)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 1
		if _, err := saslRawRequest(c, md, 2); err != nil {
			t.Fatalf("Metadata after unframed authentication: %v", err)
		}
	}
}
