package sasl

import (
	"bytes"
	"crypto/subtle"
)

// plainSession checks one PLAIN token: authzid NUL authcid NUL password.
type plainSession struct {
	creds Credentials
	user  string
}

// Step checks the single PLAIN message, with Kafka's PlainSaslServer
// messages.
func (p *plainSession) Step(token []byte) ([]byte, bool, error) {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, false, failf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	switch {
	case user == "":
		return nil, false, failf("Authentication failed: username not specified")
	case pass == "":
		return nil, false, failf("Authentication failed: password not specified")
	case authz != "" && authz != user:
		return nil, false, failf("Authentication failed: Client requested an authorization id that is different from username")
	}
	want, ok := p.creds.PlainPassword(user)
	if !ok || subtle.ConstantTimeCompare([]byte(want), []byte(pass)) != 1 {
		return nil, false, failf("Authentication failed: Invalid username or password")
	}
	p.user = user
	return nil, true, nil
}

func (p *plainSession) User() string { return p.user }
