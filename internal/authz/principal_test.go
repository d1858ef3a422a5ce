package authz

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"strings"
	"testing"
)

// Kafka's SslPrincipalMapperTest, case by case.
func TestMappingRulesValidAndInvalid(t *testing.T) {
	for _, r := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
	} {
		if _, err := ParseMappingRules(r); err != nil {
			t.Errorf("%q: %v", r, err)
		}
	}
	for _, r := range []string{
		"default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
	} {
		if _, err := ParseMappingRules(r); err == nil {
			t.Errorf("%q accepted", r)
		}
	}
}

func TestMappingRulesMap(t *testing.T) {
	m, err := ParseMappingRules(strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", "))
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := m.Map(in); err != nil || got != want {
			t.Errorf("Map(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	m, err = ParseMappingRules(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.Map(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); err != nil || got != `Tkac\, Adam` {
		t.Errorf("comma with whitespace: %q, %v", got, err)
	}
	m, _ = ParseMappingRules("RULE:^CN=(.*)$/$1/")
	if _, err := m.Map("O=x"); err == nil {
		t.Error("no matching rule: no error")
	}
	m, _ = ParseMappingRules("RULE:^CN=(.*)$/$1-$2-$12/")
	if got, _ := m.Map("CN=a"); got != "a-$2-a2" {
		t.Errorf("literal back references: %q", got)
	}
}

func TestMappingRulesSplitting(t *testing.T) {
	for in, want := range map[string]string{
		"":                               "[]",
		"DEFAULT":                        "[DEFAULT]",
		"RULE://":                        "[RULE:/]",
		"RULE:/.*/":                      "[RULE:/.*]",
		"RULE:/.*/L":                     "[RULE:/.*/L]",
		"RULE://,DEFAULT":                "[RULE:/, DEFAULT]",
		"  RULE:// ,  DEFAULT  ":         "[RULE:/, DEFAULT]",
		"  RULE:   /     / ,  DEFAULT  ": "[RULE:   /     , DEFAULT]",
		"  RULE:  /     /U   ,DEFAULT  ": "[RULE:  /     /U, DEFAULT]",
		"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ": "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
		",   , , ,      , , ,   ":                                "[]",
		",,RULE://,,,DEFAULT,,":                                  "[RULE:/, DEFAULT]",
		",  , RULE: /   /    ,,,   DEFAULT, ,   ":                "[RULE: /   , DEFAULT]",
		"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,":             "[RULE:   /  /U, DEFAULT]",
		`RULE:\/\\\(\)\n\t/\/\//`:                                `[RULE:\/\\\(\)\n\t/\/\/]`,
		`RULE:\**\/+/*/L,RULE:\/*\**/**/`:                        `[RULE:\**\/+/*/L, RULE:\/*\**/**]`,
		`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`: `[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
	} {
		m, err := ParseMappingRules(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := m.String(); got != "SslPrincipalMapper(rules = "+want+")" {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

func rawName(t *testing.T, rdns ...[]pkix.AttributeTypeAndValue) []byte {
	t.Helper()
	var seq pkix.RDNSequence
	for _, r := range rdns {
		seq = append(seq, pkix.RelativeDistinguishedNameSET(r))
	}
	b, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDistinguishedNameRFC2253(t *testing.T) {
	oid := func(s ...int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier(s) }
	atv := func(o asn1.ObjectIdentifier, v any) []pkix.AttributeTypeAndValue {
		return []pkix.AttributeTypeAndValue{{Type: o, Value: v}}
	}
	cn, ou, o, c, dc := oid(2, 5, 4, 3), oid(2, 5, 4, 11), oid(2, 5, 4, 10), oid(2, 5, 4, 6), oid(0, 9, 2342, 19200300, 100, 1, 25)
	serial := oid(2, 5, 4, 5)
	cases := []struct {
		raw  []byte
		want string
	}{
		// Certificate order is C first; Java prints the last RDN first.
		{rawName(t, atv(c, "US"), atv(o, "Org"), atv(ou, "ServiceUsers"), atv(cn, "Duke")), "CN=Duke,OU=ServiceUsers,O=Org,C=US"},
		{rawName(t, atv(dc, "cz"), atv(dc, "geodis"), atv(cn, "Tkac, Adam")), `CN=Tkac\, Adam,DC=geodis,DC=cz`},
		{rawName(t, atv(cn, ` a+b="c"<d>;e\f#g=h `)), `CN=\ a\+b\=\"c\"\<d\>\;e\\f\#g\=h\ `},
		{rawName(t, atv(serial, "1234"), atv(cn, "x")), "CN=x,2.5.4.5=#130431323334"},
		{rawName(t, []pkix.AttributeTypeAndValue{{Type: cn, Value: "a"}, {Type: ou, Value: "b"}}), "CN=a+OU=b"},
	}
	for _, tc := range cases {
		got, err := DistinguishedName(tc.raw)
		if err != nil || got != tc.want {
			t.Errorf("DistinguishedName = %q, %v; want %q", got, err, tc.want)
		}
	}
	if _, err := DistinguishedName([]byte{1, 2, 3}); err == nil {
		t.Error("garbage subject accepted")
	}
}

func TestSuperUsersAndClassNames(t *testing.T) {
	ps, err := ParseSuperUsers(" User:alice ; User:bob;;")
	if err != nil || len(ps) != 2 || ps[0].String() != "User:alice" || ps[1].String() != "User:bob" {
		t.Errorf("ParseSuperUsers = %v, %v", ps, err)
	}
	if _, err := ParseSuperUsers("alice"); err == nil {
		t.Error("super.users without a type accepted")
	}
	for _, n := range AuthorizerClassNames {
		if on, err := Enabled(n); !on || err != nil {
			t.Errorf("%s: %v %v", n, on, err)
		}
	}
	if on, err := Enabled(""); on || err != nil {
		t.Errorf("empty: %v %v", on, err)
	}
	if _, err := Enabled("com.example.MyAuthorizer"); err == nil {
		t.Error("unknown class accepted")
	}
}
