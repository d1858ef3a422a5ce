// Package sasl implements the server side of the SASL mechanisms Strata
// serves: PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802,
// RFC 7677), with Kafka's rules for SCRAM credentials (4096 to 16384
// iterations; the server keeps StoredKey and ServerKey, never the
// password). It knows nothing of the Kafka protocol: a Session consumes
// the client's tokens and produces the server's.
package sasl

import (
	"errors"
	"fmt"
)

// Mechanism names (Kafka's sasl.enabled.mechanisms values).
const (
	Plain        = "PLAIN"
	ScramSHA256  = "SCRAM-SHA-256"
	ScramSHA512  = "SCRAM-SHA-512"
	MinIteration = 4096  // Kafka's ScramMechanism.minIterations
	MaxIteration = 16384 // Kafka's ScramMechanism.maxIterations
)

// ErrAuthFailed is wrapped by every failed authentication; its message is
// what the client is told (SASL_AUTHENTICATION_FAILED).
var ErrAuthFailed = errors.New("authentication failed")

// authFailed wraps ErrAuthFailed with the message the client sees.
type authFailed struct{ msg string }

func (e *authFailed) Error() string { return e.msg }
func (e *authFailed) Unwrap() error { return ErrAuthFailed }

func failf(format string, args ...any) error { return &authFailed{msg: fmt.Sprintf(format, args...)} }

// Session is one authentication exchange on one connection.
type Session interface {
	// Step consumes the client's next token and returns the server's
	// answer; done is true when the client is authenticated. An error
	// wrapping ErrAuthFailed ends the exchange (the connection closes).
	Step(token []byte) (answer []byte, done bool, err error)
	// User is the authenticated user name (valid once done).
	User() string
}

// Credentials looks up what a mechanism checks a user against.
type Credentials interface {
	// PlainPassword returns the PLAIN password of user.
	PlainPassword(user string) (string, bool)
	// Scram returns user's credential for a SCRAM mechanism.
	Scram(mechanism, user string) (ScramCredential, bool)
}

// NewSession starts an exchange for an enabled mechanism.
func NewSession(mechanism string, creds Credentials) (Session, error) {
	switch mechanism {
	case Plain:
		return &plainSession{creds: creds}, nil
	case ScramSHA256, ScramSHA512:
		return &scramSession{mech: mechanism, creds: creds}, nil
	}
	return nil, fmt.Errorf("unsupported SASL mechanism %q", mechanism)
}
