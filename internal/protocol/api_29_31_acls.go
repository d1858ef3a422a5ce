package protocol

import (
	"context"
	"fmt"
	"strings"

	"github.com/strata-io/strata/internal/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// noAuthorizer is Kafka's message for ACL requests to a broker without an
// authorizer.
const noAuthorizer = "No Authorizer is configured on the broker"

// notAuthorized is the message of a request refused
// CLUSTER_AUTHORIZATION_FAILED (Kafka's AuthHelper.authorizeClusterOperation).
func notAuthorized(name string) *string {
	return kmsg.StringPtr("Request " + name + " is not authorized.")
}

// filterFromWire checks a DescribeAcls or DeleteAcls filter as Kafka's
// request classes do when parsing: on v0 a pattern type of ANY reads as
// LITERAL and anything else but LITERAL is refused, and an element Kafka
// does not know (UNKNOWN) is refused. Kafka fails the parse, which closes
// the connection: so does the error returned here.
func filterFromWire(version int16, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType,
	principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) (authz.Filter, error) {
	f := authz.Filter{ResourceType: authz.ResourceType(rt), Name: name, PatternType: authz.PatternType(pt),
		Principal: principal, Host: host, Operation: authz.Operation(op), Permission: authz.Permission(perm)}
	if version == 0 {
		if f.PatternType == authz.PatternAny {
			f.PatternType = authz.PatternLiteral
		} else if f.PatternType != authz.PatternLiteral {
			return f, fmt.Errorf("version 0 only supports literal resource pattern types, got %s: %w", f.PatternType, kerr.UnsupportedVersion)
		}
	}
	if err := f.Validate(); err != nil {
		return f, fmt.Errorf("ACL filter with unknown elements: %w", err)
	}
	return f, nil
}

// handleDescribeACLs (key 29, v0-3) lists the ACLs a filter matches,
// grouped by resource pattern (Kafka's AclApis.handleDescribeAcls):
// DESCRIBE on the cluster is required (CLUSTER_AUTHORIZATION_FAILED);
// without an authorizer every request gets SECURITY_DISABLED.
func (s *Server) handleDescribeACLs(_ context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f, err := filterFromWire(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType,
		req.Principal, req.Host, req.Operation, req.PermissionType)
	if err != nil {
		return reply{}, err
	}
	if !c.allowedCluster(authz.OpDescribe) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, notAuthorized("DescribeAcls")
		return reply{msg: resp}, nil
	}
	if s.cfg.Authorizer == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
		return reply{msg: resp}, nil
	}
	var cur *kmsg.DescribeACLsResponseResource
	for _, a := range s.cfg.Authorizer.ACLs(f) { // sorted: one resource's ACLs are adjacent
		if cur == nil || int8(cur.ResourceType) != int8(a.ResourceType) || cur.ResourceName != a.ResourceName ||
			int8(cur.ResourcePatternType) != int8(a.PatternType) {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			r.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			resp.Resources = append(resp.Resources, r)
			cur = &resp.Resources[len(resp.Resources)-1]
		}
		d := kmsg.NewDescribeACLsResponseResourceACL()
		d.Principal, d.Host = a.Principal, a.Host
		d.Operation, d.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		cur.ACLs = append(cur.ACLs, d)
	}
	return reply{msg: resp}, nil
}

// handleCreateACLs (key 30, v0-3) stores ACLs in the cluster metadata
// (Kafka's AclApis.handleCreateAcls and AclControlManager.createAcls):
// ALTER on the cluster is required; each creation is checked with
// Kafka's rules (INVALID_REQUEST with its message) and the valid ones are
// stored together. Kafka refuses the resource type ANY and the pattern
// types MATCH and ANY in a creation by failing the whole request with
// UNKNOWN_SERVER_ERROR (its ResourcePattern constructor throws); Strata
// answers those creations INVALID_REQUEST, as AclControlManager.validateNewAcl
// means to.
func (s *Server) handleCreateACLs(ctx context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	all := func(code int16, msg *string) reply {
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = code, msg
			resp.Results = append(resp.Results, r)
		}
		return reply{msg: resp}
	}
	for _, cr := range req.Creations { // Kafka's CreateAclsRequest.validate, at parse time
		pt := authz.PatternType(cr.ResourcePatternType)
		if req.Version == 0 {
			pt = authz.PatternLiteral
		}
		if !authz.ResourceType(cr.ResourceType).Known() || !pt.Known() ||
			!authz.Operation(cr.Operation).Known() || !authz.Permission(cr.PermissionType).Known() {
			return reply{}, fmt.Errorf("CreateAcls creation with unknown elements: %w", kerr.InvalidRequest)
		}
	}
	if !c.allowedCluster(authz.OpAlter) {
		return all(kerr.ClusterAuthorizationFailed.Code, notAuthorized("CreateAcls")), nil
	}
	if s.cfg.Authorizer == nil || s.cfg.Security == nil {
		return all(kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)), nil
	}
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	var valid []authz.ACL
	var validAt []int
	for i, cr := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		a := authz.ACL{ResourceType: authz.ResourceType(cr.ResourceType), ResourceName: cr.ResourceName,
			PatternType: authz.PatternType(cr.ResourcePatternType), Principal: cr.Principal, Host: cr.Host,
			Operation: authz.Operation(cr.Operation), Permission: authz.Permission(cr.PermissionType)}
		if req.Version == 0 {
			a.PatternType = authz.PatternLiteral
		}
		if err := a.Validate(); err != nil {
			resp.Results[i].ErrorCode = kerr.InvalidRequest.Code
			resp.Results[i].ErrorMessage = kmsg.StringPtr(strings.TrimPrefix(err.Error(), authz.ErrInvalid.Error()+": "))
			continue
		}
		valid = append(valid, a)
		validAt = append(validAt, i)
	}
	if len(valid) > 0 {
		if err := s.cfg.Security.CreateACLs(ctx, valid); err != nil {
			s.logger.Warn("CreateAcls failed", "err", err)
			for _, i := range validAt {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errCode(err), errMessage(err)
			}
		}
	}
	return reply{msg: resp}, nil
}

// handleDeleteACLs (key 31, v0-3) deletes the ACLs each filter matches
// (Kafka's AclApis.handleDeleteAcls and AclControlManager.deleteAcls): ALTER
// on the cluster is required; every filter's matches are deleted together
// and listed in its result.
func (s *Server) handleDeleteACLs(ctx context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	filters := make([]authz.Filter, len(req.Filters))
	for i, f := range req.Filters {
		var err error
		if filters[i], err = filterFromWire(req.Version, f.ResourceType, f.ResourceName, f.ResourcePatternType,
			f.Principal, f.Host, f.Operation, f.PermissionType); err != nil {
			return reply{}, err
		}
	}
	all := func(code int16, msg *string) reply {
		for range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = code, msg
			resp.Results = append(resp.Results, r)
		}
		return reply{msg: resp}
	}
	if !c.allowedCluster(authz.OpAlter) {
		return all(kerr.ClusterAuthorizationFailed.Code, notAuthorized("DeleteAcls")), nil
	}
	if s.cfg.Authorizer == nil || s.cfg.Security == nil {
		return all(kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)), nil
	}
	// Matched and deleted by the store at one point of its order, not on
	// this broker's authorizer view, which may lag another broker's
	// change (Kafka's controller decides DeleteAcls on its committed
	// state).
	matches, storeErr := s.cfg.Security.DeleteMatchingACLs(ctx, filters)
	if storeErr != nil {
		s.logger.Warn("DeleteAcls failed", "err", storeErr)
	}
	for i := range filters {
		r := kmsg.NewDeleteACLsResponseResult()
		if storeErr != nil && (matches == nil || len(matches[i]) > 0) {
			r.ErrorCode, r.ErrorMessage = errCode(storeErr), errMessage(storeErr)
			resp.Results = append(resp.Results, r)
			continue
		}
		for _, a := range matches[i] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			m.Principal, m.Host = a.Principal, a.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, r)
	}
	return reply{msg: resp}, nil
}
