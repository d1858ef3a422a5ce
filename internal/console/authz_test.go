package console_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-io/strata/internal/servertest"
)

// TestAuthorizer: on a broker with an authorizer the console requires a
// login on loopback too, and every page acts as the logged-in user
// (User:<login>): alice, with READ and DESCRIBE on topic "public" only,
// sees only that topic (in the list, a topic page, the compaction page),
// and her produce, config edit and clean now are refused with Kafka's
// authorization error; admin (a super user) does all three.
func TestAuthorizer(t *testing.T) {
	b, base, adm := startAuthzBroker(t)
	if !consoleOf(t, b).RequiresLogin() {
		t.Fatal("a console on loopback with an authorizer does not require login")
	}
	compact := "compact"
	mustCreate(t, adm, "public", 1, map[string]*string{"cleanup.policy": &compact})
	mustCreate(t, adm, "secret", 1, map[string]*string{"cleanup.policy": &compact})
	acl := kadm.NewACLs().Topics("public").Allow("User:alice").Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	mustCreateACLs(t, adm, acl)
	addScramUser(t, adm, "alice", "alice pw")
	addScramUser(t, adm, "admin", "admin pw")

	w := newWeb(t, base)
	if body := w.mustGet("/topics"); !strings.Contains(body, `action="/login"`) {
		t.Fatal("loopback console with an authorizer: no login page")
	}
	code, body := w.post("/login", url.Values{"user": {"alice"}, "password": {"alice pw"}, "next": {"/topics"}})
	if code != 200 || !strings.Contains(body, `<span class="user">alice</span>`) {
		t.Fatalf("alice's login: %d\n%s", code, body)
	}
	if !strings.Contains(body, `href="/topics/public"`) || strings.Contains(body, `href="/topics/secret"`) {
		t.Errorf("alice's topic list:\n%s", body)
	}
	// The overview and the group list degrade to what she may see.
	w.mustGet("/")
	w.mustGet("/groups")
	if code, _ := w.get("/topics/secret"); code == 200 {
		t.Error("alice reads the page of a topic she may not describe")
	}
	if body := w.mustGet("/compaction"); !strings.Contains(body, "public") || strings.Contains(body, "secret") {
		t.Errorf("alice's compaction page:\n%s", body)
	}
	w.mustGet("/topics/public/messages")
	_, body = w.post("/topics/public/produce", url.Values{"partition": {"0"}, "key": {"k"}, "value": {"by alice"}})
	// (CLUSTER_AUTHORIZATION_FAILED: without WRITE on a topic the
	// idempotent producer has no IDEMPOTENT_WRITE, KIP-679.)
	if msg, isErr := flashOf(body); !isErr || !strings.Contains(msg, "AUTHORIZATION_FAILED") {
		t.Errorf("alice's produce: %q", msg)
	}
	if body := w.mustGet("/topics/public"); !strings.Contains(body, "TOPIC_AUTHORIZATION_FAILED") || strings.Contains(body, `name="value"`) {
		t.Errorf("alice's topic page (partitions, no configs):\n%s", body)
	}
	_, body = w.post("/topics/public/configs", url.Values{"name": {"retention.ms"}, "op": {"set"}, "value": {"3600000"}})
	if msg, isErr := flashOf(body); !isErr || !strings.Contains(msg, "AUTHORIZATION_FAILED") {
		t.Errorf("alice's config edit: %q", msg)
	}
	w.mustGet("/compaction")
	_, body = w.post("/compaction/clean", url.Values{"topic": {"public"}})
	if msg, isErr := flashOf(body); !isErr || !strings.Contains(msg, "TOPIC_AUTHORIZATION_FAILED") {
		t.Errorf("alice's clean now: %q", msg)
	}

	w = newWeb(t, base)
	w.mustGet("/login")
	if code, body := w.post("/login", url.Values{"user": {"admin"}, "password": {"admin pw"}, "next": {"/topics"}}); code != 200 || !strings.Contains(body, `href="/topics/secret"`) {
		t.Fatalf("admin's login and topics: %d", code)
	}
	w.mustGet("/topics/public/messages")
	_, body = w.post("/topics/public/produce", url.Values{"partition": {"0"}, "key": {"k"}, "value": {"by admin"}})
	if msg, isErr := flashOf(body); isErr || !strings.Contains(body, ">by admin</pre>") {
		t.Errorf("admin's produce: %q", msg)
	}
	w.mustGet("/topics/public")
	_, body = w.post("/topics/public/configs", url.Values{"name": {"retention.ms"}, "op": {"set"}, "value": {"3600000"}})
	if msg, isErr := flashOf(body); isErr {
		t.Errorf("admin's config edit: %q", msg)
	}
	w.mustGet("/compaction")
	_, body = w.post("/compaction/clean", url.Values{"topic": {"public"}})
	if msg, isErr := flashOf(body); isErr {
		t.Errorf("admin's clean now: %q", msg)
	}
}

// startAuthzBroker starts a combined KRaft node with a SASL_PLAINTEXT
// listener and Kafka's StandardAuthorizer, User:admin its only super user
// and no ACL; it returns the broker, its console and admin's client.
func startAuthzBroker(t *testing.T) (*servertest.Broker, string, *kadm.Client) {
	t.Helper()
	b, base := startBroker(t, kraftNode(t, "SASL_PLAINTEXT://127.0.0.1:0", map[string]string{
		"sasl.enabled.mechanisms":                             "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		"authorizer.class.name":                               "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                                         "User:admin",
	}))
	return b, base, adminSASL(b)
}

// TestSamplerActsAsBroker: the history sampler is the broker sampling its
// own state, not a client: under an authorizer with no ACL for it (nor
// for any principal it could be), it still samples every group's lag, and
// a group's lag plot shows to admin; alice, who may describe both groups
// but only topic "public", sees the plot of the group reading "public"
// only, and none for the group that also reads "secret" (its plot sums a
// lag she may not see).
func TestSamplerActsAsBroker(t *testing.T) {
	b, base, adm := startAuthzBroker(t)
	mustCreate(t, adm, "public", 1, nil)
	mustCreate(t, adm, "secret", 1, nil)
	cl := b.Client(kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	for i := 0; i < 6; i++ {
		if err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "public", Value: []byte("p")}, &kgo.Record{Topic: "secret", Value: []byte("s")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(group string, topics ...string) {
		offs := kadm.Offsets{}
		for _, tp := range topics {
			offs.Add(kadm.Offset{Topic: tp, Partition: 0, At: 2, LeaderEpoch: -1})
		}
		if err := adm.CommitAllOffsets(ctxT(t), group, offs); err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	commit("open", "public")
	commit("mixed", "public", "secret")
	acls := kadm.NewACLs().Topics("public").Groups("open", "mixed").Allow("User:alice").Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	mustCreateACLs(t, adm, acls)
	addScramUser(t, adm, "alice", "alice pw")
	addScramUser(t, adm, "admin", "admin pw")
	c := consoleOf(t, b)
	c.SampleNow(ctxT(t))
	c.SampleNow(ctxT(t))

	login := func(user, pw string) *web {
		w := newWeb(t, base)
		w.mustGet("/login")
		if code, _ := w.post("/login", url.Values{"user": {user}, "password": {pw}, "next": {"/groups"}}); code != 200 {
			t.Fatalf("%s's login: %d", user, code)
		}
		return w
	}
	admin := login("admin", "admin pw")
	for _, g := range []string{"open", "mixed"} {
		if body := admin.mustGet("/groups/" + g); !strings.Contains(body, "<polyline") {
			t.Errorf("admin: no lag plot of %s (the sampler did not sample it):\n%s", g, body)
		}
	}
	alice := login("alice", "alice pw")
	if body := alice.mustGet("/groups/open"); !strings.Contains(body, "<polyline") {
		t.Errorf("alice: no lag plot of open:\n%s", body)
	}
	body := alice.mustGet("/groups/mixed")
	if strings.Contains(body, "<polyline") || strings.Contains(body, ">secret<") {
		t.Errorf("alice sees the lag plot of mixed, which sums secret's lag:\n%s", body)
	}
}
