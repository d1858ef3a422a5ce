package meta

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-io/strata/internal/authz"
)

// ACLs and client quotas (issue 15) live under
//
//	<p>/acls/<TYPE>/<PATTERN>/<name>/<principal>/<host>/<OPERATION>/<PERMISSION>
//	<p>/quotas/<type>=<name>[/<type>=<name>]
//
// One key per ACL binding, derived from the binding itself (names, principal
// and host path-escaped), so that creating an existing ACL rewrites the same
// key: identical bindings count once, as in Kafka's AclControlManager. One
// key per quota entity (user, client-id, or user then client-id; the name
// "<default>" unescaped is Kafka's default entity, a real name is
// path-escaped so it can never read as the default), holding every quota
// key of that entity (Kafka's ClientQuotaRecords of the entity).

// ACLs is the prefix of every ACL key.
func (k Keys) ACLs() string { return k.Prefix + "/acls/" }

// ACL is the key of one ACL binding.
func (k Keys) ACL(a authz.ACL) string {
	return k.ACLs() + strings.Join([]string{
		a.ResourceType.String(), a.PatternType.String(), url.PathEscape(a.ResourceName),
		url.PathEscape(a.Principal), url.PathEscape(a.Host), a.Operation.String(), a.Permission.String(),
	}, "/")
}

// Quotas is the prefix of every client quota key.
func (k Keys) Quotas() string { return k.Prefix + "/quotas/" }

// defaultName is the path segment name of Kafka's default entity.
const defaultName = "<default>"

// Quota is the key of one quota entity.
func (k Keys) Quota(entity []QuotaEntityPart) string {
	parts := make([]string, len(entity))
	for i, p := range canonicalEntity(entity) {
		n := defaultName
		if p.Name != nil {
			n = url.PathEscape(*p.Name)
		}
		parts[i] = p.Type + "=" + n
	}
	return k.Quotas() + strings.Join(parts, "/")
}

// QuotaEntityPart is one component of a client quota entity (Kafka's
// ClientQuotaRecord.EntityData): a type ("user", "client-id") and a name,
// nil for the default entity.
type QuotaEntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name"`
}

// ClientQuota is one entity's quotas: quota key -> value.
type ClientQuota struct {
	Entity []QuotaEntityPart  `json:"entity"`
	Values map[string]float64 `json:"values"`
	// ModRevision is the key's etcd mod revision when read (not stored).
	ModRevision int64 `json:"-"`
}

// canonicalEntity orders an entity's parts: user first, then client-id.
func canonicalEntity(e []QuotaEntityPart) []QuotaEntityPart {
	out := slices.Clone(e)
	slices.SortFunc(out, func(a, b QuotaEntityPart) int {
		return strings.Compare(b.Type, a.Type) // "user" > "client-id"
	})
	return out
}

// PutACLs stores ACL bindings (present ones are rewritten unchanged). The
// request's bindings are written in one transaction when they fit in
// MaxOps, as Kafka applies a CreateAcls request atomically; more are
// written in several. It returns the revision to wait for.
func (s *Store) PutACLs(ctx context.Context, acls []authz.ACL) (int64, error) {
	seen := map[string]bool{}
	var changes []Change
	for _, a := range acls {
		k := s.keys.ACL(a)
		if seen[k] {
			continue
		}
		seen[k] = true
		c, err := PutJSON(k, a, AnyRevision)
		if err != nil {
			return 0, err
		}
		changes = append(changes, c)
	}
	_, rev, err := s.Batches(ctx, changes)
	return rev, err
}

// DeleteACLs deletes ACL bindings (absent ones are no-ops) in transactions
// of at most MaxOps. It returns the revision to wait for.
func (s *Store) DeleteACLs(ctx context.Context, acls []authz.ACL) (int64, error) {
	seen := map[string]bool{}
	var changes []Change
	for _, a := range acls {
		k := s.keys.ACL(a)
		if !seen[k] {
			seen[k] = true
			changes = append(changes, Change{Key: k, Delete: true, Expect: AnyRevision})
		}
	}
	_, rev, err := s.Batches(ctx, changes)
	return rev, err
}

// DeleteACLsAt deletes ACL bindings matched on a view at revision rev, in
// one transaction that applies only while the ACLs are still as of rev: no
// ACL key written since (a creation or rewrite) and every binding to
// delete still present. Otherwise it returns ErrConflict and the caller
// matches again on a newer view. A DeleteAcls answer then lists exactly
// what it removed at one point of the store's order, as Kafka's
// AclControlManager.deleteAcls decides and deletes in the controller's
// single order; deleting bindings matched on a view with no compare let
// two concurrent deletions both list one binding, and a lagging view list
// nothing although the binding existed (found by the metadata checker,
// docs/reliability.md). More bindings than one transaction holds are
// deleted as DeleteACLs does (several transactions, no compare).
func (s *Store) DeleteACLsAt(ctx context.Context, acls []authz.ACL, rev int64) (int64, error) {
	seen := map[string]bool{}
	var keys []string
	for _, a := range acls {
		if k := s.keys.ACL(a); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys)+1 > s.maxOps {
		return s.DeleteACLs(ctx, acls)
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.keys.ACLs()), "<", rev+1).WithPrefix()}
	ops := make([]clientv3.Op, 0, len(keys))
	for _, k := range keys {
		cmps = append(cmps, clientv3.Compare(clientv3.Version(k), ">", 0))
		ops = append(ops, clientv3.OpDelete(k))
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, Retriable(err)
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

// QuotaChange sets (Values non-empty) or removes (Values empty) one
// entity's quotas, compared against the mod revision the caller read it at
// (0: it did not exist).
type QuotaChange struct {
	Entity []QuotaEntityPart
	Values map[string]float64
	Expect int64
}

// AlterQuotas applies quota changes in one compare-and-set transaction
// (Kafka applies an AlterClientQuotas request atomically): ErrConflict
// when an entity changed since it was read; the caller reads again.
func (s *Store) AlterQuotas(ctx context.Context, changes []QuotaChange) (int64, error) {
	if len(changes) > s.maxOps {
		return 0, fmt.Errorf("an AlterClientQuotas request of %d entities exceeds the metadata store's %d operations per transaction", len(changes), s.maxOps)
	}
	out := make([]Change, 0, len(changes))
	for _, c := range changes {
		k := s.keys.Quota(c.Entity)
		expect := c.Expect
		if len(c.Values) == 0 {
			if expect == 0 {
				continue // removing what is not there
			}
			out = append(out, Change{Key: k, Delete: true, Expect: expect})
			continue
		}
		ch, err := PutJSON(k, ClientQuota{Entity: canonicalEntity(c.Entity), Values: c.Values}, expect)
		if err != nil {
			return 0, err
		}
		out = append(out, ch)
	}
	if len(out) == 0 {
		return 0, nil
	}
	return s.Txn(ctx, out)
}

// applyACL applies one ACL key event to the view's ACL map (copied).
func (nv *View) applyACL(key string, value []byte) error {
	if value == nil {
		delete(nv.ACLs, key)
		return nil
	}
	var a authz.ACL
	if err := json.Unmarshal(value, &a); err != nil {
		return fmt.Errorf("acl %s: %w", key, err)
	}
	nv.ACLs[key] = a
	return nil
}

// applyQuota applies one quota key event to the view's quota map (copied).
func (nv *View) applyQuota(key string, value []byte, modRev int64) error {
	if value == nil {
		delete(nv.Quotas, key)
		return nil
	}
	var q ClientQuota
	if err := json.Unmarshal(value, &q); err != nil {
		return fmt.Errorf("client quota %s: %w", key, err)
	}
	q.ModRevision = modRev
	nv.Quotas[key] = q
	return nil
}
