package server_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Without an authorizer Kafka answers every ACL request SECURITY_DISABLED;
// so does Strata, on each creation and deletion too.
func TestACLRequestsSecurityDisabled(t *testing.T) {
	tb := startBroker(t, "", nil)
	cl := tb.Client()
	ctx := ctxT(t)

	d := kmsg.NewPtrDescribeACLsRequest()
	d.ResourceType, d.Operation, d.PermissionType = 1, 1, 1 // ANY
	dr, err := d.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if dr.ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("DescribeACLs: %v, want SECURITY_DISABLED", kerr.ErrorForCode(dr.ErrorCode))
	}

	c := kmsg.NewPtrCreateACLsRequest()
	for _, name := range []string{"a", "b"} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, name, kmsg.ACLResourcePatternTypeLiteral
		cr.Principal, cr.Host = "User:alice", "*"
		cr.Operation, cr.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		c.Creations = append(c.Creations, cr)
	}
	cr, err := c.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(cr.Results) != 2 || cr.Results[0].ErrorCode != kerr.SecurityDisabled.Code || cr.Results[1].ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("CreateACLs results: %+v", cr.Results)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	delr, err := del.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(delr.Results) != 1 || delr.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("DeleteACLs results: %+v", delr.Results)
	}
}
