package config

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/strata-io/strata/internal/suggest"
)

// EnvPrefix prefixes the environment variable of every broker setting.
const EnvPrefix = "STRATA_"

// EnvName returns the environment variable for a broker setting: STRATA_,
// then the name upper-cased with dots and dashes as underscores, Strata's
// own "strata." prefix dropped (log.dirs -> STRATA_LOG_DIRS,
// strata.durable.acks -> STRATA_DURABLE_ACKS).
func EnvName(setting string) string {
	return legacyEnvName(strings.TrimPrefix(setting, "strata."))
}

// legacyEnvName is the variable name before Strata's own settings dropped
// their doubled prefix (strata.durable.acks -> STRATA_STRATA_DURABLE_ACKS);
// those names still work, with a deprecation warning.
func legacyEnvName(setting string) string {
	return EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(setting))
}

// ClientEnv are the STRATA_ variables read by the client commands (and by
// the tests), not by the broker: `strata serve` does not warn about them.
var ClientEnv = []string{
	"STRATA_BROKERS", "STRATA_ADMIN", "STRATA_SASL_PASSWORD", "STRATA_SCRAM_PASSWORD",
	// Test harness switches (TestClientEnvListsTestSwitches finds them).
	"STRATA_LONG", "STRATA_UPDATE_DOCS", "STRATA_TEST_LOG", "STRATA_E2E_BIN", "STRATA_TEST_JOBS", "STRATA_COMPAT_TARGET",
	"STRATA_STORAGE_CRASH_START", "STRATA_STORAGE_CRASH_CHILD", "STRATA_FAULTS_OUT",
	"STRATA_BENCH_AUTHZ_ROUNDS", "STRATA_BENCH_BIG_FETCH", "STRATA_BENCH_DURABLE_ACKS", "STRATA_BENCH_HEAP",
	"STRATA_BENCH_ONLY", "STRATA_BURROW_LOG", "STRATA_COMPAT_OUT", "STRATA_CONSOLE_SCREENSHOTS",
	"STRATA_FAILOVER_SIGNALS", "STRATA_FAILOVER_STORE_LEADER", "STRATA_FAULTS_EVENTS", "STRATA_FAULTS_KGO_LOG",
	"STRATA_MANYPARTS_ARGS", "STRATA_REPLICA_SEEDS", "STRATA_ELECTION_PARTS", "STRATA_SIM_SEED", "STRATA_SIM_SEEDS", "STRATA_SIM_TRACE",
	"STRATA_LZ_SETUP", "STRATA_LZ_OPEN", "STRATA_LZ_N", "STRATA_LZ_CLEAN",
}

// envIndex maps each accepted variable to its setting; legacyEnv maps the
// deprecated STRATA_STRATA_ spellings; hintEnv maps the variables of the
// Kafka settings Strata refuses.
var envIndex, legacyEnv, hintEnv = func() (m, legacy, hint map[string]string) {
	m, legacy, hint = map[string]string{}, map[string]string{}, map[string]string{}
	for _, n := range acceptedNames() {
		m[EnvName(n)] = n
		if strings.HasPrefix(n, "strata.") {
			legacy[legacyEnvName(n)] = n
		}
	}
	for n := range unsupportedHints {
		hint[EnvName(n)] = n
	}
	return m, legacy, hint
}()

// LoadBroker builds broker settings from, in rising precedence, a
// server.properties-style file (path may be empty), the environment
// (EnvName: STRATA_LOG_DIRS for log.dirs) and explicit overrides (flags).
// It checks everything and returns every problem at once (Problems), each
// naming the setting, where it was set, what is wrong and what to do.
// Kafka settings accepted without effect, deprecated variable names and
// STRATA_ variables that name no setting become Warnings; the client
// commands' variables (ClientEnv) are left alone.
func LoadBroker(path string, environ []string, overrides map[string]string) (*Broker, error) {
	b := DefaultBroker()
	var probs Problems
	if path != "" {
		kvs, err := readProperties(path)
		if err != nil {
			return nil, err
		}
		probs = append(probs, b.apply(kvs)...)
	}
	env, envProbs := b.fromEnv(environ)
	probs = append(probs, envProbs...)
	probs = append(probs, b.apply(env)...)
	var ovr []kv
	for k, v := range overrides {
		ovr = append(ovr, kv{name: k, value: v})
	}
	sort.Slice(ovr, func(i, j int) bool { return ovr[i].name < ovr[j].name })
	probs = append(probs, b.apply(ovr)...)
	if len(probs) == 0 { // rules between settings only once each one is valid
		for _, err := range b.validate() {
			probs = append(probs, Problem{Err: err})
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	b.warnings = append(b.ignoredWarnings(), b.warnings...)
	return b, nil
}

// fromEnv picks the broker's variables out of environ, noting deprecated
// and unknown STRATA_ names in b.warnings and refused Kafka settings as
// problems.
func (b *Broker) fromEnv(environ []string) ([]kv, Problems) {
	var env []kv
	var probs Problems
	natural := map[string]string{} // setting -> variable, for the legacy conflict check
	for _, e := range environ {
		k, v, ok := strings.Cut(e, "=")
		if !ok || !strings.HasPrefix(k, EnvPrefix) {
			continue
		}
		if name, ok := envIndex[k]; ok {
			env = append(env, kv{name: name, value: v, where: "environment variable " + k})
			natural[name] = v
		}
	}
	for _, e := range environ {
		k, v, ok := strings.Cut(e, "=")
		if !ok || !strings.HasPrefix(k, EnvPrefix) {
			continue
		}
		if _, ok := envIndex[k]; ok || slices.Contains(ClientEnv, k) {
			continue
		}
		where := "environment variable " + k
		if name, ok := legacyEnv[k]; ok {
			if nv, both := natural[name]; both && nv != v {
				probs = append(probs, Problem{Where: where, Err: invalidf("conflicts with %s (%q): unset %s, the old spelling", EnvName(name), nv, k)})
				continue
			}
			b.warnings = append(b.warnings, fmt.Sprintf("%s is deprecated: rename it %s", where, EnvName(name)))
			if _, both := natural[name]; !both {
				env = append(env, kv{name: name, value: v, where: where})
			}
			continue
		}
		if name, ok := hintEnv[k]; ok {
			probs = append(probs, Problem{Where: where, Err: invalidf("%s %s", name, unsupportedHint(name))})
			continue
		}
		msg := where + " names no broker setting and is ignored"
		if near := suggest.Closest(k, envNames()); near != "" {
			msg += ": did you mean " + near + "?"
		}
		b.warnings = append(b.warnings, msg)
	}
	sort.Slice(env, func(i, j int) bool { return env[i].name < env[j].name })
	return env, probs
}

// envNames lists the accepted variable names, sorted.
func envNames() []string {
	out := make([]string, 0, len(envIndex))
	for k := range envIndex {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// kv is one name=value from a source; where locates it for errors.
type kv struct {
	name, value, where string
}

// apply sets one layer of values and returns a problem for each one that
// is refused; within a layer, an alias pair (node.id and broker.id,
// log.dirs and log.dir) must agree.
func (b *Broker) apply(kvs []kv) Problems {
	var probs Problems
	seen := map[string]kv{}
	for _, e := range kvs {
		err := b.Set(e.name, e.value)
		if err != nil {
			if s, ok := lookupAccepted(e.name); ok && errors.Is(err, ErrInvalid) {
				allowed := s.Allowed
				if allowed == "" {
					allowed = "any " + s.Type.String()
				}
				err = fmt.Errorf("%w (allowed: %s)", err, allowed)
			}
			probs = append(probs, Problem{Where: e.where, Err: err})
			continue
		}
		if other, ok := aliases[e.name]; ok {
			if o, ok := seen[other]; ok && strings.TrimSpace(o.value) != strings.TrimSpace(e.value) {
				probs = append(probs, Problem{Where: e.where, Err: invalidf("conflicting values for %s (%q) and %s (%q)", other, o.value, e.name, e.value)})
			}
		}
		seen[e.name] = e
	}
	return probs
}

// lookupAccepted finds a broker table row or an ignored Kafka setting.
func lookupAccepted(name string) (Setting, bool) {
	if s, ok := brokerIndex[name]; ok {
		return s, true
	}
	ig, ok := ignoredIndex[name]
	return ig.Setting, ok
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
