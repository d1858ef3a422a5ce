package console

import (
	"net/http"
	"strings"
)

type loginData struct {
	Next     string
	User     string
	Error    string
	Insecure bool // a login over plain HTTP off loopback
	Needed   bool
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	d := loginData{Next: safeNext(r.URL.Query().Get("next")), Needed: c.requireLogin, Insecure: !isHTTPS(r) && !loopbackHost(r.Host)}
	c.render(w, r, http.StatusOK, "login", "Log in", "", d)
}

// login checks a user's password against its stored SCRAM credentials
// and starts a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	user := strings.TrimSpace(r.PostFormValue("user"))
	next := safeNext(r.PostFormValue("next"))
	if !c.requireLogin {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if !c.auth.checkPassword(r.Context(), user, r.PostFormValue("password")) {
		c.logger.Info("console login refused", "user", user, "remote", r.RemoteAddr)
		d := loginData{Next: next, User: user, Error: "Wrong user name or password.", Needed: true, Insecure: !isHTTPS(r) && !loopbackHost(r.Host)}
		c.render(w, r, http.StatusUnauthorized, "login", "Log in", "", d)
		return
	}
	c.auth.login(w, r, sessionFrom(r.Context()), user)
	c.logger.Info("console login", "user", user, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	c.auth.logout(w, r, sessionFrom(r.Context()))
	target := "/"
	if c.requireLogin {
		target = "/login"
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}
