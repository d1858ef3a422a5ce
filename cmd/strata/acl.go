package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/authz"
)

// newACLCmd is `strata acl create|list|delete`, with kafka-acls' vocabulary
// (--allow-principal, --deny-principal, --allow-host, --deny-host,
// --operation, --topic, --group, --cluster, --transactional-id,
// --resource-pattern-type, --producer, --consumer, --idempotent) over
// CreateAcls, DescribeAcls and DeleteAcls.
func newACLCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{Use: "acl", Short: "Create, list and delete ACLs (kafka-acls vocabulary; needs a broker with authorizer.class.name)"}
	addClientFlags(cmd, o)
	cmd.AddCommand(newACLCreateCmd(o), newACLListCmd(o), newACLDeleteCmd(o))
	return cmd
}

// aclFlags are kafka-acls' resource, principal and operation options.
type aclFlags struct {
	allowPrincipals, denyPrincipals []string
	allowHosts, denyHosts           []string
	principals                      []string // list/delete: --principal
	operations                      []string
	topics, groups, txnIDs          []string
	cluster                         bool
	patternType                     string
	producer, consumer, idempotent  bool
}

func (f *aclFlags) register(cmd *cobra.Command, kind string) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.topics, "topic", nil, "topic name (repeatable; * for all topics)")
	fl.StringArrayVar(&f.groups, "group", nil, "consumer group (repeatable; * for all groups)")
	fl.StringArrayVar(&f.txnIDs, "transactional-id", nil, "transactional id (repeatable; * for all)")
	fl.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fl.StringArrayVar(&f.operations, "operation", nil, "Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All (repeatable)")
	fl.StringArrayVar(&f.allowPrincipals, "allow-principal", nil, "principal to allow, Type:name, e.g. User:alice (repeatable)")
	fl.StringArrayVar(&f.denyPrincipals, "deny-principal", nil, "principal to deny (repeatable)")
	fl.StringArrayVar(&f.allowHosts, "allow-host", nil, "host (IP) the allow principals may connect from (default * when --allow-principal is given)")
	fl.StringArrayVar(&f.denyHosts, "deny-host", nil, "host (IP) the deny principals are denied from (default * when --deny-principal is given)")
	if kind == "create" {
		fl.StringVar(&f.patternType, "resource-pattern-type", "LITERAL", "LITERAL or PREFIXED")
		fl.BoolVar(&f.producer, "producer", false, "the ACLs of a producer: WRITE, DESCRIBE and CREATE on the topics (with --idempotent, IDEMPOTENT_WRITE on the cluster; with --transactional-id, WRITE and DESCRIBE on it)")
		fl.BoolVar(&f.consumer, "consumer", false, "the ACLs of a consumer: READ and DESCRIBE on the topics, READ on the groups")
		fl.BoolVar(&f.idempotent, "idempotent", false, "with --producer: IDEMPOTENT_WRITE on the cluster")
	} else {
		fl.StringVar(&f.patternType, "resource-pattern-type", "LITERAL", "LITERAL, PREFIXED, ANY (every pattern type) or MATCH (every ACL that applies to the named resource)")
		fl.StringArrayVar(&f.principals, "principal", nil, "only ACLs of this principal (repeatable)")
	}
}

// resource is one resource pattern named by the flags.
type resource struct {
	typ  authz.ResourceType
	name string
}

func (f *aclFlags) resources() []resource {
	var out []resource
	for _, t := range f.topics {
		out = append(out, resource{authz.ResourceTopic, t})
	}
	for _, g := range f.groups {
		out = append(out, resource{authz.ResourceGroup, g})
	}
	for _, x := range f.txnIDs {
		out = append(out, resource{authz.ResourceTransactionalID, x})
	}
	if f.cluster {
		out = append(out, resource{authz.ResourceCluster, authz.ClusterName})
	}
	return out
}

func parseOps(names []string) ([]authz.Operation, error) {
	var out []authz.Operation
	for _, n := range names {
		op, err := authz.ParseOperation(n)
		if err != nil {
			return nil, fmt.Errorf("--operation: %w", err)
		}
		out = append(out, op)
	}
	return out, nil
}

func checkPrincipals(flag string, ps []string) error {
	for _, p := range ps {
		if _, err := authz.ParsePrincipal(p); err != nil {
			return fmt.Errorf("%s %q: %w", flag, p, err)
		}
	}
	return nil
}

// bindings expands the create flags into ACL bindings, as kafka-acls
// --add does.
func (f *aclFlags) bindings() ([]authz.ACL, error) {
	pt, err := authz.ParsePatternType(f.patternType)
	if err != nil {
		return nil, fmt.Errorf("--resource-pattern-type: %w", err)
	}
	if pt != authz.PatternLiteral && pt != authz.PatternPrefixed {
		return nil, fmt.Errorf("--resource-pattern-type %s: ACLs are LITERAL or PREFIXED", pt)
	}
	if f.cluster && pt != authz.PatternLiteral && !f.producer && !f.consumer {
		// Kafka's AclCommand adds the cluster resource only for LITERAL.
		return nil, fmt.Errorf("--cluster with --resource-pattern-type %s: the cluster resource (%s) takes LITERAL ACLs only; give the cluster ACL in a command of its own", pt, authz.ClusterName)
	}
	if len(f.allowPrincipals)+len(f.denyPrincipals) == 0 {
		return nil, errors.New("name a principal: --allow-principal or --deny-principal (e.g. User:alice)")
	}
	if err := checkPrincipals("--allow-principal", f.allowPrincipals); err != nil {
		return nil, err
	}
	if err := checkPrincipals("--deny-principal", f.denyPrincipals); err != nil {
		return nil, err
	}
	ops, err := parseOps(f.operations)
	if err != nil {
		return nil, err
	}
	type grant struct {
		res resource
		ops []authz.Operation
	}
	var grants []grant
	switch {
	case f.producer || f.consumer:
		if len(f.topics) == 0 {
			return nil, errors.New("--producer and --consumer need --topic")
		}
		if f.consumer && len(f.groups) == 0 {
			return nil, errors.New("--consumer needs --group")
		}
		for _, t := range f.topics {
			if f.producer {
				grants = append(grants, grant{resource{authz.ResourceTopic, t}, []authz.Operation{authz.OpWrite, authz.OpDescribe, authz.OpCreate}})
			}
			if f.consumer {
				grants = append(grants, grant{resource{authz.ResourceTopic, t}, []authz.Operation{authz.OpRead, authz.OpDescribe}})
			}
		}
		if f.consumer {
			for _, g := range f.groups {
				grants = append(grants, grant{resource{authz.ResourceGroup, g}, []authz.Operation{authz.OpRead}})
			}
		}
		if f.producer {
			for _, x := range f.txnIDs {
				grants = append(grants, grant{resource{authz.ResourceTransactionalID, x}, []authz.Operation{authz.OpWrite, authz.OpDescribe}})
			}
			if f.idempotent {
				grants = append(grants, grant{resource{authz.ResourceCluster, authz.ClusterName}, []authz.Operation{authz.OpIdempotentWrite}})
			}
		}
	default:
		res := f.resources()
		if len(res) == 0 {
			return nil, errors.New("name a resource: --topic, --group, --transactional-id or --cluster")
		}
		if len(ops) == 0 {
			return nil, errors.New("name the operations: --operation (Read, Write, Describe, ..., All)")
		}
		for _, r := range res {
			grants = append(grants, grant{r, ops})
		}
	}
	hostsOr := func(hosts []string) []string {
		if len(hosts) == 0 {
			return []string{authz.Wildcard}
		}
		return hosts
	}
	var out []authz.ACL
	for _, g := range grants {
		// The cluster resource is always LITERAL (Kafka's AclCommand
		// CLUSTER_RESOURCE_FILTER): --producer --idempotent with
		// --resource-pattern-type PREFIXED gives PREFIXED topic ACLs and
		// a LITERAL IDEMPOTENT_WRITE on kafka-cluster.
		rpt := pt
		if g.res.typ == authz.ResourceCluster {
			rpt = authz.PatternLiteral
		}
		for _, op := range g.ops {
			add := func(perm authz.Permission, principals, hosts []string) {
				for _, p := range principals {
					for _, h := range hostsOr(hosts) {
						out = append(out, authz.ACL{ResourceType: g.res.typ, ResourceName: g.res.name, PatternType: rpt,
							Principal: p, Host: h, Operation: op, Permission: perm})
					}
				}
			}
			add(authz.PermAllow, f.allowPrincipals, f.allowHosts)
			add(authz.PermDeny, f.denyPrincipals, f.denyHosts)
		}
	}
	return out, nil
}

// filters expands the list/delete flags into binding filters (kafka-acls
// --list and --remove: every named resource, or all resources).
func (f *aclFlags) filters() ([]authz.Filter, error) {
	pt, err := authz.ParsePatternType(f.patternType)
	if err != nil {
		return nil, fmt.Errorf("--resource-pattern-type: %w", err)
	}
	ops, err := parseOps(f.operations)
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		ops = []authz.Operation{authz.OpAny}
	}
	res := f.resources()
	type rf struct {
		typ  authz.ResourceType
		name *string
		pt   authz.PatternType
	}
	var rfs []rf
	for _, r := range res {
		n := r.name
		rfs = append(rfs, rf{r.typ, &n, pt})
	}
	if len(rfs) == 0 {
		rfs = []rf{{authz.ResourceAny, nil, authz.PatternAny}}
	}
	type pf struct {
		principal *string
		host      *string
		perm      authz.Permission
	}
	var pfs []pf
	addP := func(principals, hosts []string, perm authz.Permission) {
		for _, p := range principals {
			p := p
			if len(hosts) == 0 {
				pfs = append(pfs, pf{&p, nil, perm})
			}
			for _, h := range hosts {
				h := h
				pfs = append(pfs, pf{&p, &h, perm})
			}
		}
	}
	addP(f.allowPrincipals, f.allowHosts, authz.PermAllow)
	addP(f.denyPrincipals, f.denyHosts, authz.PermDeny)
	addP(f.principals, nil, authz.PermAny)
	if err := checkPrincipals("--principal", f.principals); err != nil {
		return nil, err
	}
	if len(pfs) == 0 {
		pfs = []pf{{nil, nil, authz.PermAny}}
	}
	var out []authz.Filter
	for _, r := range rfs {
		for _, p := range pfs {
			for _, op := range ops {
				out = append(out, authz.Filter{ResourceType: r.typ, Name: r.name, PatternType: r.pt,
					Principal: p.principal, Host: p.host, Operation: op, Permission: p.perm})
			}
		}
	}
	return out, nil
}

// aclRow is one ACL as listed (-o json).
type aclRow struct {
	ResourceType string `json:"resource_type"`
	Name         string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func rowOf(a authz.ACL) aclRow {
	return aclRow{a.ResourceType.String(), a.ResourceName, a.PatternType.String(), a.Principal, a.Host, a.Operation.String(), a.Permission.String()}
}

func writeACLs(w io.Writer, rows []aclRow) error {
	return writeTable(w, rows, func(r aclRow) []any {
		return []any{r.ResourceType, r.Name, r.PatternType, r.Principal, r.Host, r.Operation, r.Permission}
	}, "RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
}

// brokerErr formats a Kafka error with its message (withBrokerMessage).
func brokerErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if msg != nil && *msg != "" {
		return withBrokerMessage(err, *msg)
	}
	return err
}

// newACLCreateCmd is `strata acl create` (kafka-acls --add).
func newACLCreateCmd(o *clientOpts) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create ACLs (kafka-acls --add)",
		Example: `  strata acl create --allow-principal User:alice --operation Read \
      --topic orders --group billing
  strata acl create --allow-principal User:etl --operation Write \
      --topic etl- --resource-pattern-type prefixed
  strata acl create --allow-principal User:app --producer --idempotent \
      --topic events
  strata acl create --deny-principal User:mallory --operation All --topic '*'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			acls, err := f.bindings()
			if err != nil {
				return err
			}
			return o.withClient(cmd.Context(), func(ctx context.Context, cl *kgo.Client) error {
				req := kmsg.NewPtrCreateACLsRequest()
				for _, a := range acls {
					c := kmsg.NewCreateACLsRequestCreation()
					c.ResourceType, c.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
					c.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
					c.Principal, c.Host = a.Principal, a.Host
					c.Operation, c.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
					req.Creations = append(req.Creations, c)
				}
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return fmt.Errorf("create ACLs: %w", err)
				}
				var rows []aclRow
				for i, r := range resp.Results {
					if r.ErrorCode != 0 {
						return fmt.Errorf("create ACL %s: %w", acls[i], brokerErr(r.ErrorCode, r.ErrorMessage))
					}
					rows = append(rows, rowOf(acls[i]))
				}
				return o.emit(cmd, rows, func(w io.Writer) error {
					fmt.Fprintf(w, "created %d ACL(s):\n", len(rows))
					return writeACLs(w, rows)
				})
			})
		},
	}
	f.register(cmd, "create")
	return cmd
}

// newACLListCmd is `strata acl list` (kafka-acls --list).
func newACLListCmd(o *clientOpts) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List ACLs (all, or those of the named resources and principals; kafka-acls --list)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filters, err := f.filters()
			if err != nil {
				return err
			}
			return o.withClient(cmd.Context(), func(ctx context.Context, cl *kgo.Client) error {
				seen := map[authz.ACL]bool{}
				rows := []aclRow{}
				for _, flt := range filters {
					req := kmsg.NewPtrDescribeACLsRequest()
					req.ResourceType, req.ResourceName = kmsg.ACLResourceType(flt.ResourceType), flt.Name
					req.ResourcePatternType = kmsg.ACLResourcePatternType(flt.PatternType)
					req.Principal, req.Host = flt.Principal, flt.Host
					req.Operation, req.PermissionType = kmsg.ACLOperation(flt.Operation), kmsg.ACLPermissionType(flt.Permission)
					resp, err := req.RequestWith(ctx, cl)
					if err != nil {
						return fmt.Errorf("list ACLs: %w", err)
					}
					if resp.ErrorCode != 0 {
						return fmt.Errorf("list ACLs: %w", brokerErr(resp.ErrorCode, resp.ErrorMessage))
					}
					for _, r := range resp.Resources {
						for _, d := range r.ACLs {
							a := authz.ACL{ResourceType: authz.ResourceType(r.ResourceType), ResourceName: r.ResourceName,
								PatternType: authz.PatternType(r.ResourcePatternType), Principal: d.Principal, Host: d.Host,
								Operation: authz.Operation(d.Operation), Permission: authz.Permission(d.PermissionType)}
							if !seen[a] {
								seen[a] = true
								rows = append(rows, rowOf(a))
							}
						}
					}
				}
				return o.emit(cmd, rows, func(w io.Writer) error { return writeACLs(w, rows) })
			})
		},
	}
	f.register(cmd, "list")
	return cmd
}

// newACLDeleteCmd is `strata acl delete` (kafka-acls --remove).
func newACLDeleteCmd(o *clientOpts) *cobra.Command {
	f := &aclFlags{}
	var all bool
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete the ACLs the flags match (kafka-acls --remove)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.resources()) == 0 && !all {
				return errors.New("name a resource (--topic, --group, --transactional-id, --cluster), or --all to delete every matching ACL")
			}
			filters, err := f.filters()
			if err != nil {
				return err
			}
			return o.withClient(cmd.Context(), func(ctx context.Context, cl *kgo.Client) error {
				req := kmsg.NewPtrDeleteACLsRequest()
				for _, flt := range filters {
					d := kmsg.NewDeleteACLsRequestFilter()
					d.ResourceType, d.ResourceName = kmsg.ACLResourceType(flt.ResourceType), flt.Name
					d.ResourcePatternType = kmsg.ACLResourcePatternType(flt.PatternType)
					d.Principal, d.Host = flt.Principal, flt.Host
					d.Operation, d.PermissionType = kmsg.ACLOperation(flt.Operation), kmsg.ACLPermissionType(flt.Permission)
					req.Filters = append(req.Filters, d)
				}
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return fmt.Errorf("delete ACLs: %w", err)
				}
				rows := []aclRow{}
				for _, r := range resp.Results {
					if r.ErrorCode != 0 {
						return fmt.Errorf("delete ACLs: %w", brokerErr(r.ErrorCode, r.ErrorMessage))
					}
					for _, m := range r.MatchingACLs {
						rows = append(rows, rowOf(authz.ACL{ResourceType: authz.ResourceType(m.ResourceType), ResourceName: m.ResourceName,
							PatternType: authz.PatternType(m.ResourcePatternType), Principal: m.Principal, Host: m.Host,
							Operation: authz.Operation(m.Operation), Permission: authz.Permission(m.PermissionType)}))
					}
				}
				return o.emit(cmd, rows, func(w io.Writer) error {
					fmt.Fprintf(w, "deleted %d ACL(s)%s\n", len(rows), map[bool]string{true: ":", false: ""}[len(rows) > 0])
					if len(rows) == 0 {
						return nil
					}
					return writeACLs(w, rows)
				})
			})
		},
	}
	f.register(cmd, "delete")
	cmd.Flags().BoolVar(&all, "all", false, "with no resource named: delete every ACL the principal and operation flags match")
	return cmd
}

// withClient runs fn with a client and a context that parent and
// --timeout bound (the ACL requests are sent as built, in kafka-acls'
// terms, rather than through kadm's builder).
func (o *clientOpts) withClient(parent context.Context, fn func(ctx context.Context, cl *kgo.Client) error) error {
	ctx, cancel := context.WithTimeout(parent, o.timeout)
	defer cancel()
	cl, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, cl)
}
