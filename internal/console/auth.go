package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/sasl"
)

// cookieName holds the browser's id: a session id once logged in, else an
// anonymous id that the CSRF token is bound to.
const cookieName = "strata_console"

// Session limits: a login lasts at most sessionTTL, and idleTTL without a
// request; at most maxSessions are kept (the oldest goes first).
const (
	sessionTTL  = 12 * time.Hour
	idleTTL     = 2 * time.Hour
	maxSessions = 10000
)

// session is one browser's state.
type session struct {
	id   string
	user string // "" when not logged in
	// fresh is set when the cookie was (re)issued by this response.
	fresh   bool
	created time.Time
	seen    time.Time
}

// auth holds the logged-in sessions and the key CSRF tokens are made with.
type auth struct {
	key   []byte
	creds Credentials
	// checks bounds password checks running at once (each salts the
	// password thousands of times); a failed one holds its slot for
	// failDelay, so guessing runs at a few tries a second at most.
	checks chan struct{}

	mu       sync.Mutex
	sessions map[string]*session
}

// failDelay is how long a failed login waits before answering.
const failDelay = time.Second

func newAuth(key []byte, creds Credentials) *auth {
	return &auth{key: key, creds: creds, checks: make(chan struct{}, 2), sessions: map[string]*session{}}
}

func newID() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("console: crypto/rand failed: " + err.Error()) // never returns an error on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// isHTTPS reports whether the browser reached us over HTTPS (directly or
// through a TLS-terminating proxy that says so).
func isHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func setCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: isHTTPS(r),
	})
}

// session returns the request's session, issuing an anonymous id when the
// browser has none. ok is false when a login is required and missing.
func (a *auth) session(w http.ResponseWriter, r *http.Request, requireLogin bool) (*session, bool) {
	now := time.Now()
	if ck, err := r.Cookie(cookieName); err == nil && len(ck.Value) == 43 {
		a.mu.Lock()
		s, found := a.sessions[ck.Value]
		if found && (now.Sub(s.created) > sessionTTL || now.Sub(s.seen) > idleTTL) {
			delete(a.sessions, ck.Value)
			found = false
		}
		if found {
			s.seen = now
			cp := *s
			a.mu.Unlock()
			return &cp, true
		}
		a.mu.Unlock()
		return &session{id: ck.Value}, !requireLogin
	}
	s := &session{id: newID(), fresh: true}
	setCookie(w, r, s.id)
	return s, !requireLogin
}

// csrfToken is the token a session's forms carry: an HMAC of its id.
func (a *auth) csrfToken(s *session) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte("csrf\x00" + s.id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkPost refuses a POST that another site may have made: a
// cross-site fetch, a foreign Origin, or a missing or wrong CSRF token.
func (a *auth) checkPost(r *http.Request, s *session) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return errors.New("cross-site request refused")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return errors.New("cross-origin request refused")
		}
	}
	if s.fresh {
		return errors.New("missing session cookie: reload the page and try again")
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(a.csrfToken(s))) != 1 {
		return errors.New("invalid or missing CSRF token: reload the page and try again")
	}
	return nil
}

// scramMechanisms are the credentials a login is checked against.
var scramMechanisms = []string{sasl.ScramSHA512, sasl.ScramSHA256}

// checkPassword reports whether password is user's, against any of the
// user's stored SCRAM credentials.
func (a *auth) checkPassword(ctx context.Context, user, password string) bool {
	select {
	case a.checks <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-a.checks }()
	ok, found := false, false
	if a.creds != nil && user != "" {
		for _, mech := range scramMechanisms {
			if cred, has := a.creds.ScramCredential(mech, user); has {
				found = true
				if sasl.VerifyScramPassword(mech, password, cred) {
					ok = true
				}
			}
		}
	}
	if !found {
		// Spend the same work for an unknown user as for a known one.
		salt := []byte("strata-console-unknown-user")
		_, _ = sasl.SaltPassword(sasl.ScramSHA256, password, salt, 4096)
	}
	if !ok {
		t := time.NewTimer(failDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return ok
}

// login replaces the browser's id with a new logged-in session (a new id,
// so an id planted before the login is worth nothing after it).
func (a *auth) login(w http.ResponseWriter, r *http.Request, old *session, user string) {
	now := time.Now()
	s := &session{id: newID(), user: user, created: now, seen: now}
	a.mu.Lock()
	delete(a.sessions, old.id)
	if len(a.sessions) >= maxSessions {
		a.evictLocked(now)
	}
	a.sessions[s.id] = s
	a.mu.Unlock()
	setCookie(w, r, s.id)
}

// evictLocked drops expired sessions, then the oldest if still full.
func (a *auth) evictLocked(now time.Time) {
	var oldest *session
	for id, s := range a.sessions {
		if now.Sub(s.created) > sessionTTL || now.Sub(s.seen) > idleTTL {
			delete(a.sessions, id)
			continue
		}
		if oldest == nil || s.seen.Before(oldest.seen) {
			oldest = s
		}
	}
	if len(a.sessions) >= maxSessions && oldest != nil {
		delete(a.sessions, oldest.id)
	}
}

// logout ends a session and gives the browser a new anonymous id.
func (a *auth) logout(w http.ResponseWriter, r *http.Request, s *session) {
	a.mu.Lock()
	delete(a.sessions, s.id)
	a.mu.Unlock()
	setCookie(w, r, newID())
}

type sessionKey struct{}

func withSession(ctx context.Context, s *session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	if s == nil {
		return &session{}
	}
	return s
}

// safeNext keeps a post-login redirect on this site (a path, not
// "//host" or a URL).
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
