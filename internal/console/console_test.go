package console_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/console"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPages loads every page against a broker holding real data and checks
// what each shows.
func TestPages(t *testing.T) {
	b, base := startBroker(t, nil)
	f := newFixture(t, b)
	c := consoleOf(t, b)
	w := newWeb(t, base)
	// Two samples: rates, plots and lag history exist.
	c.SampleNow(ctxT(t))
	f.produce(t, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte(`{"late":true}`)})
	time.Sleep(250 * time.Millisecond) // rates are measured over at least 200 ms
	c.SampleNow(ctxT(t))

	ov := w.mustGet("/")
	for _, want := range []string{"Cluster id", "this broker", "running", "Log directories", "records/s", "<polyline"} {
		if !strings.Contains(ov, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	tl := w.mustGet("/topics")
	for _, want := range []string{`href="/topics/orders"`, `href="/topics/users"`, ">compact<"} {
		if !strings.Contains(tl, want) {
			t.Errorf("topic list lacks %q", want)
		}
	}
	if strings.Contains(tl, "__consumer_offsets") {
		t.Error("internal topics listed without asking")
	}
	if tl := w.mustGet("/topics?internal=1&q=consumer"); !strings.Contains(tl, "__consumer_offsets") || strings.Contains(tl, `href="/topics/orders"`) {
		t.Error("search with internal topics: wrong rows")
	}
	tp := w.mustGet("/topics/orders")
	tds, err := f.adm.ListTopics(ctxT(t), "orders")
	if err != nil {
		t.Fatal(err)
	}
	oid := tds["orders"].ID
	// The topic id as Kafka prints it (URL-safe base64), as the CLI does.
	for _, want := range []string{"Partitions", "retention.ms", `href="/groups/billing"`, "IncrementalAlterConfigs", "<code>" + base64.RawURLEncoding.EncodeToString(oid[:]) + "</code>"} {
		if !strings.Contains(tp, want) {
			t.Errorf("topic page lacks %q", want)
		}
	}
	gl := w.mustGet("/groups")
	if !strings.Contains(gl, `href="/groups/billing"`) || !strings.Contains(gl, "Empty") {
		t.Error("group list lacks billing (Empty)")
	}
	gp := w.mustGet("/groups/billing")
	// Committed 4 on each partition; ends 11, 11+1 (html), 10+1 (bin) + 1 late on p0.
	if !strings.Contains(gp, "Total lag</dt><dd>") || !strings.Contains(gp, "<polyline") {
		t.Errorf("group page lacks lag or its plot:\n%s", gp)
	}
	cp := w.mustGet("/compaction")
	if !strings.Contains(cp, "users</a>/0") || !strings.Contains(cp, "Clean now") {
		t.Errorf("compaction page lacks users/0:\n%s", cp)
	}
	mp := w.mustGet("/topics/orders/messages?from=start&partition=0")
	if !strings.Contains(mp, "order-0") || !strings.Contains(mp, "&#34;item&#34;: &#34;book&#34;") {
		t.Errorf("messages page lacks order-0 as JSON")
	}
	for _, path := range []string{"/topics/nope", "/groups/nope", "/nope"} {
		if code, _ := w.get(path); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
}

// TestRecordHTMLIsText: keys, values and headers holding HTML come out
// escaped; nothing of them is markup.
func TestRecordHTMLIsText(t *testing.T) {
	b, base := startBroker(t, nil)
	newFixture(t, b)
	w := newWeb(t, base)
	for _, format := range []string{"auto", "text", "json", "hex"} {
		body := w.mustGet("/topics/orders/messages?from=start&partition=1&format=" + format)
		for _, raw := range []string{"<script>alert", "<img src=x", "<b>h</b>", "<i>v</i>"} {
			if strings.Contains(body, raw) {
				t.Errorf("format %s: raw %q in the page", format, raw)
			}
		}
		if format != "hex" && !strings.Contains(body, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") {
			t.Errorf("format %s: escaped value missing", format)
		}
	}
	// The live tail's rows are escaped the same way.
	ctx := ctxT(t)
	code, body := w.get("/topics/orders/tail?partition=1&cursor=1:0&limit=50")
	if code != 200 {
		t.Fatalf("tail: %d %s", code, body)
	}
	var tr struct {
		HTML   string `json:"html"`
		Cursor string `json:"cursor"`
		Count  int    `json:"count"`
	}
	if err := json.Unmarshal([]byte(body), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Count != 11 || strings.Contains(tr.HTML, "<script>") || !strings.Contains(tr.HTML, "&lt;script&gt;") {
		t.Errorf("tail: %d rows, html %q", tr.Count, tr.HTML)
	}
	_ = ctx
}

// TestBinaryValues: a binary value shows as hex by default; as text every
// byte is an escape; nothing is lost or misread as markup.
func TestBinaryValues(t *testing.T) {
	b, base := startBroker(t, nil)
	newFixture(t, b)
	w := newWeb(t, base)
	body := w.mustGet("/topics/orders/messages?from=start&partition=2&key=bin")
	if !strings.Contains(body, "00 01 02 ff fe 61 3c 7f") || !strings.Contains(body, "|.....a&lt;.|") {
		t.Errorf("hex dump missing:\n%s", body)
	}
	body = w.mustGet("/topics/orders/messages?from=start&partition=2&key=bin&format=text")
	if !strings.Contains(body, `\x00\x01\x02\xff\xfea&lt;\x7f`) {
		t.Errorf("escaped text missing:\n%s", body)
	}
}

// TestMessagePaging pages through every record of all partitions and sees
// each exactly once; filters by key, starts at an offset, a time and the
// end.
func TestMessagePaging(t *testing.T) {
	b, base := startBroker(t, nil)
	f := newFixture(t, b)
	w := newWeb(t, base)
	seen := map[string]int{}
	path := "/topics/orders/messages?from=start&limit=7"
	rowRe := regexp.MustCompile(`<td class="num">(\d+)</td><td class="num">(\d+)</td>`)
	nextRe := regexp.MustCompile(`<a href="([^"]+)" class="button" rel="next">`)
	for pages := 0; path != ""; pages++ {
		if pages > 20 {
			t.Fatal("too many pages")
		}
		body := w.mustGet(path)
		rows := rowRe.FindAllStringSubmatch(body, -1)
		if len(rows) > 7 {
			t.Fatalf("page of %d rows, limit 7", len(rows))
		}
		for _, r := range rows {
			seen[r[1]+"/"+r[2]]++
		}
		path = ""
		if m := nextRe.FindStringSubmatch(body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(seen) != 32 {
		t.Errorf("saw %d distinct records, want 32", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s seen %d times", k, n)
		}
	}
	body := w.mustGet("/topics/orders/messages?from=start&key=order-7")
	if rows := rowRe.FindAllStringSubmatch(body, -1); len(rows) != 1 || rows[0][1] != "1" || rows[0][2] != "2" {
		t.Errorf("key filter: rows %v", rows)
	}
	body = w.mustGet("/topics/orders/messages?from=offset&offset=9&partition=0")
	if rows := rowRe.FindAllStringSubmatch(body, -1); len(rows) != 1 || rows[0][2] != "9" {
		t.Errorf("from offset 9: rows %v", rows)
	}
	body = w.mustGet("/topics/orders/messages?from=end&partition=1&limit=2")
	if rows := rowRe.FindAllStringSubmatch(body, -1); len(rows) != 2 || rows[0][2] != "9" || rows[1][2] != "10" {
		t.Errorf("from end: rows %v", rows)
	}
	// From a time after everything so far: only what comes later.
	mark := time.Now().Add(time.Second)
	time.Sleep(1100 * time.Millisecond)
	f.produce(t, &kgo.Record{Topic: "orders", Partition: 0, Key: []byte("after"), Value: []byte("x")})
	body = w.mustGet("/topics/orders/messages?from=time&time=" + strconv.FormatInt(mark.UnixMilli(), 10))
	if rows := rowRe.FindAllStringSubmatch(body, -1); len(rows) != 1 || !strings.Contains(body, ">after</pre>") {
		t.Errorf("from time: rows %v", rows)
	}
	if code, _ := w.get("/topics/orders/messages?partition=9"); code != http.StatusBadRequest {
		t.Errorf("unknown partition: %d", code)
	}
	if code, _ := w.get("/topics/orders/messages?cursor=0:-1"); code != http.StatusBadRequest {
		t.Errorf("bad cursor: %d", code)
	}
}

// TestMessagePageBounded: a page of a large partition reads a bounded
// number of bytes, never the whole topic.
func TestMessagePageBounded(t *testing.T) {
	b, base := startBroker(t, nil)
	adm := b.Admin()
	mustCreate(t, adm, "big", 1, nil)
	cl := b.Client(kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := 0; i < 384; i++ { // 24 MiB
		recs = append(recs, &kgo.Record{Topic: "big", Value: bytes.Repeat([]byte{byte(i)}, 64<<10)})
	}
	if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	w := newWeb(t, base)
	readRe := regexp.MustCompile(`record\(s\)[^,]*, ([0-9.]+) (MiB|KiB|B) read`)
	for _, q := range []string{"from=start&limit=5", "from=start&limit=500", "from=start&key=nothing-has-this-key"} {
		body := w.mustGet("/topics/big/messages?" + q)
		m := readRe.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%s: no read figure", q)
		}
		n, _ := strconv.ParseFloat(m[1], 64)
		t.Logf("%s: read %s %s", q, m[1], m[2])
		limit := map[string]float64{"from=start&limit=5": 1.1, "from=start&limit=500": 8 + 4.1, "from=start&key=nothing-has-this-key": 16 + 4.1}[q]
		if m[2] == "MiB" && n > limit {
			t.Errorf("%s: read %s MiB of a 24 MiB topic, bound %.1f", q, m[1], limit)
		}
		if strings.Contains(q, "limit=500") || strings.Contains(q, "key=") {
			if !strings.Contains(body, `rel="next"`) {
				t.Errorf("%s: a page cut short by its byte bound has no next page", q)
			}
		}
	}
}

// TestProduceFromPage produces records from the form (text with headers, a
// null key, hex bytes, a tombstone) and reads them back with a client.
func TestProduceFromPage(t *testing.T) {
	b, base := startBroker(t, nil)
	mustCreate(t, b.Admin(), "p", 2, nil)
	w := newWeb(t, base)
	w.mustGet("/topics/p/messages")
	post := func(vals url.Values) string {
		t.Helper()
		code, body := w.post("/topics/p/produce", vals)
		if code != 200 {
			t.Fatalf("produce: %d %s", code, body)
		}
		msg, isErr := flashOf(body)
		if isErr || !strings.HasPrefix(msg, "Produced to partition") {
			t.Fatalf("produce: flash %q", msg)
		}
		return msg
	}
	post(url.Values{"partition": {"1"}, "key": {"k1"}, "value": {"hello <b>"}, "headers": {"a: 1\nb:two"}})
	post(url.Values{"partition": {"0"}, "key_null": {"1"}, "value": {"no key"}})
	post(url.Values{"partition": {"0"}, "encoding": {"hex"}, "key": {"00ff"}, "value": {"de ad be ef"}})
	post(url.Values{"partition": {"0"}, "key": {"gone"}, "value_null": {"1"}})
	post(url.Values{"key": {"by-key"}, "value": {"v"}})
	cl := b.Client(kgo.ConsumeTopics("p"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]*kgo.Record{}
	for len(got) < 5 {
		fs := cl.PollFetches(ctxT(t))
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[fmt.Sprintf("%x", r.Key)+"/"+string(r.Value)] = r })
	}
	r := got[fmt.Sprintf("%x", "k1")+"/hello <b>"]
	if r == nil || r.Partition != 1 || len(r.Headers) != 2 || r.Headers[1].Key != "b" || string(r.Headers[1].Value) != "two" {
		t.Errorf("text record: %+v", r)
	}
	if r := got["/no key"]; r == nil || r.Key != nil {
		t.Errorf("null key record: %+v", r)
	}
	if r := got["00ff/"+string([]byte{0xde, 0xad, 0xbe, 0xef})]; r == nil {
		t.Errorf("hex record missing: %v", got)
	}
	if r := got[fmt.Sprintf("%x", "gone")+"/"]; r == nil || r.Value != nil {
		t.Errorf("tombstone: %+v", r)
	}
	// Refused: a partition that does not exist, bad hex.
	for _, vals := range []url.Values{{"partition": {"7"}, "value": {"x"}}, {"encoding": {"hex"}, "value": {"zz"}}} {
		_, body := w.post("/topics/p/produce", vals)
		if _, isErr := flashOf(body); !isErr {
			t.Errorf("%v accepted", vals)
		}
	}
}

// TestConfigEdit sets, refuses and reverts a topic config from the form;
// the broker's validation decides, as for IncrementalAlterConfigs.
func TestConfigEdit(t *testing.T) {
	b, base := startBroker(t, nil)
	adm := b.Admin()
	mustCreate(t, adm, "cfg", 1, nil)
	w := newWeb(t, base)
	w.mustGet("/topics/cfg")
	value := func() (string, kmsg.ConfigSource) {
		rc, err := adm.DescribeTopicConfigs(ctxT(t), "cfg")
		if err != nil {
			t.Fatal(err)
		}
		c, err := rc.On("cfg", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Configs {
			if e.Key == "retention.ms" {
				return e.MaybeValue(), e.Source
			}
		}
		t.Fatal("no retention.ms")
		return "", 0
	}
	_, body := w.post("/topics/cfg/configs", url.Values{"name": {"retention.ms"}, "op": {"set"}, "value": {"3600000"}})
	if msg, isErr := flashOf(body); isErr {
		t.Fatalf("set: %s", msg)
	}
	if v, src := value(); v != "3600000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("after set: %s (%v)", v, src)
	}
	if !strings.Contains(body, `value="3600000"`) {
		t.Error("page does not show the new value")
	}
	_, body = w.post("/topics/cfg/configs", url.Values{"name": {"retention.ms"}, "op": {"set"}, "value": {"soon"}})
	if msg, isErr := flashOf(body); !isErr || !strings.Contains(msg, "retention.ms") {
		t.Errorf("invalid value: flash %q", msg)
	}
	_, body = w.post("/topics/cfg/configs", url.Values{"name": {"no.such.config"}, "op": {"set"}, "value": {"1"}})
	if _, isErr := flashOf(body); !isErr {
		t.Error("unknown config accepted")
	}
	if v, _ := value(); v != "3600000" {
		t.Errorf("a refused edit changed the value to %s", v)
	}
	_, body = w.post("/topics/cfg/configs", url.Values{"name": {"retention.ms"}, "op": {"delete"}})
	if msg, isErr := flashOf(body); isErr {
		t.Fatalf("delete: %s", msg)
	}
	if v, src := value(); v != "604800000" || src == kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("after delete: %s (%v)", v, src)
	}
}

var planRe = regexp.MustCompile(`<tr data-partition="(\d+)" data-new="(-?\d+)">`)

// TestResetPreviewMatchesExecute: the offsets execute commits are the ones
// the preview showed; a plan that changed in between is not committed.
func TestResetPreviewMatchesExecute(t *testing.T) {
	b, base := startBroker(t, nil)
	f := newFixture(t, b)
	w := newWeb(t, base)
	for _, tc := range []struct{ to, value string }{{"earliest", ""}, {"shift", "3"}, {"offset", "100"}, {"latest", ""}} {
		q := url.Values{"topic": {"orders"}, "to": {tc.to}, "value": {tc.value}}
		preview := w.mustGet("/groups/billing/reset?" + q.Encode())
		plan := map[int32]int64{}
		for _, m := range planRe.FindAllStringSubmatch(preview, -1) {
			p, _ := strconv.Atoi(m[1])
			n, _ := strconv.ParseInt(m[2], 10, 64)
			plan[int32(p)] = n
		}
		if len(plan) != 3 {
			t.Fatalf("%s: plan %v", tc.to, plan)
		}
		digest := regexp.MustCompile(`name="digest" value="([0-9a-f]+)"`).FindStringSubmatch(preview)
		if digest == nil {
			t.Fatalf("%s: no execute form", tc.to)
		}
		q.Set("digest", digest[1])
		q.Set("partitions", "")
		_, body := w.post("/groups/billing/reset", q)
		if msg, isErr := flashOf(body); isErr {
			t.Fatalf("%s: execute: %s", tc.to, msg)
		}
		committed, err := f.adm.FetchOffsets(ctxT(t), "billing")
		if err != nil {
			t.Fatal(err)
		}
		for p, want := range plan {
			if o, ok := committed.Lookup("orders", p); !ok || o.At != want {
				t.Errorf("%s: partition %d committed %v, preview said %d", tc.to, p, o.At, want)
			}
		}
	}
	// A plan that changes between preview and execute is refused.
	q := url.Values{"topic": {"orders"}, "to": {"latest"}}
	preview := w.mustGet("/groups/billing/reset?" + q.Encode())
	digest := regexp.MustCompile(`name="digest" value="([0-9a-f]+)"`).FindStringSubmatch(preview)
	f.produce(t, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("new")})
	q.Set("digest", digest[1])
	_, body := w.post("/groups/billing/reset", q)
	if msg, isErr := flashOf(body); !isErr || !strings.Contains(msg, "changed since the preview") {
		t.Errorf("changed plan: flash %q", msg)
	}
	// An active group is not reset; a stopped one is deleted.
	cl := b.Client(kgo.ConsumerGroup("active"), kgo.ConsumeTopics("orders"))
	for {
		if fs := cl.PollFetches(ctxT(t)); fs.NumRecords() > 0 {
			break
		}
	}
	_, body = w.post("/groups/active/reset", url.Values{"topic": {"orders"}, "to": {"earliest"}, "digest": {"x"}})
	if msg, isErr := flashOf(body); !isErr || !strings.Contains(msg, "active members") {
		t.Errorf("active group reset: flash %q", msg)
	}
	_, body = w.post("/groups/active/delete", nil)
	if msg, isErr := flashOf(body); !isErr || !strings.Contains(msg, "NON_EMPTY_GROUP") {
		t.Errorf("active group delete: flash %q", msg)
	}
	_, body = w.post("/groups/billing/delete", nil)
	if msg, isErr := flashOf(body); isErr || !strings.Contains(msg, "deleted") {
		t.Errorf("delete: flash %q", msg)
	}
	if code, _ := w.get("/groups/billing"); code != http.StatusNotFound {
		t.Errorf("deleted group: %d", code)
	}
}

// TestCleanNow runs a cleaning round from the compaction page; the page
// then shows the round and its plots.
func TestCleanNow(t *testing.T) {
	b, base := startBroker(t, nil)
	newFixture(t, b)
	c := consoleOf(t, b)
	w := newWeb(t, base)
	c.SampleNow(ctxT(t))
	w.mustGet("/compaction")
	_, body := w.post("/compaction/clean", url.Values{"topic": {"users"}, "partition": {"0"}})
	if msg, isErr := flashOf(body); isErr || msg != "Cleaned users/0." {
		t.Fatalf("clean now: flash %q", msg)
	}
	c.SampleNow(ctxT(t))
	body = w.mustGet("/compaction?topic=users")
	for _, want := range []string{"records removed", "Log size of users/0", "Dirty ratio of users/0", `class="threshold"`, "next removable"} {
		if !strings.Contains(body, want) {
			t.Errorf("compaction page lacks %q", want)
		}
	}
	_, body = w.post("/compaction/clean", url.Values{"topic": {"orders"}, "partition": {"0"}})
	if msg, isErr := flashOf(body); !isErr || !strings.Contains(msg, "not a compacted partition") {
		t.Errorf("clean a delete-policy topic: flash %q", msg)
	}
}

// TestCSRF: a POST without the session's token, or from another origin, or
// cross-site, changes nothing.
func TestCSRF(t *testing.T) {
	b, base := startBroker(t, nil)
	mustCreate(t, b.Admin(), "t", 1, nil)
	w := newWeb(t, base)
	w.mustGet("/topics/t")
	vals := url.Values{"name": {"retention.ms"}, "op": {"set"}, "value": {"1000"}}
	for name, mod := range map[string]func(r *http.Request){
		"no token":    func(r *http.Request) {},
		"wrong token": func(r *http.Request) { r.Header.Set("X-CSRF-Token", w.csrf+"x") },
		"origin": func(r *http.Request) {
			r.Header.Set("X-CSRF-Token", w.csrf)
			r.Header.Set("Origin", "http://evil.example")
		},
		"cross-site": func(r *http.Request) {
			r.Header.Set("X-CSRF-Token", w.csrf)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
		},
	} {
		req, _ := http.NewRequest(http.MethodPost, base+"/topics/t/configs", strings.NewReader(vals.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		mod(req)
		if code, _ := w.do(req); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, code)
		}
	}
	// Another browser (no cookie) with a stolen token.
	other := newWeb(t, base)
	other.csrf = w.csrf
	if code, _ := other.post("/topics/t/configs", vals); code != http.StatusForbidden {
		t.Errorf("token of another session: %d", code)
	}
	rc, _ := b.Admin().DescribeTopicConfigs(ctxT(t), "t")
	if c, _ := rc.On("t", nil); c.Configs != nil {
		for _, e := range c.Configs {
			if e.Key == "retention.ms" && e.MaybeValue() == "1000" {
				t.Error("a refused POST changed the config")
			}
		}
	}
	// The page without login answers only to loopback names.
	req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
	req.Host = "rebind.example:80"
	if code, _ := w.do(req); code != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: %d", code)
	}
}

// TestLoginRequiredOffLoopback: on a non-loopback listener every page
// needs a login with a SCRAM user's password.
func TestLoginRequiredOffLoopback(t *testing.T) {
	b, base := startBroker(t, map[string]string{"strata.metrics.listener": "0.0.0.0:0"})
	addScramUser(t, b.Admin(), "alice", "correct horse")
	if !consoleOf(t, b).RequiresLogin() {
		t.Fatal("console on 0.0.0.0 does not require login")
	}
	w := newWeb(t, base)
	for _, path := range []string{"/", "/topics", "/groups/x", "/compaction"} {
		body := w.mustGet(path) // redirected to the login page
		if !strings.Contains(body, `action="/login"`) || strings.Contains(body, "Cluster id") {
			t.Errorf("GET %s without login: not the login page", path)
		}
	}
	if code, _ := w.post("/compaction/clean", url.Values{"topic": {"x"}}); code != http.StatusUnauthorized {
		t.Errorf("POST without login: %d", code)
	}
	for _, pw := range []string{"wrong", "", "correct horse "} {
		code, body := w.post("/login", url.Values{"user": {"alice"}, "password": {pw}, "next": {"/topics"}})
		if code != http.StatusUnauthorized || !strings.Contains(body, "Wrong user name or password") {
			t.Errorf("password %q: %d", pw, code)
		}
	}
	if code, _ := w.post("/login", url.Values{"user": {"bob"}, "password": {"correct horse"}}); code != http.StatusUnauthorized {
		t.Errorf("unknown user: %d", code)
	}
	code, body := w.post("/login", url.Values{"user": {"alice"}, "password": {"correct horse"}, "next": {"/topics"}})
	if code != 200 || !strings.Contains(body, "<h1>Topics</h1>") || !strings.Contains(body, `<span class="user">alice</span>`) {
		t.Fatalf("login: %d\n%s", code, body)
	}
	u, _ := url.Parse(base)
	for _, ck := range w.c.Jar.Cookies(u) {
		if ck.Name == "strata_console" && len(ck.Value) != 43 {
			t.Errorf("session cookie %q", ck.Value)
		}
	}
	if body := w.mustGet("/"); !strings.Contains(body, "Cluster id") {
		t.Error("overview after login")
	}
	// A foreign Host is fine behind a login (no DNS rebinding concern).
	req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
	req.Host = "strata.example:80"
	if code, _ := w.do(req); code != 200 {
		t.Errorf("foreign Host after login: %d", code)
	}
	w.mustGet("/")
	if code, body := w.post("/logout", nil); code != 200 || !strings.Contains(body, `action="/login"`) {
		t.Errorf("logout: %d", code)
	}
	if body := w.mustGet("/"); !strings.Contains(body, `action="/login"`) {
		t.Error("still logged in after logout")
	}
	// An open redirect is not: next stays on this site.
	w.mustGet("/login")
	code, body = w.post("/login", url.Values{"user": {"alice"}, "password": {"correct horse"}, "next": {"//evil.example/"}})
	if code != 200 || !strings.Contains(body, "Cluster id") {
		t.Errorf("login with a foreign next: %d", code)
	}
}

func addScramUser(t testing.TB, adm *kadm.Client, user, password string) {
	t.Helper()
	res, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("add SCRAM user: %v", err)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9644": true, "localhost:9644": true, "[::1]:9644": true, "127.0.0.2:1": true,
		"0.0.0.0:9644": false, ":9644": false, "[::]:9644": false, "10.0.0.1:9644": false, "example.com:80": false,
	} {
		if got := console.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
}

// start1000Topics starts a broker with 1,000 one-partition topics and
// group "bench-group" committed on 20 of them, and returns the console's
// base URL (the benchmarks' broker).
func start1000Topics(b testing.TB) string {
	br, base := startBroker(b, nil)
	adm := br.Admin()
	names := make([]string, 0, 1000)
	for i := 0; i < 1000; i++ {
		names = append(names, fmt.Sprintf("bench.topic-%04d", i))
	}
	for i := 0; i < len(names); i += 100 {
		resps, err := adm.CreateTopics(ctxT(b), 1, 1, nil, names[i:i+100]...)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	offs := kadm.Offsets{}
	for i := 0; i < 20; i++ {
		offs.Add(kadm.Offset{Topic: names[i*50], Partition: 0, At: 0, LeaderEpoch: -1})
	}
	if err := adm.CommitAllOffsets(ctxT(b), "bench-group", offs); err != nil {
		b.Fatal(err)
	}
	return base
}

// BenchmarkPages1000Topics times the server's answer (HTTP, no browser)
// for the pages of a broker with 1,000 topics.
func BenchmarkPages1000Topics(b *testing.B) {
	base := start1000Topics(b)
	w := newWeb(b, base)
	for _, path := range []string{"/", "/topics", "/topics?q=topic-09", "/topics/bench.topic-0500", "/topics/bench.topic-0500/messages", "/groups", "/groups/bench-group", "/compaction"} {
		w.mustGet(path)
		b.Run(strings.NewReplacer("/", "_", "?", "_").Replace(path), func(b *testing.B) {
			for b.Loop() {
				w.mustGet(path)
			}
		})
	}
}

// TestSASLListener: on a SASL_PLAINTEXT listener the console still reads
// and changes everything (its in-process connections need no SASL).
func TestSASLListener(t *testing.T) {
	b, base := startBroker(t, map[string]string{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
	})
	adm := adminSASL(b)
	mustCreate(t, adm, "s", 1, nil)
	w := newWeb(t, base)
	if body := w.mustGet("/"); !strings.Contains(body, "Cluster id") {
		t.Fatal("overview on a SASL listener")
	}
	w.mustGet("/topics/s/messages")
	_, body := w.post("/topics/s/produce", url.Values{"partition": {"0"}, "key": {"k"}, "value": {"through SASL"}})
	if msg, isErr := flashOf(body); isErr || !strings.Contains(body, ">through SASL</pre>") {
		t.Errorf("produce and read on a SASL listener: %q", msg)
	}
	w.mustGet("/groups")
}

// TestOverviewKRaftNode: a node with the KRaft settings shows its real
// registration epoch, its state and the controller quorum; a plain node
// shows none of them (TestPages).
func TestOverviewKRaftNode(t *testing.T) {
	b, base := startBroker(t, kraftNode(t, "PLAINTEXT://127.0.0.1:0", nil))
	epoch := b.Server().BrokerEpoch()
	if epoch <= 0 {
		t.Fatalf("broker epoch %d", epoch)
	}
	w := newWeb(t, base)
	var body string
	for i := 0; ; i++ { // the controller driver becomes active shortly after start
		body = w.mustGet("/")
		if strings.Contains(body, "voters 1, active 1") || i == 100 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"KRaft combined node", fmt.Sprintf("<td>%d</td><td>registered</td>", epoch), "voters 1, active 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
}
