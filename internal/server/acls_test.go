package server_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
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

// CreateAcls, DescribeAcls and DeleteAcls at every version Kafka 3.x
// serves (v0-v3): v0 carries no pattern type (Kafka reads it as LITERAL,
// in bindings and in filters alike), v1 added PREFIXED and the MATCH/ANY
// filters, v2 is flexible, v3 only widened what the user may be.
func TestACLAPIsEveryVersion(t *testing.T) {
	tb := startSecure(t, nil)
	ctx := ctxT(t)
	for v := int16(0); v <= 3; v++ {
		vers := kversion.Stable()
		for _, key := range []int16{29, 30, 31} {
			vers.SetMaxKeyVersion(key, v)
		}
		cl := as(tb, "admin", kgo.MaxVersions(vers))
		name := fmt.Sprintf("v%d", v)
		create := kmsg.NewPtrCreateACLsRequest()
		patterns := []kmsg.ACLResourcePatternType{kmsg.ACLResourcePatternTypeLiteral}
		if v >= 1 {
			patterns = append(patterns, kmsg.ACLResourcePatternTypePrefixed)
		}
		for _, pt := range patterns {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, name, pt
			c.Principal, c.Host, c.Operation, c.PermissionType = "User:carol", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			create.Creations = append(create.Creations, c)
		}
		cresp, err := create.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("v%d CreateAcls: %v", v, err)
		}
		for _, r := range cresp.Results {
			if r.ErrorCode != 0 {
				t.Fatalf("v%d CreateAcls: %v", v, kerr.ErrorForCode(r.ErrorCode))
			}
		}

		describe := kmsg.NewPtrDescribeACLsRequest()
		describe.ResourceType, describe.ResourceName = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(name)
		describe.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral // v0: implied
		if v >= 1 {
			describe.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
		}
		describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		dresp, err := describe.RequestWith(ctx, cl)
		if err != nil || dresp.ErrorCode != 0 {
			t.Fatalf("v%d DescribeAcls: %v %v", v, err, dresp)
		}
		if cresp.Version != v || dresp.Version != v {
			t.Fatalf("asked v%d, answered CreateAcls v%d DescribeAcls v%d", v, cresp.Version, dresp.Version)
		}
		if len(dresp.Resources) != len(patterns) {
			t.Errorf("v%d DescribeAcls %s: %d resources, want %d: %+v", v, name, len(dresp.Resources), len(patterns), dresp.Resources)
		}
		for _, r := range dresp.Resources {
			if r.ResourceName != name || len(r.ACLs) != 1 || r.ACLs[0].Principal != "User:carol" {
				t.Errorf("v%d DescribeAcls: %+v", v, r)
			}
		}

		del := kmsg.NewPtrDeleteACLsRequest()
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(name)
		f.ResourcePatternType = describe.ResourcePatternType
		f.Principal = kmsg.StringPtr("User:carol")
		f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		del.Filters = append(del.Filters, f)
		delresp, err := del.RequestWith(ctx, cl)
		if err != nil || len(delresp.Results) != 1 || delresp.Results[0].ErrorCode != 0 {
			t.Fatalf("v%d DeleteAcls: %v %+v", v, err, delresp)
		}
		if got := len(delresp.Results[0].MatchingACLs); got != len(patterns) {
			t.Errorf("v%d DeleteAcls: %d deleted, want %d", v, got, len(patterns))
		}
	}
}
