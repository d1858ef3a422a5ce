package authz

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func subj(user string) Subject { return NewSubject(User(user), net.ParseIP("127.0.0.1")) }

func acl(rt ResourceType, name string, pt PatternType, principal, host string, op Operation, perm Permission) ACL {
	return ACL{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// Kafka's StandardAuthorizerTest vectors (same ACLs, same answers).
func TestKafkaVectors(t *testing.T) {
	type check struct {
		user string
		host string
		op   Operation
		rt   ResourceType
		name string
		want bool
	}
	cases := []struct {
		name   string
		allow  bool
		acls   []ACL
		checks []check
	}{
		{"testAllowEveryoneIfNoAclFoundConfigEnabled", true,
			[]ACL{acl(ResourceTopic, "topic1", PatternLiteral, "User:Alice", "*", OpRead, PermAllow)},
			[]check{{"Bob", "", OpRead, ResourceTopic, "topic1", false}, {"Bob", "", OpRead, ResourceTopic, "topic2", true}}},
		{"testAllowEveryoneIfNoAclFoundConfigDisabled", false,
			[]ACL{acl(ResourceTopic, "topic1", PatternLiteral, "User:Alice", "*", OpRead, PermAllow)},
			[]check{{"Bob", "", OpRead, ResourceTopic, "topic1", false}, {"Bob", "", OpRead, ResourceTopic, "topic2", false}}},
		{"testSimpleAuthorizations", false,
			[]ACL{
				acl(ResourceTopic, "foo_", PatternPrefixed, "User:bob", "*", OpRead, PermAllow),
				acl(ResourceTopic, "foo_", PatternPrefixed, "User:bob", "*", OpWrite, PermAllow),
				acl(ResourceGroup, "bar", PatternLiteral, "User:*", "*", OpDescribeConfigs, PermAllow),
				acl(ResourceGroup, "bar", PatternLiteral, "User:*", "*", OpAlterConfigs, PermAllow),
			},
			[]check{{"bob", "", OpRead, ResourceTopic, "foo_", true}, {"fred", "", OpAlterConfigs, ResourceGroup, "bar", true}}},
		{"testDenyPrecedenceWithOperationAll", false,
			[]ACL{
				acl(ResourceTopic, "foo", PatternLiteral, "User:alice", "*", OpAll, PermDeny),
				acl(ResourceTopic, "foo", PatternPrefixed, "User:alice", "*", OpRead, PermAllow),
				acl(ResourceTopic, "foo", PatternLiteral, "User:*", "*", OpAll, PermDeny),
				acl(ResourceTopic, "foo", PatternPrefixed, "User:*", "*", OpDescribe, PermAllow),
			},
			[]check{
				{"alice", "", OpWrite, ResourceTopic, "foo", false}, {"alice", "", OpRead, ResourceTopic, "foo", false},
				{"alice", "", OpDescribe, ResourceTopic, "foo", false}, {"alice", "", OpRead, ResourceTopic, "foobar", true},
				{"bob", "", OpDescribe, ResourceTopic, "foo", false}, {"bob", "", OpRead, ResourceTopic, "foo", false},
				{"bob", "", OpWrite, ResourceTopic, "foo", false}, {"bob", "", OpDescribe, ResourceTopic, "foobaz", true},
				{"bob", "", OpRead, ResourceTopic, "foobaz", false},
			}},
		{"testTopicAclWithOperationAll", false,
			[]ACL{
				acl(ResourceTopic, "foo", PatternLiteral, "User:*", "*", OpAll, PermAllow),
				acl(ResourceTopic, "bar", PatternPrefixed, "User:alice", "*", OpAll, PermAllow),
				acl(ResourceTopic, "baz", PatternLiteral, "User:bob", "*", OpAll, PermAllow),
			},
			[]check{
				{"alice", "", OpWrite, ResourceTopic, "foo", true}, {"alice", "", OpDescribeConfigs, ResourceTopic, "bar", true},
				{"alice", "", OpDescribe, ResourceTopic, "baz", false},
				{"bob", "", OpWrite, ResourceTopic, "foo", true}, {"bob", "", OpRead, ResourceTopic, "bar", false},
				{"bob", "", OpDescribe, ResourceTopic, "baz", true},
				{"malory", "", OpDescribe, ResourceTopic, "foo", true}, {"malory", "", OpWrite, ResourceTopic, "bar", false},
				{"malory", "", OpRead, ResourceTopic, "baz", false},
			}},
		{"testHostAddressAclValidation", false,
			[]ACL{
				acl(ResourceTopic, "foo", PatternLiteral, "User:alice", "192.168.1.1", OpRead, PermDeny),
				acl(ResourceTopic, "foo", PatternLiteral, "User:alice", "*", OpRead, PermAllow),
				acl(ResourceTopic, "bar", PatternLiteral, "User:bob", "192.168.1.2", OpRead, PermAllow),
				acl(ResourceTopic, "bar", PatternLiteral, "User:*", "127.0.0.1", OpDescribe, PermAllow),
			},
			[]check{
				{"alice", "127.0.0.1", OpRead, ResourceTopic, "foo", true}, {"alice", "127.0.0.1", OpRead, ResourceTopic, "bar", false},
				{"alice", "127.0.0.1", OpDescribe, ResourceTopic, "bar", true},
				{"alice", "192.168.1.1", OpRead, ResourceTopic, "foo", false}, {"alice", "192.168.1.1", OpRead, ResourceTopic, "bar", false},
				{"alice", "192.168.1.1", OpDescribe, ResourceTopic, "bar", false},
				{"alice", "192.168.1.2", OpRead, ResourceTopic, "foo", true}, {"alice", "192.168.1.2", OpRead, ResourceTopic, "bar", false},
				{"alice", "192.168.1.2", OpDescribe, ResourceTopic, "bar", false},
				{"bob", "127.0.0.1", OpRead, ResourceTopic, "foo", false}, {"bob", "127.0.0.1", OpRead, ResourceTopic, "bar", false},
				{"bob", "127.0.0.1", OpDescribe, ResourceTopic, "bar", true},
				{"bob", "192.168.1.1", OpDescribe, ResourceTopic, "bar", false},
				{"bob", "192.168.1.2", OpRead, ResourceTopic, "foo", false}, {"bob", "192.168.1.2", OpRead, ResourceTopic, "bar", true},
				{"bob", "192.168.1.2", OpDescribe, ResourceTopic, "bar", true},
			}},
		{"testAuthorizationWithManyAcls", false,
			[]ACL{
				acl(ResourceTopic, "green2", PatternLiteral, "User:*", "*", OpRead, PermAllow),
				acl(ResourceTopic, "green", PatternPrefixed, "User:bob", "*", OpRead, PermAllow),
				acl(ResourceTopic, "betamax4", PatternLiteral, "User:bob", "*", OpRead, PermAllow),
				acl(ResourceTopic, "betamax", PatternLiteral, "User:bob", "*", OpRead, PermAllow),
				acl(ResourceTopic, "beta", PatternPrefixed, "User:*", "*", OpRead, PermAllow),
				acl(ResourceTopic, "alpha", PatternPrefixed, "User:*", "*", OpRead, PermAllow),
				acl(ResourceTopic, "alp", PatternPrefixed, "User:bob", "*", OpRead, PermDeny),
				acl(ResourceGroup, "*", PatternLiteral, "User:bob", "*", OpWrite, PermAllow),
				acl(ResourceGroup, "wheel", PatternLiteral, "User:*", "*", OpWrite, PermDeny),
			},
			[]check{
				{"bob", "", OpRead, ResourceTopic, "green1", true}, {"bob", "", OpWrite, ResourceGroup, "wheel", false},
				{"bob", "", OpRead, ResourceTopic, "alpha", false}, {"bob", "", OpWrite, ResourceGroup, "arbitrary", true},
				{"bob", "", OpRead, ResourceTopic, "ala", false},
			}},
		{"testPrefixAcls", false,
			[]ACL{
				acl(ResourceTopic, "fooa", PatternPrefixed, "User:alice", "*", OpAll, PermAllow),
				acl(ResourceTopic, "foobar", PatternLiteral, "User:bob", "*", OpAll, PermAllow),
				acl(ResourceTopic, "f", PatternPrefixed, "User:bob", "*", OpAll, PermAllow),
			},
			[]check{
				{"bob", "", OpWrite, ResourceTopic, "foobarr", true}, {"bob", "", OpRead, ResourceTopic, "goobar", false},
				{"bob", "", OpRead, ResourceTopic, "fooa", true},
				{"alice", "", OpDescribe, ResourceTopic, "fooa", true}, {"alice", "", OpWrite, ResourceTopic, "bar", false},
				{"alice", "", OpRead, ResourceTopic, "baz", false},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := New(Config{SuperUsers: []Principal{User("alice"), User("chris")}[:0], AllowIfNoACL: tc.allow})
			a.SetACLs(tc.acls)
			for _, c := range tc.checks {
				host := c.host
				if host == "" {
					host = "127.0.0.1"
				}
				s := NewSubject(User(c.user), net.ParseIP(host))
				if got := a.Authorize(s, c.op, c.rt, c.name); got != c.want {
					t.Errorf("%s from %s %s %s %q = %v, want %v", c.user, host, c.op, c.rt, c.name, got, c.want)
				}
			}
		})
	}
}

// testFindResultImplication: ALLOW of READ/WRITE/DELETE/ALTER implies
// DESCRIBE, ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS, DENY implies
// nothing, CREATE implies nothing.
func TestImpliedOperations(t *testing.T) {
	for _, op := range []Operation{OpDescribe, OpRead, OpWrite, OpDelete, OpAlter, OpCreate} {
		for _, perm := range []Permission{PermAllow, PermDeny} {
			a := New(Config{})
			a.SetACLs([]ACL{
				acl(ResourceTopic, "foo_", PatternPrefixed, "User:bob", "*", op, perm),
				// another principal's ALLOW, so the resource is named either way
				acl(ResourceTopic, "foo_", PatternPrefixed, "User:other", "*", OpDescribe, PermAllow),
			})
			got := a.Authorize(subj("bob"), OpDescribe, ResourceTopic, "foo_bar")
			want := perm == PermAllow && op != OpCreate
			if got != want {
				t.Errorf("%s %s -> DESCRIBE = %v, want %v", perm, op, got, want)
			}
		}
	}
	a := New(Config{})
	a.SetACLs([]ACL{acl(ResourceTopic, "t", PatternLiteral, "User:bob", "*", OpAlterConfigs, PermAllow)})
	if !a.Authorize(subj("bob"), OpDescribeConfigs, ResourceTopic, "t") {
		t.Error("ALTER_CONFIGS does not imply DESCRIBE_CONFIGS")
	}
	a.SetACLs([]ACL{acl(ResourceTopic, "t", PatternLiteral, "User:bob", "*", OpAlterConfigs, PermDeny),
		acl(ResourceTopic, "t", PatternLiteral, "User:bob", "*", OpDescribeConfigs, PermAllow)})
	if !a.Authorize(subj("bob"), OpDescribeConfigs, ResourceTopic, "t") {
		t.Error("DENY ALTER_CONFIGS denies DESCRIBE_CONFIGS")
	}
}

func TestSuperUsersBypassDeny(t *testing.T) {
	a := New(Config{SuperUsers: []Principal{User("admin")}})
	a.SetACLs([]ACL{acl(ResourceTopic, "*", PatternLiteral, "User:*", "*", OpAll, PermDeny)})
	if !a.Authorize(subj("admin"), OpWrite, ResourceTopic, "x") {
		t.Error("super user denied")
	}
	if a.Authorize(subj("bob"), OpWrite, ResourceTopic, "x") {
		t.Error("bob allowed through a wildcard DENY")
	}
	if got := a.AuthorizedOperations(subj("admin"), ResourceCluster, ClusterName); got != 1<<5|1<<9|1<<10|1<<11|1<<12|1<<7|1<<8 {
		t.Errorf("super user cluster operations = %b", got)
	}
}

func TestIPv6HostInJavaForm(t *testing.T) {
	a := New(Config{})
	a.SetACLs([]ACL{acl(ResourceTopic, "t", PatternLiteral, "User:bob", "0:0:0:0:0:0:0:1", OpRead, PermAllow)})
	if !a.Authorize(NewSubject(User("bob"), net.ParseIP("::1")), OpRead, ResourceTopic, "t") {
		t.Error("Java-form IPv6 host did not match ::1")
	}
	a.SetACLs([]ACL{acl(ResourceTopic, "t", PatternLiteral, "User:bob", "::1", OpRead, PermAllow)})
	if !a.Authorize(NewSubject(User("bob"), net.ParseIP("::1")), OpRead, ResourceTopic, "t") {
		t.Error("Go-form IPv6 host did not match ::1")
	}
	if got := javaHostAddress(net.ParseIP("fe80::10:a")); got != "fe80:0:0:0:0:0:10:a" {
		t.Errorf("java form = %s", got)
	}
}

// AuthorizeByResourceType follows Kafka's default method (tests from
// Kafka's AuthorizerTest / BaseAuthorizerTest: testAuthorizeByResourceType*).
func TestAuthorizeByResourceType(t *testing.T) {
	w := func(name string, pt PatternType, perm Permission) ACL {
		return acl(ResourceTopic, name, pt, "User:bob", "*", OpWrite, perm)
	}
	cases := []struct {
		name string
		acls []ACL
		want bool
	}{
		{"none", nil, false},
		{"literal allow", []ACL{w("t1", PatternLiteral, PermAllow)}, true},
		{"literal allow denied literally", []ACL{w("t1", PatternLiteral, PermAllow), w("t1", PatternLiteral, PermDeny)}, false},
		{"literal allow denied by prefix", []ACL{w("t1", PatternLiteral, PermAllow), w("t", PatternPrefixed, PermDeny)}, false},
		{"prefix allow", []ACL{w("abc", PatternPrefixed, PermAllow)}, true},
		{"prefix allow under longer deny", []ACL{w("abc", PatternPrefixed, PermAllow), w("abcd", PatternPrefixed, PermDeny)}, true},
		{"prefix allow under shorter deny", []ACL{w("abc", PatternPrefixed, PermAllow), w("ab", PatternPrefixed, PermDeny)}, false},
		{"wildcard allow", []ACL{w("*", PatternLiteral, PermAllow), w("t", PatternPrefixed, PermDeny)}, true},
		{"wildcard deny", []ACL{w("t1", PatternLiteral, PermAllow), w("*", PatternLiteral, PermDeny)}, false},
		{"other op", []ACL{acl(ResourceTopic, "t1", PatternLiteral, "User:bob", "*", OpRead, PermAllow)}, false},
		{"all op", []ACL{acl(ResourceTopic, "t1", PatternLiteral, "User:bob", "*", OpAll, PermAllow)}, true},
		{"other host", []ACL{acl(ResourceTopic, "t1", PatternLiteral, "User:bob", "10.0.0.1", OpWrite, PermAllow)}, false},
		{"wildcard principal", []ACL{acl(ResourceTopic, "t1", PatternLiteral, "User:*", "*", OpWrite, PermAllow)}, true},
	}
	for _, tc := range cases {
		a := New(Config{})
		a.SetACLs(tc.acls)
		if got := a.AuthorizeByResourceType(subj("bob"), OpWrite, ResourceTopic); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// allow.everyone.if.no.acl.found allows through "hardcode".
	a := New(Config{AllowIfNoACL: true})
	if !a.AuthorizeByResourceType(subj("bob"), OpWrite, ResourceTopic) {
		t.Error("allow.everyone.if.no.acl.found with no ACLs denied")
	}
}

func TestFilterMatches(t *testing.T) {
	lit := acl(ResourceTopic, "foo", PatternLiteral, "User:a", "*", OpRead, PermAllow)
	wild := acl(ResourceTopic, "*", PatternLiteral, "User:a", "*", OpRead, PermAllow)
	pre := acl(ResourceTopic, "fo", PatternPrefixed, "User:a", "*", OpRead, PermAllow)
	other := acl(ResourceGroup, "foo", PatternLiteral, "User:a", "*", OpRead, PermAllow)
	str := func(s string) *string { return &s }
	cases := []struct {
		f    Filter
		want []bool // lit, wild, pre, other
	}{
		{MatchAll, []bool{true, true, true, true}},
		{Filter{ResourceType: ResourceTopic, PatternType: PatternAny, Operation: OpAny, Permission: PermAny}, []bool{true, true, true, false}},
		{Filter{ResourceType: ResourceTopic, Name: str("foo"), PatternType: PatternMatch, Operation: OpAny, Permission: PermAny}, []bool{true, true, true, false}},
		{Filter{ResourceType: ResourceTopic, Name: str("foo"), PatternType: PatternAny, Operation: OpAny, Permission: PermAny}, []bool{true, false, false, false}},
		{Filter{ResourceType: ResourceTopic, Name: str("foo"), PatternType: PatternLiteral, Operation: OpAny, Permission: PermAny}, []bool{true, false, false, false}},
		{Filter{ResourceType: ResourceTopic, Name: str("fo"), PatternType: PatternPrefixed, Operation: OpAny, Permission: PermAny}, []bool{false, false, true, false}},
		{Filter{ResourceType: ResourceAny, Name: str("fox"), PatternType: PatternMatch, Operation: OpAny, Permission: PermAny}, []bool{false, true, true, false}},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: str("User:b"), Operation: OpAny, Permission: PermAny}, []bool{false, false, false, false}},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpWrite, Permission: PermAny}, []bool{false, false, false, false}},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpRead, Permission: PermDeny}, []bool{false, false, false, false}},
	}
	for i, tc := range cases {
		for j, a := range []ACL{lit, wild, pre, other} {
			if got := tc.f.Matches(a); got != tc.want[j] {
				t.Errorf("case %d acl %d: %v, want %v", i, j, got, tc.want[j])
			}
		}
	}
}

func TestValidate(t *testing.T) {
	ok := acl(ResourceTopic, "t", PatternLiteral, "User:a", "*", OpRead, PermAllow)
	cases := []struct {
		mod  func(*ACL)
		want string
	}{
		{func(a *ACL) {}, ""},
		{func(a *ACL) { a.ResourceType, a.ResourceName = ResourceCluster, "x" }, "The only valid name for the CLUSTER resource is kafka-cluster"},
		{func(a *ACL) { a.ResourceName = "" }, "Invalid empty resource name"},
		{func(a *ACL) { a.ResourceType = ResourceAny }, "Invalid resourceType ANY"},
		{func(a *ACL) { a.PatternType = PatternMatch }, "Invalid patternType MATCH"},
		{func(a *ACL) { a.Operation = OpAny }, "Invalid operation ANY"},
		{func(a *ACL) { a.Permission = PermAny }, "Invalid permissionType ANY"},
		{func(a *ACL) { a.Principal = "alice" }, "expected a string in format principalType:principalName but got alice"},
	}
	for _, tc := range cases {
		a := ok
		tc.mod(&a)
		err := a.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", a, err, tc.want)
		}
	}
}

func TestParseNames(t *testing.T) {
	for in, want := range map[string]Operation{"Read": OpRead, "IdempotentWrite": OpIdempotentWrite, "CLUSTER_ACTION": OpClusterAction,
		"describe-configs": OpDescribeConfigs, "All": OpAll} {
		if got, err := ParseOperation(in); err != nil || got != want {
			t.Errorf("ParseOperation(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseOperation("Unknown"); err == nil {
		t.Error("UNKNOWN parsed")
	}
	if rt, err := ParseResourceType("TransactionalId"); err != nil || rt != ResourceTransactionalID {
		t.Errorf("TransactionalId: %v %v", rt, err)
	}
}

// naive is Kafka's rule written as directly as possible over every ACL:
// the property test checks the index against it.
func naive(acls []ACL, super map[string]bool, allowIfNoACL bool, s Subject, op Operation, rt ResourceType, name string) bool {
	if super[s.Principal] {
		return true
	}
	named, allow := false, false
	for _, a := range acls {
		if a.ResourceType != rt {
			continue
		}
		matches := (a.PatternType == PatternLiteral && (a.ResourceName == name || a.ResourceName == Wildcard)) ||
			(a.PatternType == PatternPrefixed && strings.HasPrefix(name, a.ResourceName))
		if !matches {
			continue
		}
		named = true
		if a.Principal != s.Principal && a.Principal != WildcardPrincipal {
			continue
		}
		if a.Host != "*" && a.Host != s.host {
			continue
		}
		opOK := a.Operation == OpAll || a.Operation == op
		if !opOK && a.Permission == PermAllow {
			switch op {
			case OpDescribe:
				opOK = a.Operation == OpRead || a.Operation == OpWrite || a.Operation == OpDelete || a.Operation == OpAlter
			case OpDescribeConfigs:
				opOK = a.Operation == OpAlterConfigs
			}
		}
		if !opOK {
			continue
		}
		if a.Permission == PermDeny {
			return false
		}
		allow = true
	}
	if allow {
		return true
	}
	return !named && allowIfNoACL
}

func TestIndexAgreesWithNaive(t *testing.T) {
	names := []string{"*", "a", "ab", "abc", "abd", "b", "ba", "abcd"}
	users := []string{"User:*", "User:u1", "User:u2"}
	hosts := []string{"*", "127.0.0.1", "10.0.0.1"}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 30).Draw(t, "n")
		acls := make([]ACL, n)
		for i := range acls {
			acls[i] = ACL{
				ResourceType: ResourceType(rapid.IntRange(2, 3).Draw(t, "rt")),
				ResourceName: rapid.SampledFrom(names).Draw(t, "name"),
				PatternType:  PatternType(rapid.IntRange(3, 4).Draw(t, "pt")),
				Principal:    rapid.SampledFrom(users).Draw(t, "principal"),
				Host:         rapid.SampledFrom(hosts).Draw(t, "host"),
				Operation:    Operation(rapid.IntRange(2, 11).Draw(t, "op")),
				Permission:   Permission(rapid.IntRange(2, 3).Draw(t, "perm")),
			}
		}
		allowIf := rapid.Bool().Draw(t, "allowIfNoACL")
		super := map[string]bool{}
		var supers []Principal
		if rapid.Bool().Draw(t, "super") {
			super["User:u2"] = true
			supers = append(supers, User("u2"))
		}
		a := New(Config{SuperUsers: supers, AllowIfNoACL: allowIf})
		a.SetACLs(acls)
		for i := 0; i < 20; i++ {
			s := NewSubject(User(rapid.SampledFrom([]string{"u1", "u2"}).Draw(t, "user")),
				net.ParseIP(rapid.SampledFrom(hosts[1:]).Draw(t, "from")))
			op := Operation(rapid.IntRange(3, 11).Draw(t, "askop"))
			rt := ResourceType(rapid.IntRange(2, 3).Draw(t, "askrt"))
			name := rapid.SampledFrom(names[1:]).Draw(t, "askname")
			if got, want := a.Authorize(s, op, rt, name), naive(acls, super, allowIf, s, op, rt, name); got != want {
				t.Fatalf("%s %s %s %q: index %v, naive %v", s.Principal, op, rt, name, got, want)
			}
		}
	})
}

func TestACLsListDistinctSorted(t *testing.T) {
	a := New(Config{})
	x := acl(ResourceTopic, "b", PatternLiteral, "User:a", "*", OpRead, PermAllow)
	y := acl(ResourceGroup, "a", PatternLiteral, "User:a", "*", OpRead, PermAllow)
	z := acl(ResourceTopic, "a", PatternLiteral, "User:a", "*", OpRead, PermAllow)
	a.SetACLs([]ACL{x, y, x, z})
	got := fmt.Sprint(a.ACLs(MatchAll))
	want := fmt.Sprint([]ACL{z, x, y})
	if got != want || a.Count() != 3 {
		t.Errorf("ACLs = %s (count %d), want %s", got, a.Count(), want)
	}
}
