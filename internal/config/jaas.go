package config

import (
	"errors"
	"fmt"
	"strings"
)

// plainLoginModule is the login module of Kafka's broker PLAIN users.
const plainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"

// jaasToken is one lexical item of a JAAS entry.
type jaasToken struct {
	text   string
	quoted bool
}

// lexJAAS splits a JAAS entry into words, quoted strings (double or
// single quotes, backslash escapes), "=" and ";".
func lexJAAS(v string) ([]jaasToken, error) {
	var out []jaasToken
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '=' || c == ';':
			out = append(out, jaasToken{text: string(c)})
			i++
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			for ; j < len(v) && v[j] != c; j++ {
				if v[j] == '\\' && j+1 < len(v) {
					j++
				}
				b.WriteByte(v[j])
			}
			if j >= len(v) {
				return nil, errors.New("unterminated quoted value")
			}
			out = append(out, jaasToken{text: b.String(), quoted: true})
			i = j + 1
		default:
			j := i
			for j < len(v) && !strings.ContainsRune(" \t\r\n=;\"'", rune(v[j])) {
				j++
			}
			out = append(out, jaasToken{text: v[i:j]})
			i = j
		}
	}
	return out, nil
}

// Login modules of Kafka's broker JAAS entries.
const (
	scramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// JAAS is one broker JAAS entry (Kafka's
// listener.name.<listener>.<mechanism>.sasl.jaas.config): the users a PLAIN
// listener accepts (user_NAME="password") and the broker's own client
// credentials (username, password), which it uses on the inter-broker
// listener (Kafka's SaslChannelBuilder in client mode reads the same entry).
type JAAS struct {
	Module   string
	Users    map[string]string
	Username string
	Password string
}

// ParsePlainJAAS parses Kafka's broker PLAIN JAAS entry,
// `org.apache.kafka.common.security.plain.PlainLoginModule required
// user_alice="alice-secret" user_bob="bob-secret";`, into its users
// (name -> password). username/password (the broker's inter-broker
// credentials) may be present; at least one user must be listed. Error
// messages never show a password.
func ParsePlainJAAS(v string) (map[string]string, error) {
	j, err := ParseJAAS(v, plainLoginModule)
	if err != nil {
		return nil, err
	}
	if len(j.Users) == 0 {
		return nil, errors.New("no users: list at least one user_NAME=\"password\"")
	}
	return j.Users, nil
}

// ParseJAAS parses one broker JAAS entry of the given login module
// (PlainLoginModule: user_NAME options and username/password;
// ScramLoginModule: username/password only, SCRAM users live in the
// cluster metadata).
func ParseJAAS(v, module string) (JAAS, error) {
	toks, err := lexJAAS(v)
	if err != nil {
		return JAAS{}, fmt.Errorf("malformed JAAS entry: %v", err)
	}
	if len(toks) < 3 || toks[0].quoted || toks[1].quoted {
		return JAAS{}, fmt.Errorf("malformed JAAS entry: expected %s required name=\"value\" ...;", module)
	}
	if toks[0].text != module {
		return JAAS{}, fmt.Errorf("login module %q is not supported here: this entry needs %s", toks[0].text, module)
	}
	switch toks[1].text {
	case "required", "requisite", "sufficient", "optional":
	default:
		return JAAS{}, fmt.Errorf("malformed JAAS entry: login module flag %q is not one of required, requisite, sufficient, optional", toks[1].text)
	}
	j := JAAS{Module: module, Users: map[string]string{}}
	seen := map[string]bool{}
	rest := toks[2:]
	for len(rest) > 0 && (rest[0].quoted || rest[0].text != ";") {
		if len(rest) < 3 || rest[0].quoted || rest[1].text != "=" || rest[1].quoted || (!rest[2].quoted && (rest[2].text == ";" || rest[2].text == "=")) {
			return JAAS{}, fmt.Errorf("malformed JAAS entry: expected name=\"value\" after %s", toks[1].text)
		}
		name, value := rest[0].text, rest[2].text
		rest = rest[3:]
		if seen[name] {
			return JAAS{}, fmt.Errorf("option %s is listed twice", name)
		}
		seen[name] = true
		user, isUser := strings.CutPrefix(name, "user_")
		switch {
		case name == "username":
			if value == "" {
				return JAAS{}, errors.New("option username is empty")
			}
			j.Username = value
		case name == "password":
			if value == "" {
				return JAAS{}, errors.New("option password is empty")
			}
			j.Password = value
		case isUser && module == plainLoginModule:
			if user == "" {
				return JAAS{}, errors.New("option user_ has no user name")
			}
			if value == "" {
				return JAAS{}, fmt.Errorf("user %s has an empty password", user)
			}
			j.Users[user] = value
		case module == plainLoginModule:
			return JAAS{}, fmt.Errorf("option %s is not supported (list users as user_NAME=\"password\", the broker's own credentials as username and password)", name)
		default:
			return JAAS{}, fmt.Errorf("option %s is not supported (ScramLoginModule takes the broker's own credentials, username and password; SCRAM users are created with AlterUserScramCredentials)", name)
		}
	}
	if len(rest) == 0 {
		return JAAS{}, errors.New("malformed JAAS entry: missing the terminating ';'")
	}
	if len(rest) > 1 {
		return JAAS{}, errors.New("malformed JAAS entry: exactly one login module is allowed (text after ';')")
	}
	if (j.Username == "") != (j.Password == "") {
		return JAAS{}, errors.New("username and password must be set together (the broker's inter-broker credentials)")
	}
	if module == scramLoginModule && j.Username == "" {
		return JAAS{}, errors.New("no credentials: ScramLoginModule needs username and password (the broker's inter-broker credentials)")
	}
	return j, nil
}
