package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strings"
)

// ScramCredential is what the server keeps of a SCRAM password (RFC 5802
// section 3): never the password itself.
type ScramCredential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// hashOf returns the hash of a SCRAM mechanism (nil if not SCRAM).
func hashOf(mech string) func() hash.Hash {
	switch mech {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// IsScram reports whether mech is a SCRAM mechanism Strata serves.
func IsScram(mech string) bool { return hashOf(mech) != nil }

func hmacOf(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// NewScramCredential derives StoredKey and ServerKey from a salted
// password (Hi(password, salt, iterations), which Kafka's
// AlterUserScramCredentials request carries).
func NewScramCredential(mech string, saltedPassword, salt []byte, iterations int) (ScramCredential, error) {
	h := hashOf(mech)
	if h == nil {
		return ScramCredential{}, fmt.Errorf("unsupported SCRAM mechanism %q", mech)
	}
	clientKey := hmacOf(h, saltedPassword, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return ScramCredential{
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  stored.Sum(nil),
		ServerKey:  hmacOf(h, saltedPassword, "Server Key"),
	}, nil
}

// SaltPassword computes Hi(password, salt, iterations) for mech (what a
// client sends in AlterUserScramCredentials).
func SaltPassword(mech, password string, salt []byte, iterations int) ([]byte, error) {
	h := hashOf(mech)
	if h == nil {
		return nil, fmt.Errorf("unsupported SCRAM mechanism %q", mech)
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// VerifyScramPassword reports whether password is the one cred was made
// from: it salts the password as a SCRAM client would, derives StoredKey
// (H(HMAC(SaltedPassword, "Client Key")), RFC 5802 section 3) and compares
// it in constant time. The web console checks its logins with it.
func VerifyScramPassword(mech, password string, cred ScramCredential) bool {
	salted, err := SaltPassword(mech, password, cred.Salt, cred.Iterations)
	if err != nil {
		return false
	}
	derived, err := NewScramCredential(mech, salted, cred.Salt, cred.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(derived.StoredKey, cred.StoredKey) == 1
}

// scramSession is the server side of one SCRAM exchange: client-first,
// server-first, client-final, server-final.
type scramSession struct {
	mech  string
	creds Credentials
	step  int
	user  string
	cred  ScramCredential
	// gs2 is the client's GS2 header; nonce the combined nonce;
	// firstBare and serverFirst are parts of the AuthMessage.
	gs2, nonce, firstBare, serverFirst string
}

func (s *scramSession) User() string { return s.user }

// invalidCreds is Kafka's message for a bad SCRAM user or proof.
func (s *scramSession) invalidCreds() error {
	return failf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", s.mech)
}

// Step runs the next message of the exchange.
func (s *scramSession) Step(token []byte) ([]byte, bool, error) {
	s.step++
	switch s.step {
	case 1:
		out, err := s.clientFirst(string(token))
		return out, false, err
	case 2:
		out, err := s.clientFinal(string(token))
		return out, err == nil, err
	}
	return nil, false, failf("Authentication failed: unexpected SCRAM message after the exchange completed")
}

// clientFirst parses "gs2-header client-first-bare" and answers
// server-first: r=nonce,s=salt,i=iterations.
func (s *scramSession) clientFirst(msg string) ([]byte, error) {
	cbind, rest, ok1 := strings.Cut(msg, ",")
	authz, bare, ok2 := strings.Cut(rest, ",")
	if !ok1 || !ok2 {
		return nil, failf("Authentication failed: invalid SCRAM client-first message")
	}
	switch {
	case cbind == "n" || cbind == "y":
	case strings.HasPrefix(cbind, "p="):
		return nil, failf("Authentication failed: SCRAM channel binding is not supported")
	default:
		return nil, failf("Authentication failed: invalid SCRAM GS2 header")
	}
	s.gs2 = cbind + "," + authz + ","
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) == 2 {
		return nil, failf("Authentication failed: invalid SCRAM client-first message")
	}
	user, err := unescapeName(attrs[0][2:])
	if err != nil {
		return nil, err
	}
	for _, ext := range attrs[2:] {
		if strings.HasPrefix(ext, "tokenauth=") {
			return nil, failf("Authentication failed: delegation tokens are not supported")
		}
		if strings.HasPrefix(ext, "m=") {
			return nil, failf("Authentication failed: unsupported SCRAM extension")
		}
	}
	if authz != "" {
		az, err := unescapeName(strings.TrimPrefix(authz, "a="))
		if err != nil || !strings.HasPrefix(authz, "a=") || az != user {
			return nil, failf("Authentication failed: Authorization id %s is not the same as user name %s", strings.TrimPrefix(authz, "a="), user)
		}
	}
	cred, ok := s.creds.Scram(s.mech, user)
	if !ok {
		return nil, s.invalidCreds()
	}
	var rnd [18]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("scram nonce: %w", err)
	}
	s.user, s.cred, s.firstBare = user, cred, bare
	s.nonce = attrs[1][2:] + base64.RawURLEncoding.EncodeToString(rnd[:])
	s.serverFirst = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(cred.Salt), cred.Iterations)
	return []byte(s.serverFirst), nil
}

// clientFinal checks "c=...,r=...,p=proof" and answers v=signature.
func (s *scramSession) clientFinal(msg string) ([]byte, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, failf("Authentication failed: invalid SCRAM client-final message")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(s.gs2)) {
		return nil, failf("Authentication failed: invalid SCRAM channel binding")
	}
	// Kafka checks that the client's nonce ends with the server's, not
	// that it equals it: librdkafka sends its client nonce again in front.
	if !strings.HasPrefix(attrs[1], "r=") || !strings.HasSuffix(attrs[1], s.nonce) {
		return nil, failf("Authentication failed: invalid SCRAM nonce in the final client message")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	h := hashOf(s.mech)
	if err != nil || len(proof) != h().Size() {
		return nil, s.invalidCreds()
	}
	authMsg := s.firstBare + "," + s.serverFirst + "," + withoutProof
	sig := hmacOf(h, s.cred.StoredKey, authMsg)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ sig[j]
	}
	stored := h()
	stored.Write(clientKey)
	if subtle.ConstantTimeCompare(stored.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, s.invalidCreds()
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(h, s.cred.ServerKey, authMsg))), nil
}

// unescapeName decodes a SCRAM saslname (=2C is ",", =3D is "=").
func unescapeName(v string) (string, error) {
	if !strings.Contains(v, "=") {
		return v, nil
	}
	var b bytes.Buffer
	for i := 0; i < len(v); i++ {
		if v[i] != '=' {
			b.WriteByte(v[i])
			continue
		}
		switch {
		case strings.HasPrefix(v[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(v[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", failf("Authentication failed: invalid SCRAM user name encoding")
		}
		i += 2
	}
	return b.String(), nil
}
