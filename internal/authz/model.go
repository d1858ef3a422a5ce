// Package authz is Strata's authorizer: Kafka's ACL model (resource
// patterns, access control entries, binding filters), the decision rules of
// Kafka's StandardAuthorizer (org.apache.kafka.metadata.authorizer.
// StandardAuthorizerData: DENY wins, super.users, allow.everyone.if.no.acl.found,
// implied operations, literal/prefixed/wildcard resource patterns, hosts) over
// an index built once per ACL change, and principals (SASL user names, TLS
// certificate subjects mapped by ssl.principal.mapping.rules, ANONYMOUS).
//
// The package is pure: it holds no I/O and no goroutines. Where the ACLs are
// stored (the cluster metadata, internal/meta) and when they change is the
// caller's business; it hands each new set to Authorizer.SetACLs.
package authz

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is Kafka's org.apache.kafka.common.resource.ResourceType
// (its wire codes).
type ResourceType int8

// Kafka's resource types.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// PatternType is Kafka's org.apache.kafka.common.resource.PatternType.
type PatternType int8

// Kafka's pattern types. MATCH and ANY occur only in filters.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's org.apache.kafka.common.acl.AclOperation.
type Operation int8

// Kafka's operations. ANY occurs only in filters; ALL in an ACL matches
// every operation.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// Permission is Kafka's org.apache.kafka.common.acl.AclPermissionType.
type Permission int8

// Kafka's permission types. ANY occurs only in filters.
const (
	PermUnknown Permission = 0
	PermAny     Permission = 1
	PermDeny    Permission = 2
	PermAllow   Permission = 3
)

// Wildcard is the resource name and host that match any name or host, and
// WildcardPrincipal the principal matching any principal (Kafka's
// ResourcePattern.WILDCARD_RESOURCE, AclEntry.WILDCARD_HOST and
// WILDCARD_PRINCIPAL_STRING).
const (
	Wildcard          = "*"
	WildcardPrincipal = "User:*"
	// ClusterName is the only name of the CLUSTER resource (Kafka's
	// CLUSTER_NAME, "kafka-cluster").
	ClusterName = "kafka-cluster"
)

var resourceNames = []string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
var patternNames = []string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}
var opNames = []string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}
var permNames = []string{"UNKNOWN", "ANY", "DENY", "ALLOW"}

func name(names []string, v int8) string {
	if v < 0 || int(v) >= len(names) {
		return "UNKNOWN"
	}
	return names[v]
}

func (r ResourceType) String() string { return name(resourceNames, int8(r)) }
func (p PatternType) String() string  { return name(patternNames, int8(p)) }
func (o Operation) String() string    { return name(opNames, int8(o)) }
func (p Permission) String() string   { return name(permNames, int8(p)) }

// Known reports whether r is a code Kafka defines other than UNKNOWN
// (unknown codes decode to UNKNOWN in Kafka, ResourceType.fromCode).
func (r ResourceType) Known() bool { return r > ResourceUnknown && r <= ResourceUser }
func (p PatternType) Known() bool  { return p > PatternUnknown && p <= PatternPrefixed }
func (o Operation) Known() bool    { return o > OpUnknown && o <= OpDescribeTokens }
func (p Permission) Known() bool   { return p > PermUnknown && p <= PermAllow }

// parseName finds s among names, ignoring case, '_' and '-' (so kafka-acls'
// "IdempotentWrite", "idempotent-write" and Kafka's "IDEMPOTENT_WRITE" are
// one name).
func parseName(names []string, s string) (int8, bool) {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(strings.TrimSpace(s)))
	}
	n := norm(s)
	for i, v := range names {
		if i > 0 && norm(v) == n {
			return int8(i), true
		}
	}
	return 0, false
}

// ParseResourceType parses a resource type name (TOPIC, Topic, topic,
// TRANSACTIONAL_ID, TransactionalId, ...).
func ParseResourceType(s string) (ResourceType, error) {
	v, ok := parseName(resourceNames, s)
	if !ok {
		return 0, fmt.Errorf("unknown resource type %q (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER, ANY)", s)
	}
	return ResourceType(v), nil
}

// ParsePatternType parses a pattern type name (LITERAL, PREFIXED, MATCH, ANY).
func ParsePatternType(s string) (PatternType, error) {
	v, ok := parseName(patternNames, s)
	if !ok {
		return 0, fmt.Errorf("unknown resource pattern type %q (LITERAL, PREFIXED, MATCH, ANY)", s)
	}
	return PatternType(v), nil
}

// ParseOperation parses an operation name as kafka-acls' --operation takes
// it (Read, Write, Create, Delete, Alter, Describe, ClusterAction,
// DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens,
// DescribeTokens, All) or as Kafka's enum names them.
func ParseOperation(s string) (Operation, error) {
	v, ok := parseName(opNames, s)
	if !ok {
		return 0, fmt.Errorf("unknown operation %q (Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All)", s)
	}
	return Operation(v), nil
}

// ParsePermission parses ALLOW, DENY or ANY.
func ParsePermission(s string) (Permission, error) {
	v, ok := parseName(permNames, s)
	if !ok {
		return 0, fmt.Errorf("unknown permission type %q (ALLOW, DENY, ANY)", s)
	}
	return Permission(v), nil
}

// ACL is one Kafka ACL binding: a resource pattern and an access control
// entry (org.apache.kafka.common.acl.AclBinding).
type ACL struct {
	ResourceType ResourceType `json:"resource_type"`
	ResourceName string       `json:"resource_name"`
	PatternType  PatternType  `json:"pattern_type"`
	// Principal is "Type:name", e.g. "User:alice", or "User:*".
	Principal string `json:"principal"`
	// Host is an IP address or "*".
	Host       string     `json:"host"`
	Operation  Operation  `json:"operation"`
	Permission Permission `json:"permission"`
}

// String renders the binding the way kafka-acls lists it.
func (a ACL) String() string {
	return fmt.Sprintf("(resource=%s:%s:%s, principal=%s, host=%s, operation=%s, permission=%s)",
		a.ResourceType, a.PatternType, a.ResourceName, a.Principal, a.Host, a.Operation, a.Permission)
}

// ErrInvalid marks an ACL or filter that Kafka answers INVALID_REQUEST.
var ErrInvalid = errors.New("invalid request")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks an ACL to be created with Kafka's rules, in Kafka's
// order and with its messages: AclApis.handleCreateAcls (CLUSTER named
// kafka-cluster, no empty name) and AclControlManager.validateNewAcl
// (concrete resource type, LITERAL or PREFIXED, concrete operation,
// ALLOW or DENY). Strata also requires a principal of the form
// "Type:name" (Kafka's SecurityUtils.parseKafkaPrincipal; Kafka stores a
// malformed one and fails later at every authorization).
func (a ACL) Validate() error {
	if a.ResourceType == ResourceCluster && a.ResourceName != ClusterName {
		return invalid("The only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if a.ResourceName == "" {
		return invalid("Invalid empty resource name")
	}
	if !a.ResourceType.Known() || a.ResourceType == ResourceAny {
		return invalid("Invalid resourceType %s", a.ResourceType)
	}
	if a.PatternType != PatternLiteral && a.PatternType != PatternPrefixed {
		return invalid("Invalid patternType %s", a.PatternType)
	}
	if !a.Operation.Known() || a.Operation == OpAny {
		return invalid("Invalid operation %s", a.Operation)
	}
	if a.Permission != PermAllow && a.Permission != PermDeny {
		return invalid("Invalid permissionType %s", a.Permission)
	}
	if _, err := ParsePrincipal(a.Principal); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// Filter is Kafka's AclBindingFilter: a ResourcePatternFilter and an
// AccessControlEntryFilter. A nil string matches any value.
type Filter struct {
	ResourceType ResourceType
	Name         *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// MatchAll is the filter matching every ACL.
var MatchAll = Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermAny}

// Validate reports a filter with UNKNOWN elements (Kafka's
// AclControlManager.validateFilter: "Unknown patternFilter.").
func (f Filter) Validate() error {
	if !f.ResourceType.Known() || !f.PatternType.Known() {
		return invalid("Unknown patternFilter.")
	}
	if !f.Operation.Known() || !f.Permission.Known() {
		return invalid("Unknown entryFilter.")
	}
	return nil
}

// Matches reports whether the filter matches a, as Kafka's
// ResourcePatternFilter.matches and AccessControlEntryFilter.matches: a
// MATCH filter with a name matches the literal name, the literal wildcard
// "*" and every prefixed pattern the name starts with; ANY or an exact
// pattern type compares names exactly.
func (f Filter) Matches(a ACL) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != a.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != a.PatternType {
		return false
	}
	if f.Name != nil {
		switch {
		case f.PatternType == PatternAny || f.PatternType == a.PatternType:
			if *f.Name != a.ResourceName {
				return false
			}
		case a.PatternType == PatternLiteral:
			if *f.Name != a.ResourceName && a.ResourceName != Wildcard {
				return false
			}
		case a.PatternType == PatternPrefixed:
			if !strings.HasPrefix(*f.Name, a.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	if f.Principal != nil && *f.Principal != a.Principal {
		return false
	}
	if f.Host != nil && *f.Host != a.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != a.Operation {
		return false
	}
	return f.Permission == PermAny || f.Permission == a.Permission
}

// Principal is Kafka's KafkaPrincipal: a type ("User") and a name.
type Principal struct {
	Type string
	Name string
}

// Anonymous is the principal of an unauthenticated connection (PLAINTEXT,
// or SSL without a client certificate): Kafka's KafkaPrincipal.ANONYMOUS.
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

// User returns the principal User:name.
func User(name string) Principal { return Principal{Type: "User", Name: name} }

// String is "Type:name", the form ACLs and super.users name principals in.
func (p Principal) String() string { return p.Type + ":" + p.Name }

// ParsePrincipal parses "Type:name" (split at the first colon, as Kafka's
// SecurityUtils.parseKafkaPrincipal).
func ParsePrincipal(s string) (Principal, error) {
	t, n, ok := strings.Cut(s, ":")
	if s == "" || !ok {
		return Principal{}, fmt.Errorf("expected a string in format principalType:principalName but got %s", s)
	}
	return Principal{Type: t, Name: n}, nil
}

// SupportedOperations lists the operations a resource type has (Kafka's
// AclEntry.supportedOperations): the bits of authorized-operations fields.
func SupportedOperations(r ResourceType) []Operation {
	switch r {
	case ResourceTopic:
		return []Operation{OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs}
	case ResourceGroup:
		return []Operation{OpRead, OpDescribe, OpDelete, OpDescribeConfigs, OpAlterConfigs}
	case ResourceCluster:
		return []Operation{OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe}
	case ResourceTransactionalID:
		return []Operation{OpDescribe, OpWrite}
	case ResourceDelegationToken:
		return []Operation{OpDescribe}
	case ResourceUser:
		return []Operation{OpCreateTokens, OpDescribeTokens}
	}
	return nil
}
