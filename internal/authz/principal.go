package authz

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// DefaultMappingRules is ssl.principal.mapping.rules' default: the
// certificate's distinguished name is the user name.
const DefaultMappingRules = "DEFAULT"

// Kafka's SslPrincipalMapper grammar (RULE_PATTERN, RULE_SPLITTER): rules
// are separated by commas; a rule is DEFAULT or
// RULE:pattern/replacement/[LU], where pattern and replacement may contain
// backslash escapes (so "\/" is a slash and "\," a comma). Go's regexp
// engine picks the same leftmost-first alternatives as Java's here.
const rulePattern = `(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)`

var (
	ruleSplitter = regexp.MustCompile(`\s*(` + rulePattern + `)\s*(,\s*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:` + rulePattern + `)`)
)

// Mapper maps a TLS client certificate's distinguished name to a user
// name with ssl.principal.mapping.rules (Kafka's SslPrincipalMapper).
type Mapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault   bool
	source      string         // the pattern as written
	find        *regexp.Regexp // the pattern, to replace every match
	whole       *regexp.Regexp // the pattern anchored: it must match the whole name
	replacement string
	lower       bool
	upper       bool
}

// ParseMappingRules parses ssl.principal.mapping.rules. Patterns are Go
// regular expressions (RE2): Kafka's Java patterns without backreferences
// or lookaround, which mapping rules do not need, mean the same.
func ParseMappingRules(rules string) (*Mapper, error) {
	m := &Mapper{}
	for _, sm := range ruleSplitter.FindAllStringSubmatch(strings.TrimSpace(rules), -1) {
		rule := sm[1]
		g := ruleParser.FindStringSubmatchIndex(rule)
		if g == nil {
			return nil, fmt.Errorf("Invalid rule: %s", rule)
		}
		if g[1] != len(rule) {
			return nil, fmt.Errorf("Invalid rule: `%s`, unmatched substring: `%s`", rule, rule[g[1]:])
		}
		group := func(i int) (string, bool) {
			if g[2*i] < 0 {
				return "", false
			}
			return rule[g[2*i]:g[2*i+1]], true
		}
		if _, ok := group(1); ok {
			m.rules = append(m.rules, mappingRule{isDefault: true})
			continue
		}
		pat, ok := group(2)
		if !ok {
			continue // an empty rule is ignored, as Kafka
		}
		repl, _ := group(4)
		flag, _ := group(6)
		find, err := regexp.Compile(pat)
		if err != nil {
			return nil, fmt.Errorf("rule %q: pattern %q: %w", rule, pat, err)
		}
		whole, err := regexp.Compile(`^(?:` + pat + `)$`)
		if err != nil {
			return nil, fmt.Errorf("rule %q: pattern %q: %w", rule, pat, err)
		}
		m.rules = append(m.rules, mappingRule{source: pat, find: find, whole: whole, replacement: repl,
			lower: flag == "L", upper: flag == "U"})
	}
	return m, nil
}

// String lists the rules as Kafka's SslPrincipalMapper.toString does.
func (m *Mapper) String() string {
	parts := make([]string, len(m.rules))
	for i, r := range m.rules {
		if r.isDefault {
			parts[i] = "DEFAULT"
			continue
		}
		s := "RULE:" + r.source + "/" + r.replacement
		if r.lower {
			s += "/L"
		} else if r.upper {
			s += "/U"
		}
		parts[i] = s
	}
	return "SslPrincipalMapper(rules = [" + strings.Join(parts, ", ") + "])"
}

// ErrNoMatchingRule is returned when no rule applies to a name: Kafka
// fails the authentication ("No rules apply to ...").
var ErrNoMatchingRule = errors.New("no ssl.principal.mapping.rules rule applies")

// Map returns the user name for a distinguished name: the result of the
// first rule whose pattern matches the whole name (DEFAULT: the name
// itself). A rule replaces every match of its pattern in the name with its
// replacement, where $n is capture group n and a backslash escapes the
// next character (Java's String.replaceAll, with Kafka's rule that a
// reference to a group the pattern lacks is literal text), then lower- or
// upper-cases it with /L or /U.
func (m *Mapper) Map(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.whole.MatchString(dn) {
			continue
		}
		out, err := r.replaceAll(dn)
		if err != nil {
			return "", err
		}
		if r.lower {
			out = strings.ToLower(out)
		} else if r.upper {
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w: No rules apply to %s, rules %s", ErrNoMatchingRule, dn, m)
}

func (r mappingRule) replaceAll(s string) (string, error) {
	groups := r.find.NumSubexp()
	var b strings.Builder
	last := 0
	for _, loc := range r.find.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(s[last:loc[0]])
		if err := expandJava(&b, r.replacement, s, loc, groups); err != nil {
			return "", err
		}
		last = loc[1]
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

// expandJava appends the replacement with Java's Matcher.appendReplacement
// rules: "\x" is x; "$" starts a group number, read digit by digit while
// the number stays a group of the pattern. Kafka's SslPrincipalMapper
// first makes a "$n" naming no group literal text (when the pattern has
// groups); with no groups at all a "$n" is an error, as in Java.
func expandJava(b *strings.Builder, repl, s string, loc []int, groups int) error {
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch c {
		case '\\':
			i++
			if i >= len(repl) {
				return errors.New("character to be escaped is missing")
			}
			b.WriteByte(repl[i])
		case '$':
			j := i + 1
			if j >= len(repl) || repl[j] < '0' || repl[j] > '9' {
				return errors.New("Illegal group reference")
			}
			n := int(repl[j] - '0')
			j++
			if groups > 0 && n > groups {
				// Kafka's escapeLiteralBackReferences: not a group; literal.
				b.WriteByte('$')
				continue
			}
			for j < len(repl) && repl[j] >= '0' && repl[j] <= '9' {
				nn := n*10 + int(repl[j]-'0')
				if nn > groups {
					break
				}
				n = nn
				j++
			}
			if n > groups {
				return fmt.Errorf("No group %d", n)
			}
			if loc[2*n] >= 0 {
				b.WriteString(s[loc[2*n]:loc[2*n+1]])
			}
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return nil
}

// CertificatePrincipal is the principal of a TLS client presenting cert:
// User:<name> where name is the certificate subject's distinguished name
// (RFC 2253, as Java's X500Principal.getName) mapped by the rules. Kafka's
// DefaultKafkaPrincipalBuilder.
func CertificatePrincipal(cert *x509.Certificate, m *Mapper) (Principal, error) {
	dn, err := DistinguishedName(cert.RawSubject)
	if err != nil {
		return Principal{}, err
	}
	name, err := m.Map(dn)
	if err != nil {
		return Principal{}, err
	}
	return User(name), nil
}

type attributeTypeAndValue struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// relativeDNSET is a SET OF attributes (the SET suffix makes encoding/asn1
// decode a SET).
type relativeDNSET []attributeTypeAndValue

// rfc2253Keywords are the attribute types Java's X500Principal.getName()
// (RFC 2253 format) prints by keyword; any other type is printed as its
// dotted OID with the value's DER encoding in hex.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// DistinguishedName formats a DER-encoded X.501 Name (a certificate's
// RawSubject) as Java's X500Principal.getName() does (RFC 2253): relative
// names from last to first joined by ",", several attributes of one
// relative name joined by "+", known types by keyword and the rest by OID
// with a "#" and hex DER value, and in string values the characters
// , = + < > # ; " \ escaped with a backslash, as are leading and trailing
// spaces.
func DistinguishedName(rawSubject []byte) (string, error) {
	var seq []relativeDNSET
	rest, err := asn1.Unmarshal(rawSubject, &seq)
	if err != nil {
		return "", fmt.Errorf("certificate subject: %w", err)
	}
	if len(rest) > 0 {
		return "", errors.New("certificate subject: trailing data")
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i < len(seq)-1 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			kw, known := rfc2253Keywords[atv.Type.String()]
			str, isString := derString(atv.Value)
			if !known {
				kw = atv.Type.String()
			}
			b.WriteString(kw)
			b.WriteByte('=')
			if !known || !isString {
				b.WriteByte('#')
				b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
				continue
			}
			b.WriteString(escapeRFC2253(str))
		}
	}
	return b.String(), nil
}

// derString decodes the ASN.1 string types Java's AVA treats as strings.
func derString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagIA5String, asn1.TagUTF8String, 27 /* GeneralString */ :
		if !utf8.Valid(v.Bytes) {
			return "", false
		}
		return string(v.Bytes), true
	case asn1.TagT61String: // Java decodes T61String as ISO-8859-1
		r := make([]rune, len(v.Bytes))
		for i, c := range v.Bytes {
			r[i] = rune(c)
		}
		return string(r), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		return string(utf16.Decode(u)), true
	case 28: // UniversalString (UTF-32BE)
		if len(v.Bytes)%4 != 0 {
			return "", false
		}
		var sb strings.Builder
		for i := 0; i < len(v.Bytes); i += 4 {
			sb.WriteRune(rune(uint32(v.Bytes[i])<<24 | uint32(v.Bytes[i+1])<<16 | uint32(v.Bytes[i+2])<<8 | uint32(v.Bytes[i+3])))
		}
		return sb.String(), true
	}
	return "", false
}

// escapeRFC2253 escapes a value as Java's AVA.toRFC2253String: the
// characters , = + < > # ; " \ anywhere, NUL as \00, and leading and
// trailing spaces (and carriage returns).
func escapeRFC2253(v string) string {
	var b strings.Builder
	for _, c := range v {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, c):
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == 0:
			b.WriteString(`\00`)
		default:
			b.WriteRune(c)
		}
	}
	s := b.String()
	lead := len(s) - len(strings.TrimLeft(s, " \r"))
	trail := len(s) - len(strings.TrimRight(s, " \r"))
	if lead == len(s) {
		trail = 0
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if i < lead || i >= len(s)-trail {
			out.WriteByte('\\')
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// ParseSuperUsers parses super.users: principals separated by ";"
// (Kafka's StandardAuthorizer.getConfiguredSuperUsers), each "Type:name".
func ParseSuperUsers(v string) ([]Principal, error) {
	var out []Principal
	for _, part := range strings.Split(v, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := ParsePrincipal(part)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// AuthorizerClassNames are the authorizer.class.name values that switch
// the authorizer on: Kafka's KRaft StandardAuthorizer and its ZooKeeper-era
// AclAuthorizer, both served by this package's rules. Any other class is
// refused (Strata loads no Java classes).
var AuthorizerClassNames = []string{
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"kafka.security.authorizer.AclAuthorizer",
}

// Enabled reports whether authorizer.class.name v switches the authorizer
// on; an error names a class Strata cannot run.
func Enabled(v string) (bool, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return false, nil
	}
	for _, n := range AuthorizerClassNames {
		if v == n {
			return true, nil
		}
	}
	return false, fmt.Errorf("authorizer class %s is not supported: Strata runs Kafka's StandardAuthorizer rules, named %s (or %s); leave it empty for no authorization",
		strconv.Quote(v), AuthorizerClassNames[0], AuthorizerClassNames[1])
}
