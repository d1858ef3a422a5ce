package config

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
)

// EnvPrefix prefixes the environment variable of every broker setting.
const EnvPrefix = "STRATA_"

// EnvName returns the environment variable for a broker setting:
// log.dirs -> STRATA_LOG_DIRS.
func EnvName(setting string) string {
	return EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(setting))
}

var envIndex = func() map[string]string {
	m := make(map[string]string, len(brokerTable))
	for _, s := range brokerTable {
		m[EnvName(s.Name)] = s.Name
	}
	return m
}()

// LoadBroker builds broker settings from, in rising precedence, a
// server.properties-style file (path may be empty), the environment
// (STRATA_LOG_DIRS for log.dirs: upper-case, dots to underscores, STRATA_
// prefix) and explicit overrides (flags). Unknown names or invalid values
// fail with a message naming the setting, the value and what is allowed.
// STRATA_ variables that name no setting (STRATA_BROKERS, used by the
// admin commands) are ignored.
func LoadBroker(path string, environ []string, overrides map[string]string) (*Broker, error) {
	b := DefaultBroker()
	if path != "" {
		kvs, err := readProperties(path)
		if err != nil {
			return nil, err
		}
		if err := b.apply(kvs); err != nil {
			return nil, err
		}
	}
	var env []kv
	for _, e := range environ {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			continue
		}
		if name, ok := envIndex[k]; ok {
			env = append(env, kv{name: name, value: v, where: "environment variable " + k})
		}
	}
	sort.Slice(env, func(i, j int) bool { return env[i].name < env[j].name })
	if err := b.apply(env); err != nil {
		return nil, err
	}
	var ovr []kv
	for k, v := range overrides {
		ovr = append(ovr, kv{name: k, value: v})
	}
	sort.Slice(ovr, func(i, j int) bool { return ovr[i].name < ovr[j].name })
	if err := b.apply(ovr); err != nil {
		return nil, err
	}
	if err := b.validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// kv is one name=value from a source; where locates it for errors.
type kv struct {
	name, value, where string
}

// apply sets one layer of values; within a layer, an alias pair (node.id
// and broker.id, log.dirs and log.dir) must agree.
func (b *Broker) apply(kvs []kv) error {
	seen := map[string]kv{}
	for _, e := range kvs {
		err := b.Set(e.name, e.value)
		if err != nil {
			if s, ok := brokerIndex[e.name]; ok && errors.Is(err, ErrInvalid) {
				allowed := s.Allowed
				if allowed == "" {
					allowed = "any " + s.Type.String()
				}
				err = fmt.Errorf("%w (allowed: %s)", err, allowed)
			}
			if e.where != "" {
				err = fmt.Errorf("%s: %w", e.where, err)
			}
			return err
		}
		if other, ok := aliases[e.name]; ok {
			if o, ok := seen[other]; ok && strings.TrimSpace(o.value) != strings.TrimSpace(e.value) {
				return invalidf("conflicting values for %s (%q) and %s (%q)", other, o.value, e.name, e.value)
			}
		}
		seen[e.name] = e
	}
	return nil
}

// readProperties parses a Java-properties style file: "key=value",
// "key: value" or "key value"; lines starting with # or ! are comments; a
// trailing backslash continues the line; backslash escapes a character.
func readProperties(path string) ([]kv, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	defer f.Close()
	var out []kv
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	lineNo, start := 0, 0
	var logical strings.Builder
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if logical.Len() == 0 {
			start = lineNo
			if line == "" || line[0] == '#' || line[0] == '!' {
				continue
			}
		}
		if n := trailingBackslashes(line); n%2 == 1 {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		k, v := splitProperty(logical.String())
		logical.Reset()
		out = append(out, kv{name: k, value: v, where: fmt.Sprintf("%s:%d", path, start)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read config file %s: %w", path, err)
	}
	if logical.Len() > 0 {
		k, v := splitProperty(logical.String())
		out = append(out, kv{name: k, value: v, where: fmt.Sprintf("%s:%d", path, start)})
	}
	return out, nil
}

func trailingBackslashes(s string) int {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n
}

// splitProperty splits a logical line at the first unescaped '=', ':' or
// blank, and unescapes both halves.
func splitProperty(line string) (string, string) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	if i > len(line) {
		i = len(line)
	}
	key := line[:i]
	rest := strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return unescape(key), strings.TrimSpace(unescape(rest))
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			sb.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			sb.WriteByte('\t')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 'f':
			sb.WriteByte('\f')
		default:
			sb.WriteByte(s[i])
		}
	}
	return sb.String()
}
