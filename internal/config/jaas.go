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

// ParsePlainJAAS parses Kafka's broker PLAIN JAAS entry,
// `org.apache.kafka.common.security.plain.PlainLoginModule required
// user_alice="alice-secret" user_bob="bob-secret";`, into its users
// (name -> password). Exactly one login module; user_NAME options only
// (username/password are Kafka's inter-broker client credentials, which a
// single Strata node never uses); error messages never show a password.
func ParsePlainJAAS(v string) (map[string]string, error) {
	toks, err := lexJAAS(v)
	if err != nil {
		return nil, fmt.Errorf("malformed JAAS entry: %v", err)
	}
	if len(toks) < 3 || toks[0].quoted || toks[1].quoted {
		return nil, fmt.Errorf("malformed JAAS entry: expected %s required user_NAME=\"password\" ...;", plainLoginModule)
	}
	if toks[0].text != plainLoginModule {
		return nil, fmt.Errorf("login module %q is not supported: PLAIN users need %s", toks[0].text, plainLoginModule)
	}
	switch toks[1].text {
	case "required", "requisite", "sufficient", "optional":
	default:
		return nil, fmt.Errorf("malformed JAAS entry: login module flag %q is not one of required, requisite, sufficient, optional", toks[1].text)
	}
	users := map[string]string{}
	rest := toks[2:]
	for len(rest) > 0 && (rest[0].quoted || rest[0].text != ";") {
		if len(rest) < 3 || rest[0].quoted || rest[1].text != "=" || rest[1].quoted || (!rest[2].quoted && (rest[2].text == ";" || rest[2].text == "=")) {
			return nil, fmt.Errorf("malformed JAAS entry: expected name=\"value\" after %s", toks[1].text)
		}
		name, value := rest[0].text, rest[2].text
		rest = rest[3:]
		user, ok := strings.CutPrefix(name, "user_")
		switch {
		case name == "username" || name == "password":
			return nil, fmt.Errorf("option %s is not supported: it is the inter-broker client credential, which a single Strata node never uses (list users as user_NAME=\"password\")", name)
		case !ok:
			return nil, fmt.Errorf("option %s is not supported (list users as user_NAME=\"password\")", name)
		case user == "":
			return nil, errors.New("option user_ has no user name")
		case value == "":
			return nil, fmt.Errorf("user %s has an empty password", user)
		}
		if _, dup := users[user]; dup {
			return nil, fmt.Errorf("user %s is listed twice", user)
		}
		users[user] = value
	}
	if len(rest) == 0 {
		return nil, errors.New("malformed JAAS entry: missing the terminating ';'")
	}
	if len(rest) > 1 {
		return nil, errors.New("malformed JAAS entry: exactly one login module is allowed (text after ';')")
	}
	if len(users) == 0 {
		return nil, errors.New("no users: list at least one user_NAME=\"password\"")
	}
	return users, nil
}
