package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// noAuthorizer is Kafka's message for ACL requests to a broker without an
// authorizer.
const noAuthorizer = "No Authorizer is configured on the broker"

// handleDescribeACLs (key 29, v0-3), handleCreateACLs (key 30, v0-3) and
// handleDeleteACLs (key 31, v0-3) answer as a Kafka broker without
// `authorizer.class.name` does: every request and every creation or
// deletion gets SECURITY_DISABLED (54). Strata has no authorizer; access is
// not controlled, and saying so is better than pretending to store ACLs.
func (s *Server) handleDescribeACLs(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = kerr.SecurityDisabled.Code
	resp.ErrorMessage = kmsg.StringPtr(noAuthorizer)
	return reply{msg: resp}, nil
}

func (s *Server) handleCreateACLs(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = kerr.SecurityDisabled.Code
		r.ErrorMessage = kmsg.StringPtr(noAuthorizer)
		resp.Results = append(resp.Results, r)
	}
	return reply{msg: resp}, nil
}

func (s *Server) handleDeleteACLs(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = kerr.SecurityDisabled.Code
		r.ErrorMessage = kmsg.StringPtr(noAuthorizer)
		resp.Results = append(resp.Results, r)
	}
	return reply{msg: resp}, nil
}
