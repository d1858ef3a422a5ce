package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/strata-io/strata/internal/authz"
	"github.com/strata-io/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// saslState is a connection's SASL authentication progress (SASL
// listeners only; handlers run one at a time, so no lock).
type saslState struct {
	mechanism string       // chosen by SaslHandshake
	session   sasl.Session // running exchange
	user      string       // set once authenticated
	done      bool
}

// preAuthAllowed are the only API keys served before a SASL client has
// authenticated (Kafka's SaslServerAuthenticator).
func preAuthAllowed(key int16) bool { return key == 18 || key == 17 || key == 36 }

// checkAuthenticated enforces Kafka's rule on a SASL listener: until
// SaslAuthenticate succeeds only ApiVersions, SaslHandshake and
// SaslAuthenticate are accepted; anything else closes the connection.
func (c *conn) checkAuthenticated(req request) error {
	if len(c.l.SASLMechanisms) == 0 || c.sasl.done || preAuthAllowed(req.key) {
		return nil
	}
	return fmt.Errorf("unexpected request (api key %d) before SASL authentication: %w", req.key, kerr.IllegalSaslState)
}

// credentials is what the SASL mechanisms check users against: the PLAIN
// users of the listener's JAAS entry and the broker's SCRAM store.
type credentials struct {
	s *Server
	l *served
}

func (cr credentials) PlainPassword(user string) (string, bool) {
	p, ok := cr.l.PlainUsers[user]
	return p, ok
}

func (cr credentials) Scram(mechanism, user string) (sasl.ScramCredential, bool) {
	return cr.s.b.ScramCredential(mechanism, user)
}

// handleSaslHandshake (key 17, v0-1) picks the mechanism of the
// connection; a mechanism that is not enabled gets
// UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection
// closes (as Kafka). After v1 the tokens come in SaslAuthenticate
// requests; after v0 they come unframed (readRawTokens). A second
// handshake before authenticating closes the connection; after it,
// ILLEGAL_SASL_STATE (as Kafka's KafkaApis).
func (s *Server) handleSaslHandshake(_ context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	rep, err := s.saslHandshake(c, req)
	if req.Version == 0 { // the reader waits: unframed tokens next, or not
		c.rawNext <- err == nil && c.sasl.session != nil && !c.sasl.done
	}
	return rep, err
}

// saslHandshake answers a SaslHandshake; an unsupported mechanism is
// answered then the connection closes, as Kafka.
func (s *Server) saslHandshake(c *conn, req *kmsg.SASLHandshakeRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = append([]string(nil), c.l.SASLMechanisms...)
	switch {
	case c.sasl.done:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return reply{msg: resp}, nil
	case c.sasl.mechanism != "":
		return reply{}, fmt.Errorf("second SaslHandshake during SASL authentication: %w", kerr.IllegalSaslState)
	case !slices.Contains(c.l.SASLMechanisms, req.Mechanism):
		s.logger.Info("closing connection: SASL mechanism not enabled", "remote", c.remote, "mechanism", req.Mechanism)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return reply{msg: resp, closeAfter: true}, nil
	}
	sess, err := sasl.NewSession(req.Mechanism, credentials{s, c.l})
	if err != nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return reply{msg: resp, closeAfter: true}, nil
	}
	c.sasl.mechanism, c.sasl.session = req.Mechanism, sess
	return reply{msg: resp}, nil
}

// handleSaslAuthenticate (key 36, v0-2) runs one step of the chosen
// mechanism. Bad credentials get SASL_AUTHENTICATION_FAILED with Kafka's
// message and the connection closes once it is sent. Sessions do not
// expire (session_lifetime_ms 0: no re-authentication).
func (s *Server) handleSaslAuthenticate(_ context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	switch {
	case c.sasl.done:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("the connection is already authenticated (re-authentication is not supported)")
		return reply{msg: resp}, nil
	case c.sasl.session == nil:
		return reply{}, fmt.Errorf("SaslAuthenticate before SaslHandshake: %w", kerr.IllegalSaslState)
	}
	answer, done, err := c.sasl.session.Step(req.SASLAuthBytes)
	if err != nil {
		if !errors.Is(err, sasl.ErrAuthFailed) {
			return reply{}, err
		}
		s.logger.Info("SASL authentication failed", "remote", c.remote, "mechanism", c.sasl.mechanism, "err", err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return reply{msg: resp, closeAfter: true}, nil
	}
	resp.SASLAuthBytes = answer
	if done {
		c.sasl.done, c.sasl.user, c.sasl.session = true, c.sasl.session.User(), nil
		c.setPrincipal(authz.User(c.sasl.user))
		c.authed.Store(true)
		s.logger.Debug("SASL authenticated", "remote", c.remote, "mechanism", c.sasl.mechanism, "user", c.sasl.user)
	}
	return reply{msg: resp}, nil
}

// maxRawToken bounds an unframed SASL token and every request before
// SASL authentication (Kafka's sasl.server.max.receive.size default).
const maxRawToken = 524288

// preAuthSizeOK bounds a request read before SASL authentication to
// maxRawToken, as Kafka does, so an unauthenticated client cannot make the
// broker buffer socket.request.max.bytes. It waits for the next frame's
// size first: a client sends the request after SaslAuthenticate only once
// it has the answer, by when authed is set. False closes the connection.
func (c *conn) preAuthSizeOK(br *bufio.Reader) bool {
	if len(c.l.SASLMechanisms) == 0 || c.authed.Load() {
		return true
	}
	size, err := br.Peek(4)
	if err != nil {
		return true // readFrame sees the same error
	}
	if n := binary.BigEndian.Uint32(size); n > maxRawToken && !c.authed.Load() {
		c.s.logger.Warn("closing connection: request before SASL authentication too large", "remote", c.remote, "size", n, "max", maxRawToken)
		return false
	}
	return true
}

// readRawTokens runs on the reader after a SaslHandshake v0: while the
// serve loop says so (rawNext), the next frames are unframed SASL tokens
// (size and bytes, no request header), as Kafka before SaslAuthenticate.
// False ends the connection.
func (c *conn) readRawTokens(br *bufio.Reader, out chan<- request) bool {
	for {
		select {
		case raw := <-c.rawNext:
			if !raw {
				return true
			}
		case <-c.quit:
			return false
		case <-c.s.ctx.Done():
			return false
		}
		if !c.acquire() {
			return false
		}
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return false
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > maxRawToken {
			c.s.logger.Warn("closing connection: SASL token too large", "remote", c.remote, "size", n)
			return false
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return false
		}
		c.hold(len(body))
		out <- request{header: header{key: 36}, raw: true, size: len(body), body: body}
	}
}

// rawToken runs one unframed SASL token through the session. A failure
// closes the connection without an answer (the unframed exchange has no
// error field; Kafka closes it too); success answers the server's token.
func (c *conn) rawToken(req request) (reply, error) {
	if c.sasl.session == nil {
		return reply{}, fmt.Errorf("unframed SASL token without a mechanism: %w", kerr.IllegalSaslState)
	}
	answer, done, err := c.sasl.session.Step(req.body)
	if err != nil {
		if errors.Is(err, sasl.ErrAuthFailed) {
			c.s.logger.Info("SASL authentication failed", "remote", c.remote, "mechanism", c.sasl.mechanism, "err", err)
		}
		return reply{}, fmt.Errorf("SASL authentication (unframed tokens): %w", err)
	}
	if done {
		c.sasl.done, c.sasl.user, c.sasl.session = true, c.sasl.session.User(), nil
		c.setPrincipal(authz.User(c.sasl.user))
		c.authed.Store(true)
		c.s.logger.Debug("SASL authenticated", "remote", c.remote, "mechanism", c.sasl.mechanism, "user", c.sasl.user)
	}
	c.rawNext <- !done
	if answer == nil {
		answer = []byte{}
	}
	return reply{token: answer}, nil
}
