package console_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/console"
	"github.com/strata-io/strata/internal/freeport"
	"github.com/strata-io/strata/internal/servertest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// startBroker starts a broker with its HTTP listener on a random loopback
// port (settings may move it) and returns it with the console's base URL.
func startBroker(t testing.TB, settings map[string]string) (*servertest.Broker, string) {
	t.Helper()
	b := servertest.Start(t, servertest.Options{Metrics: true, Settings: settings})
	_, port, err := net.SplitHostPort(b.MetricsAddr())
	if err != nil {
		t.Fatal(err)
	}
	return b, "http://127.0.0.1:" + port
}

func consoleOf(t testing.TB, b *servertest.Broker) *console.Console {
	t.Helper()
	c := b.Server().Console()
	if c == nil {
		t.Fatal("no console")
	}
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fixture fills a broker with what the pages show: a JSON topic with a
// record holding HTML, a compacted topic with updates and a tombstone, and
// a group with committed offsets behind the end.
type fixture struct {
	b   *servertest.Broker
	cl  *kgo.Client
	adm *kadm.Client
}

const (
	htmlValue = `{"note":"<script>alert('x')</script>","n":1}`
	htmlKey   = `<img src=x onerror=alert(1)>`
)

func newFixture(t testing.TB, b *servertest.Broker) *fixture {
	t.Helper()
	f := &fixture{b: b, cl: b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())), adm: b.Admin()}
	ctx := ctxT(t)
	mustCreate(t, f.adm, "orders", 3, nil)
	compact := "compact"
	ratio, seg, lag := "0.01", "200", "0"
	mustCreate(t, f.adm, "users", 1, map[string]*string{
		"cleanup.policy": &compact, "min.cleanable.dirty.ratio": &ratio, "segment.ms": &seg, "min.compaction.lag.ms": &lag,
	})
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(i % 3), Key: []byte(fmt.Sprintf("order-%d", i)),
			Value:   []byte(fmt.Sprintf(`{"order":%d,"item":"book","qty":%d}`, i, i%4+1)),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("web")}}})
	}
	recs = append(recs, &kgo.Record{Topic: "orders", Partition: 1, Key: []byte(htmlKey), Value: []byte(htmlValue),
		Headers: []kgo.RecordHeader{{Key: "<b>h</b>", Value: []byte("<i>v</i>")}}})
	recs = append(recs, &kgo.Record{Topic: "orders", Partition: 2, Key: []byte("bin"), Value: []byte{0, 1, 2, 0xff, 0xfe, 'a', '<', 0x7f}})
	f.produce(t, recs...)
	for round := 0; round < 3; round++ {
		var us []*kgo.Record
		for i := 0; i < 8; i++ {
			us = append(us, &kgo.Record{Topic: "users", Key: []byte(fmt.Sprintf("user-%d", i)), Value: []byte(fmt.Sprintf(`{"name":"u%d","v":%d}`, i, round))})
		}
		f.produce(t, us...)
		time.Sleep(250 * time.Millisecond) // segment.ms: the next round lands in a new segment
	}
	// A deleted user: its tombstone stays the latest record of its key, so
	// a cleaning keeps it until its delete horizon.
	f.produce(t, &kgo.Record{Topic: "users", Key: []byte("user-9"), Value: []byte(`{"name":"gone"}`)},
		&kgo.Record{Topic: "users", Key: []byte("user-9"), Value: nil})
	time.Sleep(250 * time.Millisecond) // the next append rolls the segment: the tombstone becomes cleanable
	f.produce(t, &kgo.Record{Topic: "users", Key: []byte("user-8"), Value: []byte(`{"name":"u8","v":3}`)})
	os := kadm.Offsets{}
	for p := int32(0); p < 3; p++ {
		os.Add(kadm.Offset{Topic: "orders", Partition: p, At: 4, LeaderEpoch: -1})
	}
	if err := f.adm.CommitAllOffsets(ctx, "billing", os); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return f
}

func (f *fixture) produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	if err := f.cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func mustCreate(t testing.TB, adm *kadm.Client, topic string, parts int32, cfg map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(ctxT(t), parts, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// web is a browser-like HTTP client of the console: a cookie jar, and the
// CSRF token of the last page.
type web struct {
	t    testing.TB
	base string
	c    *http.Client
	csrf string
}

func newWeb(t testing.TB, base string) *web {
	jar, _ := cookiejar.New(nil)
	return &web{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

var csrfRe = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)">`)

func (w *web) do(req *http.Request) (int, string) {
	w.t.Helper()
	resp, err := w.c.Do(req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	if m := csrfRe.FindSubmatch(b); m != nil {
		w.csrf = string(m[1])
	}
	return resp.StatusCode, string(b)
}

func (w *web) get(path string) (int, string) {
	w.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, w.base+path, nil)
	return w.do(req)
}

// mustGet fetches a page that must answer 200.
func (w *web) mustGet(path string) string {
	w.t.Helper()
	code, body := w.get(path)
	if code != http.StatusOK {
		w.t.Fatalf("GET %s: %d\n%s", path, code, body)
	}
	return body
}

// post sends a form with the CSRF token of the last page (a page is
// fetched first when there is none) and follows the redirect.
func (w *web) post(path string, vals url.Values) (int, string) {
	w.t.Helper()
	if w.csrf == "" {
		w.get("/login")
	}
	if vals == nil {
		vals = url.Values{}
	}
	if !vals.Has("csrf") {
		vals.Set("csrf", w.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, w.base+path, strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return w.do(req)
}

// flashOf returns the page's one-time message.
var flashRe = regexp.MustCompile(`<p class="flash( error)?" role="(?:alert|status)">([^<]*)</p>`)

func flashOf(body string) (text string, isErr bool) {
	m := flashRe.FindStringSubmatch(body)
	if m == nil {
		return "", false
	}
	return m[2], m[1] != ""
}

// kraftNode is a one-node KRaft cluster's settings (node 1, broker and
// controller, its controller port reserved with freeport) with the client
// listener listener, plus extra.
func kraftNode(t testing.TB, listener string, extra map[string]string) map[string]string {
	t.Helper()
	port := freeport.Take(t, 1)[0]
	m := map[string]string{
		"node.id":                   "1",
		"process.roles":             "broker,controller",
		"listeners":                 fmt.Sprintf("%s,CONTROLLER://127.0.0.1:%d", listener, port),
		"controller.listener.names": "CONTROLLER",
		"controller.quorum.voters":  fmt.Sprintf("1@127.0.0.1:%d", port),
	}
	maps.Copy(m, extra)
	return m
}

// plainJAAS is a SASL_PLAINTEXT listener's PLAIN login module with the one
// user admin (password admin-secret).
const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`

// adminSASL is an admin client of b logged in as admin over SASL/PLAIN.
func adminSASL(b *servertest.Broker) *kadm.Client {
	return kadm.NewClient(b.Client(kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())))
}

// mustCreateACLs creates acls and fails t on any error.
func mustCreateACLs(t testing.TB, adm *kadm.Client, acls *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctxT(t), acls)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}
