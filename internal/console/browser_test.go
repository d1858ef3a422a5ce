package console_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The browser tests drive Debian's chromium (scripts/test.sh installs it)
// with chromedp: one browser for the whole package, one tab and browser
// context (cookies) per test.
var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
	browserStop []context.CancelFunc
)

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(browserStop) - 1; i >= 0; i-- {
		browserStop[i]()
	}
	os.Exit(code)
}

// screenshotDir is where the tests write their screenshots: docs/console
// when STRATA_CONSOLE_SCREENSHOTS=1 (to refresh the README's), else a
// temporary directory.
func screenshotDir(t testing.TB) string {
	if os.Getenv("STRATA_CONSOLE_SCREENSHOTS") == "1" {
		dir, err := filepath.Abs("../../docs/console")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// startBrowser starts chromium headless with the flags that work as root
// on a closed network (no sandbox, no background connections).
func startBrowser() {
	path, err := exec.LookPath("chromium")
	if err != nil {
		browserErr = fmt.Errorf("chromium not found (scripts/test.sh installs Debian's chromium): %w", err)
		return
	}
	dir, err := os.MkdirTemp("", "strata-console-chromium-")
	if err != nil {
		browserErr = err
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 860),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	browserStop = append(browserStop, func() { os.RemoveAll(dir) }, cancelAlloc, cancel)
	if err := chromedp.Do(ctx); err != nil {
		browserErr = fmt.Errorf("start chromium: %w", err)
		return
	}
	browserCtx = ctx
}

// tab is one browser tab with its own cookies, and the problems it saw:
// script exceptions, console errors, CSP violations and dialogs.
type tab struct {
	t    testing.TB
	ctx  context.Context
	base string

	mu       sync.Mutex
	problems []string
	dialogs  []string
}

func newTab(t testing.TB, base string) *tab {
	t.Helper()
	browserOnce.Do(startBrowser)
	if browserErr != nil {
		t.Fatal(browserErr)
	}
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tb := &tab{t: t, ctx: ctx, base: base}
	if err := chromedp.Listen(ctx, tb.onEvent); err != nil {
		t.Fatal(err)
	}
	return tb
}

func (tb *tab) onEvent(ev any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		desc := ""
		if d.Exception != nil {
			desc = d.Exception.Description
		}
		tb.problems = append(tb.problems, fmt.Sprintf("exception at %s:%d: %s %s", d.URL, d.LineNumber, d.Text, desc))
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError {
			tb.problems = append(tb.problems, "console.error")
		}
	case *log.EventEntryAdded:
		// Network errors are the HTTP statuses a test asks for (401 on a
		// wrong password); everything else at error level is a problem
		// (a CSP violation among them).
		if e.Entry.Level == log.EntryLevelError && e.Entry.Source != log.EntrySourceNetwork {
			tb.problems = append(tb.problems, fmt.Sprintf("%s: %s", e.Entry.Source, e.Entry.Text))
		}
	case *page.EventJavascriptDialogOpening:
		tb.dialogs = append(tb.dialogs, e.Message)
	}
}

// checkClean fails the test on any problem the tab saw.
func (tb *tab) checkClean() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, p := range tb.problems {
		tb.t.Errorf("browser: %s", p)
	}
	for _, d := range tb.dialogs {
		tb.t.Errorf("browser opened a dialog: %q", d)
	}
	tb.problems, tb.dialogs = nil, nil
}

func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("browser: %v", err)
	}
}

func (tb *tab) nav(path string) {
	tb.t.Helper()
	tb.do(chromedp.Navigate(tb.base + path))
}

func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("browser: evaluate %s: %v", expr, err)
	}
	return v
}

// submit clicks sel (a submit button or link) and waits for the next page.
func (tb *tab) submit(sel string) {
	tb.t.Helper()
	tb.do(
		chromedp.Evaluate[chromedp.Void](`window.__strataOld = true`),
		chromedp.Click(chromedp.CSS(sel)),
	)
	tb.waitFor(`!window.__strataOld && document.readyState === "complete"`)
}

// waitFor polls a script until it is true; errors while the page changes
// (a navigation destroys the context a poll runs in) only mean "not yet".
func (tb *tab) waitFor(expr string) {
	tb.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("browser: waiting for %s: %v", expr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shot saves a PNG of the viewport as name.png.
func (tb *tab) shot(dir, name string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// controlRoles are the accessibility roles of controls: each needs a name.
var controlRoles = map[string]bool{
	"button": true, "textbox": true, "searchbox": true, "combobox": true, "checkbox": true, "radio": true,
	"spinbutton": true, "slider": true, "link": true, "listbox": true, "switch": true, "menuitem": true, "img": true, "meter": true,
}

// maxTabWalk is the most controls a page may have for checkA11y to walk
// them with the Tab key.
const maxTabWalk = 40

// checkA11y checks the page's accessibility basics: in the browser's
// accessibility tree every control has a name, and pressing Tab from the
// top reaches every visible, enabled control.
func (tb *tab) checkA11y(page string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	tree, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (accessibility.GetFullAXTreeResult, error) {
		return cdp.Call(ctx, t, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	})
	if err != nil {
		tb.t.Fatalf("accessibility tree: %v", err)
	}
	controls := 0
	for _, n := range tree.Nodes {
		if n.Ignored || n.Role == nil {
			continue
		}
		role := strings.Trim(string(n.Role.Value), `"`)
		if !controlRoles[role] {
			continue
		}
		controls++
		name := ""
		if n.Name != nil {
			name = strings.Trim(string(n.Name.Value), `"`)
		}
		if strings.TrimSpace(name) == "" {
			tb.t.Errorf("%s: a %s without an accessible name (DOM node %d)", page, role, n.BackendDOMNodeID)
		}
	}
	if controls == 0 {
		tb.t.Errorf("%s: no control in the accessibility tree", page)
	}
	// Keyboard: every visible, enabled control must be in the tab order
	// (tabIndex ≥ 0, and none reordered by a positive tabindex). On pages
	// with few controls, Tab is also pressed from the top until each one
	// had focus (on the long ones that costs seconds of key events).
	n := eval[int](tb, `(() => {
		window.__strataFocused = new Set();
		document.addEventListener("focusin", (e) => { if (e.target.dataset && e.target.dataset.a11y) window.__strataFocused.add(e.target.dataset.a11y); });
		let n = 0;
		document.querySelectorAll("a[href], button, input:not([type=hidden]), select, textarea, [tabindex]").forEach((el) => {
			const visible = el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
			if (!visible || el.disabled || el.closest("[hidden]")) return;
			el.dataset.a11y = String(n++);
		});
		if (document.activeElement) document.activeElement.blur();
		return n;
	})()`)
	outOfOrder := eval[[]string](tb, `Array.from(document.querySelectorAll("[data-a11y]")).filter((el) => el.tabIndex !== 0).map((el) => el.outerHTML.slice(0, 120))`)
	for _, m := range outOfOrder {
		tb.t.Errorf("%s: not in the natural tab order: %s", page, m)
	}
	if n > maxTabWalk {
		return
	}
	// Scrollable boxes (a long value) take focus too: press Tab in rounds
	// until every control was reached.
	const missedJS = `Array.from(document.querySelectorAll("[data-a11y]")).filter((el) => !window.__strataFocused.has(el.dataset.a11y)).map((el) => el.outerHTML.slice(0, 120))`
	for round := 0; round < 4 && len(eval[[]string](tb, missedJS)) > 0; round++ {
		steps := make([]chromedp.Action[chromedp.Void], 0, n+1)
		for i := 0; i <= n; i++ {
			steps = append(steps, chromedp.KeyEvent("\t"))
		}
		tb.do(steps...)
	}
	missed := eval[[]string](tb, missedJS)
	for _, m := range missed {
		tb.t.Errorf("%s: not reached with Tab: %s", page, m)
	}
}

// TestBrowser loads every page in chromium against a broker with real
// data: each renders, passes the accessibility checks and is
// photographed; a record holding HTML shows as text; a config edit round
// trips; a group reset commits what its preview showed; the live tail
// shows a new record.
func TestBrowser(t *testing.T) {
	b, base := startBroker(t, nil)
	f := newFixture(t, b)
	c := consoleOf(t, b)
	// A running consumer group that commits, for members, assignments and
	// lag.
	consumer := b.Client(kgo.ConsumerGroup("shipping"), kgo.ConsumeTopics("orders"), kgo.ClientID("shipping-service"),
		kgo.DisableAutoCommit())
	for {
		fs := consumer.PollRecords(ctxT(t), 10)
		if fs.NumRecords() > 0 {
			if err := consumer.CommitRecords(ctxT(t), fs.Records()...); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	w := newWeb(t, base)
	w.mustGet("/compaction")
	if _, body := w.post("/compaction/clean", url.Values{"topic": {"users"}, "partition": {"0"}}); !strings.Contains(body, "Cleaned users/0.") {
		t.Fatal("clean now failed")
	}
	// Samples with traffic in between, for the plots.
	for i := 0; i < 12; i++ {
		var recs []*kgo.Record
		for j := 0; j < 20+15*(i%4); j++ {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(j % 3), Value: []byte(fmt.Sprintf(`{"burst":%d,"n":%d}`, i, j))})
		}
		recs = append(recs, &kgo.Record{Topic: "users", Key: []byte(fmt.Sprintf("user-%d", i%8)), Value: []byte(fmt.Sprintf(`{"v":%d}`, i))})
		f.produce(t, recs...)
		c.SampleNow(ctxT(t))
		time.Sleep(100 * time.Millisecond)
	}
	dir := screenshotDir(t)
	tb := newTab(t, base)

	t.Run("pages", func(t *testing.T) {
		tb.t = t
		// Steady traffic while the pages load, sampled before each one,
		// so that rates and plots show a live broker.
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				var recs []*kgo.Record
				for j := 0; j < 10+5*(i%5); j++ {
					recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(j % 3), Value: []byte(fmt.Sprintf(`{"tick":%d}`, i))})
				}
				_ = f.cl.ProduceSync(context.Background(), recs...) // best effort: only the plots need it
			}
		}()
		defer func() { close(stop); <-done }()
		for i := 0; i < 8; i++ {
			time.Sleep(250 * time.Millisecond)
			c.SampleNow(ctxT(t))
		}
		for _, pg := range []struct{ name, path, h1 string }{
			{"overview", "/", "Overview"},
			{"topics", "/topics", "Topics"},
			{"topic", "/topics/orders", "Topic orders"},
			{"messages", "/topics/orders/messages?from=start&partition=1&limit=12", "Messages of orders"},
			{"groups", "/groups", "Consumer groups"},
			{"group", "/groups/shipping", "Group shipping"},
			{"reset", "/groups/billing/reset?topic=orders&to=shift&value=-2", "Reset offsets of billing"},
			{"compaction", "/compaction", "Compaction"},
		} {
			c.SampleNow(ctxT(t))
			tb.nav(pg.path)
			if h1 := eval[string](tb, `document.querySelector("h1").innerText`); h1 != pg.h1 {
				t.Errorf("%s: h1 %q, want %q", pg.path, h1, pg.h1)
			}
			tb.shot(dir, pg.name)
			tb.checkA11y(pg.path)
			tb.checkClean()
		}
		// The search filter (script) hides rows as one types.
		tb.nav("/topics")
		tb.do(chromedp.SendKeys(chromedp.ID("topic-search"), "use"))
		if shown := eval[[]string](tb, `Array.from(document.querySelectorAll("#topic-table tbody tr[data-name]")).filter((tr) => !tr.hidden).map((tr) => tr.dataset.name)`); len(shown) != 1 || shown[0] != "users" {
			t.Errorf("filter: shown %v", shown)
		}
	})

	t.Run("html-in-record-is-text", func(t *testing.T) {
		tb.t = t
		for _, format := range []string{"auto", "text", "json"} {
			tb.nav("/topics/orders/messages?from=start&partition=1&format=" + format)
			n := eval[int](tb, `document.querySelectorAll("#records script, #records img, #records b, #records i").length`)
			if n != 0 {
				t.Errorf("format %s: %d elements made from record bytes", format, n)
			}
			texts := eval[[]string](tb, `Array.from(document.querySelectorAll("#records pre.v, #records dt")).map((e) => e.textContent)`)
			joined := strings.Join(texts, "\n")
			for _, want := range []string{"<script>alert('x')</script>", htmlKey, "<b>h</b>", "<i>v</i>"} {
				if !strings.Contains(joined, want) {
					t.Errorf("format %s: text %q not shown", format, want)
				}
			}
		}
		tb.checkClean() // no alert() ran
	})

	t.Run("config-edit-round-trips", func(t *testing.T) {
		tb.t = t
		tb.nav("/topics/orders")
		tb.do(chromedp.SetValue(chromedp.CSS(`[id="cfg-retention.ms"]`), "7200000"))
		tb.submit(`button[aria-label="Save retention.ms"]`)
		if flash := eval[string](tb, `document.querySelector(".flash").innerText`); !strings.Contains(flash, `retention.ms set to "7200000"`) {
			t.Errorf("flash %q", flash)
		}
		if v := eval[string](tb, `document.getElementById("cfg-retention.ms").value`); v != "7200000" {
			t.Errorf("page shows %q after the edit", v)
		}
		rc, err := f.adm.DescribeTopicConfigs(ctxT(t), "orders")
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := rc.On("orders", nil)
		found := false
		for _, e := range cfg.Configs {
			if e.Key == "retention.ms" {
				found = e.MaybeValue() == "7200000"
			}
		}
		if !found {
			t.Error("the broker does not have the edited value")
		}
		// An invalid value is refused with the broker's message.
		tb.do(chromedp.SetValue(chromedp.CSS(`[id="cfg-retention.ms"]`), "ten"))
		tb.submit(`button[aria-label="Save retention.ms"]`)
		if cls := eval[string](tb, `document.querySelector(".flash").className`); cls != "flash error" {
			t.Errorf("invalid value: flash class %q", cls)
		}
		tb.submit(`button[aria-label="Use the default for retention.ms"]`)
		if v := eval[string](tb, `document.getElementById("cfg-retention.ms").value`); v != "604800000" {
			t.Errorf("after Use default: %q", v)
		}
		tb.checkClean()
	})

	t.Run("reset-preview-matches-execute", func(t *testing.T) {
		tb.t = t
		tb.nav("/groups/billing")
		tb.do(
			chromedp.SetValue(chromedp.ID("r-topic"), "orders"),
			chromedp.SetValue(chromedp.ID("r-to"), "shift"),
			chromedp.SetValue(chromedp.ID("r-value"), "-3"),
		)
		tb.submit(`form.reset button[type=submit]`)
		type row struct {
			P int32 `json:"p"`
			N int64 `json:"n"`
		}
		plan := eval[[]row](tb, `Array.from(document.querySelectorAll("#reset-plan tbody tr")).map((tr) => ({p: +tr.dataset.partition, n: +tr.dataset.new}))`)
		if len(plan) != 3 {
			t.Fatalf("plan %v", plan)
		}
		tb.submit(`form[action$="/reset"] button.danger`)
		if flash := eval[string](tb, `document.querySelector(".flash").innerText`); !strings.HasPrefix(flash, "Reset 3 partition(s)") {
			t.Errorf("flash %q", flash)
		}
		committed, err := f.adm.FetchOffsets(ctxT(t), "billing")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range plan {
			if o, ok := committed.Lookup("orders", r.P); !ok || o.At != r.N {
				t.Errorf("partition %d: committed %d, preview %d", r.P, o.At, r.N)
			}
		}
		tb.checkClean()
	})

	t.Run("live-tail", func(t *testing.T) {
		tb.t = t
		tb.nav("/topics/orders/messages?partition=0")
		tb.do(chromedp.Click(chromedp.ID("tail-toggle")))
		tb.waitFor(`document.getElementById("tail-status").innerText.startsWith("Live")`)
		f.produce(t, &kgo.Record{Topic: "orders", Partition: 0, Key: []byte("tailed"), Value: []byte(`<script>alert("tail")</script>`)})
		tb.waitFor(`Array.from(document.querySelectorAll("#record-rows pre.v")).some((e) => e.textContent === "tailed")`)
		if n := eval[int](tb, `document.querySelectorAll("#record-rows script").length`); n != 0 {
			t.Error("the tail inserted a script element")
		}
		tb.shot(dir, "tail")
		tb.do(chromedp.Click(chromedp.ID("tail-toggle")))
		tb.checkClean()
	})
}

// TestBrowserLogin: on a non-loopback listener the browser lands on the
// login page, a wrong password is refused, the right one opens the
// console; the login page passes the accessibility checks.
func TestBrowserLogin(t *testing.T) {
	b, base := startBroker(t, map[string]string{"strata.metrics.listener": "0.0.0.0:0"})
	addScramUser(t, b.Admin(), "alice", "s3cret!")
	tb := newTab(t, base)
	tb.nav("/topics")
	if path := eval[string](tb, `location.pathname`); path != "/login" {
		t.Fatalf("without login: at %s", path)
	}
	tb.checkA11y("/login")
	tb.shot(screenshotDir(t), "login")
	tb.do(chromedp.SendKeys(chromedp.ID("login-user"), "alice"), chromedp.SendKeys(chromedp.ID("login-password"), "wrong"))
	tb.submit(`form.login button`)
	if msg := eval[string](tb, `document.querySelector("p.error").innerText`); msg != "Wrong user name or password." {
		t.Errorf("wrong password: %q", msg)
	}
	if user := eval[string](tb, `document.getElementById("login-user").value`); user != "alice" {
		t.Errorf("user name not kept after a failed login: %q", user)
	}
	tb.do(chromedp.SendKeys(chromedp.ID("login-password"), "s3cret!"))
	tb.submit(`form.login button`)
	if path := eval[string](tb, `location.pathname`); path != "/topics" {
		t.Errorf("after login: at %s", path)
	}
	if user := eval[string](tb, `document.querySelector(".user").innerText`); user != "alice" {
		t.Errorf("user shown: %q", user)
	}
	// The session cookie is not readable by scripts.
	if ck := eval[string](tb, `document.cookie`); strings.Contains(ck, "strata_console=") {
		t.Errorf("session cookie visible to scripts: %q", ck)
	}
	tb.submit(`form.logout button`)
	if path := eval[string](tb, `location.pathname`); path != "/login" {
		t.Errorf("after logout: at %s", path)
	}
	tb.checkClean()
}

// BenchmarkFirstPaint1000Topics measures every page of a broker with
// 1,000 topics (and a group committed on 20 of them) in chromium: the
// first contentful paint and the server's response time from the
// browser's performance API (paint and navigation timing). Each of b.N
// rounds loads every page once, interleaved, so the load of the shared
// machine weighs on all pages alike; a page's ratio is the median over
// rounds of its paint over the empty page's (the 404 page: the same
// layout, stylesheet and script, no data and no Kafka request) in the same
// round. The load average before and after is reported with the figures
// (docs/benchmarks.md).
func BenchmarkFirstPaint1000Topics(b *testing.B) {
	base := start1000Topics(b)
	pages := []struct{ name, path string }{
		{"empty-404", "/no-such-page"},
		{"overview", "/"},
		{"topics", "/topics"},
		{"topic", "/topics/bench.topic-0500"},
		{"messages", "/topics/bench.topic-0500/messages"},
		{"groups", "/groups"},
		{"group", "/groups/bench-group"},
		{"compaction", "/compaction"},
	}
	tb := newTab(b, base)
	for _, pg := range pages {
		tb.nav(pg.path) // warm: templates, client metadata
	}
	type timing struct {
		FCP  float64 `json:"fcp"`
		Resp float64 `json:"resp"`
		Rows int     `json:"rows"`
	}
	fcps := make([][]float64, len(pages))
	resps := make([][]float64, len(pages))
	ratios := make([][]float64, len(pages))
	load0 := loadAverage(b)
	b.ResetTimer()
	for b.Loop() {
		var empty float64
		for i, pg := range pages {
			tb.nav(pg.path)
			tb.waitFor(`performance.getEntriesByName("first-contentful-paint").length > 0`)
			tm := eval[timing](tb, `(() => {
				const nav = performance.getEntriesByType("navigation")[0];
				const fcp = performance.getEntriesByName("first-contentful-paint")[0];
				return {fcp: fcp ? fcp.startTime : -1, resp: nav.responseEnd - nav.requestStart, rows: document.querySelectorAll("tbody tr").length};
			})()`)
			if tm.FCP <= 0 {
				b.Fatalf("%s: no first-contentful-paint entry", pg.path)
			}
			if pg.path == "/topics" && tm.Rows != 100 {
				b.Fatalf("%d rows", tm.Rows)
			}
			if i == 0 {
				empty = tm.FCP
			}
			fcps[i] = append(fcps[i], tm.FCP)
			resps[i] = append(resps[i], tm.Resp)
			ratios[i] = append(ratios[i], tm.FCP/empty)
		}
	}
	b.StopTimer()
	load1 := loadAverage(b)
	for i, pg := range pages {
		b.ReportMetric(median(fcps[i]), pg.name+"-fcp-ms")
		b.ReportMetric(median(resps[i]), pg.name+"-response-ms")
		if i > 0 {
			b.ReportMetric(median(ratios[i]), pg.name+"-x-empty")
		}
	}
	b.ReportMetric(load0, "load1-before")
	b.ReportMetric(load1, "load1-after")
	b.ReportMetric(0, "ns/op") // the loop's time is the browser's, not a figure
}

// loadAverage is the machine's one-minute load average (/proc/loadavg).
func loadAverage(b testing.TB) float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	var l float64
	if _, err := fmt.Sscan(string(raw), &l); err != nil {
		b.Fatal(err)
	}
	return l
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
