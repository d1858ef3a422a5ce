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
	c.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
	cr, err := c.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(cr.Results) != 2 || cr.Results[0].ErrorCode != kerr.SecurityDisabled.Code || cr.Results[1].ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("CreateACLs results: %+v", cr.Results)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	del.Filters = make([]kmsg.DeleteACLsRequestFilter, 1)
	delr, err := del.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(delr.Results) != 1 || delr.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("DeleteACLs results: %+v", delr.Results)
	}
}
