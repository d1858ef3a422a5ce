package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-io/strata/internal/authz"
)

func TestACLsAndQuotasInStore(t *testing.T) {
	cli := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := NewStore(cli, DefaultKeys, 8)
	cache, err := StartCache(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()

	a := authz.ACL{ResourceType: authz.ResourceTopic, ResourceName: "orders/eu", PatternType: authz.PatternPrefixed,
		Principal: "User:alice", Host: "*", Operation: authz.OpRead, Permission: authz.PermAllow}
	b := a
	b.Permission = authz.PermDeny
	if k := st.Keys().ACL(a); k != "/strata/acls/TOPIC/PREFIXED/orders%2Feu/User:alice/%2A/READ/ALLOW" {
		t.Errorf("ACL key %s", k)
	}
	rev, err := st.PutACLs(ctx, []authz.ACL{a, b, a})
	if err != nil {
		t.Fatal(err)
	}
	v, err := cache.WaitRev(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.ACLs) != 2 || v.ACLs[st.Keys().ACL(b)] != b || v.ACLsRev != rev {
		t.Fatalf("view ACLs %v rev %d (put at %d)", v.ACLs, v.ACLsRev, rev)
	}
	// Creating an existing ACL again leaves one copy.
	if rev, err = st.PutACLs(ctx, []authz.ACL{a}); err != nil {
		t.Fatal(err)
	}
	v, _ = cache.WaitRev(ctx, rev)
	if len(v.ACLs) != 2 {
		t.Fatalf("after re-create: %d ACLs", len(v.ACLs))
	}
	if rev, err = st.DeleteACLs(ctx, []authz.ACL{b, b}); err != nil {
		t.Fatal(err)
	}
	v, _ = cache.WaitRev(ctx, rev)
	if len(v.ACLs) != 1 || v.ACLs[st.Keys().ACL(a)] != a {
		t.Fatalf("after delete: %v", v.ACLs)
	}

	// Quotas: a literal user named "<default>" is not the default entity.
	def, odd := []QuotaEntityPart{{Type: "user"}}, []QuotaEntityPart{{Type: "user", Name: ptr("<default>")}}
	both := []QuotaEntityPart{{Type: "client-id", Name: ptr("c/1")}, {Type: "user", Name: ptr("bob")}}
	if k := st.Keys().Quota(both); k != "/strata/quotas/user=bob/client-id=c%2F1" {
		t.Errorf("quota key %s", k)
	}
	if st.Keys().Quota(def) == st.Keys().Quota(odd) {
		t.Error("a user named <default> has the default entity's key")
	}
	rev, err = st.AlterQuotas(ctx, []QuotaChange{
		{Entity: def, Values: map[string]float64{"producer_byte_rate": 1024}},
		{Entity: both, Values: map[string]float64{"request_percentage": 50}},
	})
	if err != nil {
		t.Fatal(err)
	}
	v, _ = cache.WaitRev(ctx, rev)
	q := v.Quotas[st.Keys().Quota(both)]
	if len(v.Quotas) != 2 || q.Values["request_percentage"] != 50 || q.ModRevision != rev || v.QuotasRev != rev || q.Entity[0].Type != "user" {
		t.Fatalf("view quotas %+v", v.Quotas)
	}
	// A stale compare loses and changes nothing.
	if _, err := st.AlterQuotas(ctx, []QuotaChange{
		{Entity: both, Values: map[string]float64{"request_percentage": 10}, Expect: q.ModRevision},
		{Entity: def, Values: map[string]float64{"producer_byte_rate": 1}, Expect: 0},
	}); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale alteration: %v", err)
	}
	rev, err = st.AlterQuotas(ctx, []QuotaChange{{Entity: both, Expect: q.ModRevision}})
	if err != nil {
		t.Fatal(err)
	}
	v, _ = cache.WaitRev(ctx, rev)
	if len(v.Quotas) != 1 {
		t.Fatalf("after removal: %+v", v.Quotas)
	}

	// A fresh load sees the same.
	lv, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(lv.ACLs) != 1 || len(lv.Quotas) != 1 {
		t.Fatalf("loaded %d ACLs, %d quotas", len(lv.ACLs), len(lv.Quotas))
	}
}

func ptr(s string) *string { return &s }

// TestDeleteACLsAt: a deletion decided on a view applies only while the
// ACLs are as of that view: a binding written since, or one of its
// bindings already deleted, makes it ErrConflict (it matches again);
// otherwise it deletes them all at once.
func TestDeleteACLsAt(t *testing.T) {
	cli := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := NewStore(cli, DefaultKeys, 8)
	acl := func(p string) authz.ACL {
		return authz.ACL{ResourceType: authz.ResourceTopic, ResourceName: "t", PatternType: authz.PatternLiteral,
			Principal: p, Host: "*", Operation: authz.OpRead, Permission: authz.PermAllow}
	}
	a, b, c := acl("User:a"), acl("User:b"), acl("User:c")
	seen, err := st.PutACLs(ctx, []authz.ACL{a, b})
	if err != nil {
		t.Fatal(err)
	}
	// Another node creates c after the view at seen: a deletion of a and
	// b matched at seen may not apply (a filter of any principal would
	// have matched c too).
	if _, err := st.PutACLs(ctx, []authz.ACL{c}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteACLsAt(ctx, []authz.ACL{a, b}, seen); !errors.Is(err, ErrConflict) {
		t.Fatalf("delete over a newer creation: %v, want ErrConflict", err)
	}
	// Another node deletes b after the view: a second deletion of b
	// matched on the same view may not list it again.
	seen, err = st.DeleteACLs(ctx, []authz.ACL{c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteACLsAt(ctx, []authz.ACL{b}, seen); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteACLsAt(ctx, []authz.ACL{b}, seen); !errors.Is(err, ErrConflict) {
		t.Fatalf("second delete of b: %v, want ErrConflict", err)
	}
	resp, err := cli.Get(ctx, st.Keys().ACLs(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != st.Keys().ACL(a) {
		t.Fatalf("left: %v", resp.Kvs)
	}
	if _, err := st.DeleteACLsAt(ctx, []authz.ACL{a}, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
}
