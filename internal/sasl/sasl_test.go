package sasl

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// testCreds holds one PLAIN user and one SCRAM-SHA-256 user.
type testCreds struct{ scram ScramCredential }

func (c testCreds) PlainPassword(user string) (string, bool) {
	return "pw", user == "u"
}

func (c testCreds) Scram(mech, user string) (ScramCredential, bool) {
	return c.scram, mech == ScramSHA256 && user == "user"
}

// TestScramRFC7677 replays the SCRAM-SHA-256 example exchange of RFC 7677
// section 3 (user "user", password "pencil") against the server.
func TestScramRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	sp, err := SaltPassword(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred, _ := NewScramCredential(ScramSHA256, sp, salt, 4096)
	s, _ := NewSession(ScramSHA256, testCreds{cred})
	first, done, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatal(err)
	}
	ss := s.(*scramSession)
	// Replace the random server nonce with the RFC's.
	ss.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	ss.serverFirst = "r=" + ss.nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	if !strings.HasPrefix(string(first), "r=rOprNGfwEbeRWgbNEkqO") || !strings.HasSuffix(string(first), ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096") {
		t.Fatalf("server-first %q", first)
	}
	final, done, err := s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done || s.User() != "user" {
		t.Fatal(err, done)
	}
	if string(final) != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Errorf("server-final %q", final)
	}
}

func TestScramRejects(t *testing.T) {
	salt := []byte("salt")
	sp, _ := SaltPassword(ScramSHA256, "pencil", salt, 4096)
	cred, _ := NewScramCredential(ScramSHA256, sp, salt, 4096)
	for _, first := range []string{"p=tls-unique,,n=user,r=x", "n,,n=nobody,r=x", "n,,n=user,r=x,tokenauth=true", "n,a=other,n=user,r=x", "n,,n=us=er,r=x", "garbage", "n,,r=x"} {
		s, _ := NewSession(ScramSHA256, testCreds{cred})
		if _, _, err := s.Step([]byte(first)); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("client-first %q: %v", first, err)
		}
	}
	s, _ := NewSession(ScramSHA256, testCreds{cred})
	sf, _, err := s.Step([]byte("n,,n=user,r=abc"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
	if _, _, err := s.Step([]byte("c=biws,r=" + nonce + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 32)))); !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "invalid credentials with SASL mechanism SCRAM-SHA-256") {
		t.Errorf("wrong proof: %v", err)
	}
}

func TestPlain(t *testing.T) {
	for tok, ok := range map[string]bool{"\x00u\x00pw": true, "u\x00u\x00pw": true, "x\x00u\x00pw": false, "\x00u\x00bad": false, "\x00v\x00pw": false, "\x00\x00pw": false, "\x00u\x00": false, "u\x00pw": false} {
		s, _ := NewSession(Plain, testCreds{})
		_, done, err := s.Step([]byte(tok))
		if done != ok || (err == nil) != ok || (err != nil && !errors.Is(err, ErrAuthFailed)) {
			t.Errorf("%q: done %v err %v", tok, done, err)
		}
	}
}

// FuzzSessions feeds arbitrary client tokens to every mechanism: errors,
// never panics.
func FuzzSessions(f *testing.F) {
	f.Add([]byte("n,,n=user,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("\x00u\x00pw"), []byte{})
	f.Add([]byte("y,a=user,n=user,r=x"), []byte("c=eSxhPXVzZXIs,r=x,p="))
	salt := []byte("salt")
	sp, _ := SaltPassword(ScramSHA256, "pencil", salt, 4096)
	cred, _ := NewScramCredential(ScramSHA256, sp, salt, 4096)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		for _, m := range []string{Plain, ScramSHA256} {
			s, _ := NewSession(m, testCreds{cred})
			if _, _, err := s.Step(a); err == nil {
				_, _, _ = s.Step(b)
			}
		}
	})
}

// TestVerifyScramPassword checks a password against a stored credential
// (the RFC 7677 example's): the right one matches, a wrong one, another
// mechanism's hash or a damaged credential does not.
func TestVerifyScramPassword(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	sp, err := SaltPassword(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred, _ := NewScramCredential(ScramSHA256, sp, salt, 4096)
	if !VerifyScramPassword(ScramSHA256, "pencil", cred) {
		t.Error("right password refused")
	}
	for name, ok := range map[string]bool{
		"wrong":  VerifyScramPassword(ScramSHA256, "pencil2", cred),
		"empty":  VerifyScramPassword(ScramSHA256, "", cred),
		"sha512": VerifyScramPassword(ScramSHA512, "pencil", cred),
		"plain":  VerifyScramPassword("PLAIN", "pencil", cred),
	} {
		if ok {
			t.Errorf("%s: accepted", name)
		}
	}
	bad := cred
	bad.StoredKey = append([]byte(nil), cred.StoredKey...)
	bad.StoredKey[0] ^= 1
	if VerifyScramPassword(ScramSHA256, "pencil", bad) {
		t.Error("damaged stored key accepted")
	}
}
