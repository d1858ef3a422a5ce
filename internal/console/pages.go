package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

//go:embed web
var webFS embed.FS

// pageNames are the page templates (web/<name>.html), each rendered
// inside web/layout.html.
var pageNames = []string{"overview", "topics", "topic", "messages", "groups", "group", "reset", "compaction", "login", "error"}

// pages holds the parsed templates and the static assets' version.
type pages struct {
	t       map[string]*template.Template
	version string
}

// staticVersion is a hash of the static assets, added to their URLs so
// that a new binary's assets are never taken from a stale cache.
var staticVersion = func() string {
	h := sha256.New()
	_ = fs.WalkDir(webFS, "web/static", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := webFS.ReadFile(path)
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}()

func loadPages() (*pages, error) {
	p := &pages{t: map[string]*template.Template{}, version: staticVersion}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(webFS, "web/layout.html", "web/parts.html", "web/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		p.t[name] = t
	}
	return p, nil
}

func staticHandler() http.Handler {
	sub, _ := fs.Sub(webFS, "web")
	fsrv := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		fsrv.ServeHTTP(w, r)
	})
}

// view is what every page template gets.
type view struct {
	Title         string
	Nav           string
	User          string
	CSRF          string
	LoginRequired bool
	Static        string // version suffix of the asset URLs
	Flash         *flash
	Data          any
}

// flash is a one-time message shown after a redirect.
type flash struct {
	Error bool   `json:"e,omitempty"`
	Text  string `json:"t"`
}

const flashCookie = "strata_console_flash"

// redirect sends the browser to target with a one-time message.
func (c *Console) redirect(w http.ResponseWriter, r *http.Request, target string, f flash) {
	b, _ := json.Marshal(f)
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString(b), Path: "/", MaxAge: 60,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isHTTPS(r),
	})
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// takeFlash reads and clears the one-time message.
func takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isHTTPS(r)})
	b, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil {
		return nil
	}
	var f flash
	if json.Unmarshal(b, &f) != nil || f.Text == "" {
		return nil
	}
	return &f
}

// render writes page name with data.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title, nav string, data any) {
	s := sessionFrom(r.Context())
	v := view{
		Title: title, Nav: nav, User: s.user, CSRF: c.auth.csrfToken(s), LoginRequired: c.requireLogin,
		Static: c.pages.version, Flash: takeFlash(w, r), Data: data,
	}
	var buf bytes.Buffer
	if err := c.pages.t[name].Execute(&buf, v); err != nil {
		c.logger.Error("render failed", "page", name, "err", err)
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders the error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status >= 500 {
		c.logger.Warn("console page failed", "path", r.URL.Path, "err", err)
	}
	c.render(w, r, status, "error", http.StatusText(status), "", err.Error())
}

var funcs = template.FuncMap{
	"bytes":     fmtBytes,
	"num":       fmtNum,
	"rate":      fmtRate,
	"bytesRate": fmtBytesRate,
	"pct":       func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" },
	"ratio":     func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"ts":        fmtTime,
	"tsp":       func(t *time.Time) string { return fmtTimeP(t) },
	"ms":        func(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() },
	"ids":       fmtIDs,
	"idList":    idList,
	"pathEsc":   url.PathEscape,
	"queryEsc":  url.QueryEscape,
}

func fmtBytes(n int64) string {
	if n < 0 {
		return "—"
	}
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, i := float64(n), 0
	for f >= unit && i < 5 {
		f /= unit
		i++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + []string{"", "KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}

func fmtNum(n int64) string {
	if n < 0 {
		return "—"
	}
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fmtRate(f float64) string {
	switch {
	case f < 0 || math.IsNaN(f):
		return "—"
	case f >= 100:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case f >= 10:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func fmtTimeP(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return fmtTime(*t)
}

func fmtIDs(ids []int32) string {
	if len(ids) == 0 {
		return "—"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ", ")
}

// idList is fmtIDs, but empty for none (a form value).
func idList(ids []int32) string {
	if len(ids) == 0 {
		return ""
	}
	return fmtIDs(ids)
}
