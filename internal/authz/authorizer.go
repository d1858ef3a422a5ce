package authz

import (
	"cmp"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Subject is who asks: a connection's principal and client address,
// prepared once per connection so that authorizing costs no formatting.
type Subject struct {
	// Principal is "Type:name".
	Principal string
	// host is the client's IP as Go prints it; javaHost as Java's
	// InetAddress.getHostAddress does (differs for IPv6: Kafka's tools
	// and docs write ACL hosts in Java's uncompressed form).
	host, javaHost string
}

// NewSubject prepares principal p connecting from ip (nil: no address,
// matched only by host "*").
func NewSubject(p Principal, ip net.IP) Subject {
	s := Subject{Principal: p.String()}
	if ip != nil {
		s.host = ip.String()
		s.javaHost = javaHostAddress(ip)
	}
	return s
}

// Host is the client address as ACL hosts name it.
func (s Subject) Host() string { return s.host }

func (s Subject) hostMatches(h string) bool {
	return h == Wildcard || (h != "" && (h == s.host || h == s.javaHost))
}

// javaHostAddress prints ip as java.net.InetAddress.getHostAddress does:
// dotted quad for IPv4, eight uncompressed lower-case hex groups for IPv6.
func javaHostAddress(ip net.IP) string {
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	if len(ip) != net.IPv6len {
		return ip.String()
	}
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strconv.FormatUint(uint64(ip[i])<<8|uint64(ip[i+1]), 16))
	}
	return b.String()
}

// Config is the authorizer's static configuration.
type Config struct {
	// SuperUsers are super.users: principals allowed everything, whatever
	// the ACLs say.
	SuperUsers []Principal
	// AllowIfNoACL is allow.everyone.if.no.acl.found: the answer for a
	// resource that no ACL names (default false: deny).
	AllowIfNoACL bool
}

// Authorizer decides requests with Kafka's StandardAuthorizer rules. It is
// safe for concurrent use: SetACLs publishes a new immutable index and
// decisions read whichever index is current, without locks.
type Authorizer struct {
	super        map[string]bool
	allowIfNoACL bool
	idx          atomic.Pointer[index]
}

// New returns an authorizer holding no ACLs.
func New(cfg Config) *Authorizer {
	a := &Authorizer{super: map[string]bool{}, allowIfNoACL: cfg.AllowIfNoACL}
	for _, p := range cfg.SuperUsers {
		a.super[p.String()] = true
	}
	a.idx.Store(buildIndex(nil))
	return a
}

// SetACLs replaces the ACLs. acls is not retained. Identical bindings
// count once (Kafka's AclControlManager keeps a set).
func (a *Authorizer) SetACLs(acls []ACL) { a.idx.Store(buildIndex(acls)) }

// Count is the number of distinct ACLs held.
func (a *Authorizer) Count() int { return len(a.idx.Load().all) }

// ACLs returns the ACLs the filter matches, sorted by resource type,
// pattern type, name, principal, host, operation and permission.
func (a *Authorizer) ACLs(f Filter) []ACL {
	var out []ACL
	for _, acl := range a.idx.Load().all {
		if f.Matches(acl) {
			out = append(out, acl)
		}
	}
	return out
}

// IsSuperUser reports whether s is in super.users.
func (a *Authorizer) IsSuperUser(s Subject) bool { return a.super[s.Principal] }

// Authorize decides whether s may perform op on the resource of type rt
// named name (a literal name, as Kafka's AuthHelper.authorize asks).
//
// Kafka's StandardAuthorizerData.authorize and findAclRule: a super user
// is allowed; otherwise every ACL whose pattern matches the name (the
// literal name, every prefixed pattern the name starts with, the literal
// wildcard "*") is considered. A matching DENY entry denies; else a
// matching ALLOW entry allows; else, when no ACL names the resource at all
// (for any principal), allow.everyone.if.no.acl.found decides; else deny.
// An entry matches when its principal is the subject's or User:*, its
// host is the client's or "*", and its operation is op or ALL; an ALLOW
// of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW of
// ALTER_CONFIGS also allows DESCRIBE_CONFIGS (DENY entries imply nothing).
func (a *Authorizer) Authorize(s Subject, op Operation, rt ResourceType, name string) bool {
	if a.super[s.Principal] {
		return true
	}
	return a.idx.Load().decide(s, op, rt, name, a.allowIfNoACL)
}

// AuthorizedOperations is the bit field of the operations s may perform on
// the resource (bit 1<<code per allowed operation of
// SupportedOperations), as Kafka's AuthHelper.authorizedOperations.
func (a *Authorizer) AuthorizedOperations(s Subject, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range SupportedOperations(rt) {
		if a.Authorize(s, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// AuthorizeByResourceType reports whether s may perform op on at least one
// resource of type rt, as Kafka's Authorizer.authorizeByResourceType
// default method (KIP-679: an idempotent producer needs IDEMPOTENT_WRITE
// on the cluster or WRITE on some topic): allowed if a resource named
// "hardcode" would be (super users, allow.everyone.if.no.acl.found);
// denied by a matching literal wildcard DENY; allowed by a matching
// wildcard ALLOW; else allowed if some matching literal or prefixed ALLOW
// is not covered by a DENY on the same literal name or on a prefix of it.
// Matching here means principal (or User:*), host (or "*") and operation
// (or ALL) exactly: no implied operations.
func (a *Authorizer) AuthorizeByResourceType(s Subject, op Operation, rt ResourceType) bool {
	if a.Authorize(s, op, rt, "hardcode") {
		return true
	}
	denyLiteral, denyPrefix := map[string]bool{}, map[string]bool{}
	var allowLiteral, allowPrefix []string
	wildcardAllow := false
	for _, acl := range a.idx.Load().all {
		if acl.ResourceType != rt || !s.hostMatches(acl.Host) ||
			(acl.Principal != s.Principal && acl.Principal != WildcardPrincipal) ||
			(acl.Operation != op && acl.Operation != OpAll) {
			continue
		}
		switch {
		case acl.Permission == PermDeny && acl.PatternType == PatternLiteral:
			if acl.ResourceName == Wildcard {
				return false
			}
			denyLiteral[acl.ResourceName] = true
		case acl.Permission == PermDeny && acl.PatternType == PatternPrefixed:
			denyPrefix[acl.ResourceName] = true
		case acl.Permission == PermAllow && acl.PatternType == PatternLiteral:
			if acl.ResourceName == Wildcard {
				wildcardAllow = true
			} else {
				allowLiteral = append(allowLiteral, acl.ResourceName)
			}
		case acl.Permission == PermAllow && acl.PatternType == PatternPrefixed:
			allowPrefix = append(allowPrefix, acl.ResourceName)
		}
	}
	if wildcardAllow {
		return true
	}
	dominated := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPrefix[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowLiteral {
		if !denyLiteral[n] && !dominated(n) {
			return true
		}
	}
	for _, n := range allowPrefix {
		if !dominated(n) {
			return true
		}
	}
	return false
}

// entry is an ACL's access control entry, filed under its resource.
type entry struct {
	principal string
	host      string
	op        Operation
	perm      Permission
}

// resources holds one resource type's ACLs: by literal name, the literal
// wildcard, and by prefix with the distinct prefix lengths (ascending) so
// a name's matching prefixes are found with one map lookup per length.
type resources struct {
	literal  map[string][]entry
	wildcard []entry
	prefixed map[string][]entry
	lengths  []int
}

// index is an immutable snapshot of the ACLs.
type index struct {
	byType map[ResourceType]*resources
	all    []ACL // sorted, distinct
}

func buildIndex(acls []ACL) *index {
	all := slices.Clone(acls)
	slices.SortFunc(all, compareACL)
	all = slices.Compact(all)
	ix := &index{byType: map[ResourceType]*resources{}, all: all}
	for _, acl := range all {
		r := ix.byType[acl.ResourceType]
		if r == nil {
			r = &resources{literal: map[string][]entry{}, prefixed: map[string][]entry{}}
			ix.byType[acl.ResourceType] = r
		}
		e := entry{principal: acl.Principal, host: acl.Host, op: acl.Operation, perm: acl.Permission}
		switch {
		case acl.PatternType == PatternLiteral && acl.ResourceName == Wildcard:
			r.wildcard = append(r.wildcard, e)
		case acl.PatternType == PatternLiteral:
			r.literal[acl.ResourceName] = append(r.literal[acl.ResourceName], e)
		case acl.PatternType == PatternPrefixed:
			if _, ok := r.prefixed[acl.ResourceName]; !ok {
				r.lengths = append(r.lengths, len(acl.ResourceName))
			}
			r.prefixed[acl.ResourceName] = append(r.prefixed[acl.ResourceName], e)
		}
	}
	for _, r := range ix.byType {
		slices.Sort(r.lengths)
		r.lengths = slices.Compact(r.lengths)
	}
	return ix
}

// compareACL orders ACLs by resource type, pattern type, name, principal,
// host, operation and permission.
func compareACL(a, b ACL) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.PatternType, b.PatternType),
		strings.Compare(a.ResourceName, b.ResourceName),
		strings.Compare(a.Principal, b.Principal),
		strings.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// verdict accumulates the entries matching one request.
type verdict struct {
	named, allow, deny bool
}

func (v *verdict) scan(es []entry, s Subject, op Operation) {
	if len(es) > 0 {
		v.named = true
	}
	for i := range es {
		e := &es[i]
		if (e.principal != s.Principal && e.principal != WildcardPrincipal) || !s.hostMatches(e.host) || !opMatches(e, op) {
			continue
		}
		if e.perm == PermDeny {
			v.deny = true
			return
		}
		v.allow = true
	}
}

// opMatches is the operation rule of Kafka's StandardAuthorizerData.findResult.
func opMatches(e *entry, op Operation) bool {
	if e.op == OpAll || e.op == op {
		return true
	}
	if e.perm != PermAllow {
		return false
	}
	switch op {
	case OpDescribe:
		return e.op == OpRead || e.op == OpWrite || e.op == OpDelete || e.op == OpAlter
	case OpDescribeConfigs:
		return e.op == OpAlterConfigs
	}
	return false
}

func (ix *index) decide(s Subject, op Operation, rt ResourceType, name string, allowIfNoACL bool) bool {
	r := ix.byType[rt]
	if r == nil {
		return allowIfNoACL
	}
	var v verdict
	v.scan(r.literal[name], s, op)
	for _, n := range r.lengths {
		if v.deny || n > len(name) {
			break
		}
		v.scan(r.prefixed[name[:n]], s, op)
	}
	if !v.deny {
		v.scan(r.wildcard, s, op)
	}
	switch {
	case v.deny:
		return false
	case v.allow:
		return true
	case !v.named:
		return allowIfNoACL
	}
	return false
}
