package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/authz"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/protocol"
	"github.com/strata-io/strata/internal/quota"
	"github.com/twmb/franz-go/pkg/kerr"
)

// security is the node's authorizer and client quotas. Both live in the
// cluster metadata (docs/security.md): a watch of the metadata cache hands
// every change of the ACLs or quotas to the authorizer and the quota
// manager, so a change takes effect on every broker at once.
type security struct {
	authorizer *authz.Authorizer // nil: authorization off
	quotas     *quota.Manager
	mapper     *authz.Mapper
	// store is set once the cluster metadata is wired (nil before, and
	// on nodes without the KRaft settings).
	store *metaSecurity
}

// newSecurity reads the authorization and quota settings.
func newSecurity(cfg *config.Broker) (*security, error) {
	sec := &security{}
	on, err := authz.Enabled(cfg.Get("authorizer.class.name"))
	if err != nil {
		return nil, fmt.Errorf("%w: authorizer.class.name: %v", config.ErrInvalid, err)
	}
	if on {
		if !clusterConfigured(cfg) {
			return nil, fmt.Errorf("%w: authorizer.class.name=%s: ACLs are kept in the cluster metadata, which this node runs only with the KRaft settings (process.roles=broker,controller, node.id, controller.quorum.voters=<node.id>@host:port, controller.listener.names and a controller listener in listeners; see docs/cluster.md)",
				config.ErrInvalid, cfg.Get("authorizer.class.name"))
		}
		supers, err := authz.ParseSuperUsers(cfg.Get("super.users"))
		if err != nil {
			return nil, fmt.Errorf("%w: super.users: %v", config.ErrInvalid, err)
		}
		sec.authorizer = authz.New(authz.Config{SuperUsers: supers, AllowIfNoACL: cfg.Bool("allow.everyone.if.no.acl.found")})
	}
	if sec.mapper, err = authz.ParseMappingRules(cfg.Get("ssl.principal.mapping.rules")); err != nil {
		return nil, fmt.Errorf("%w: ssl.principal.mapping.rules: %v", config.ErrInvalid, err)
	}
	sec.quotas = quota.New(quota.Config{
		Window:           quota.Window{Samples: cfg.Int("quota.window.num"), SizeMs: int64(cfg.Int("quota.window.size.seconds")) * 1000},
		ControllerWindow: quota.Window{Samples: cfg.Int("controller.quota.window.num"), SizeMs: int64(cfg.Int("controller.quota.window.size.seconds")) * 1000},
	})
	return sec, nil
}

// attach feeds the authorizer and the quotas from the cluster metadata
// and keeps them current until close.
func (sec *security) attach(store *meta.Store, cache *meta.Cache) {
	ms := &metaSecurity{sec: sec, store: store, cache: cache, done: make(chan struct{})}
	ms.refresh(cache.View())
	ctx, cancel := context.WithCancel(context.Background())
	ms.stop = cancel
	go ms.follow(ctx)
	sec.store = ms
}

// close stops following the metadata.
func (sec *security) close() {
	if sec != nil && sec.store != nil {
		sec.store.stop()
		<-sec.store.done
	}
}

// protocolStore is the store handed to protocol (nil without metadata).
func (sec *security) protocolStore() protocol.SecurityStore {
	if sec.store == nil {
		return nil
	}
	return sec.store
}

// metaSecurity implements protocol.SecurityStore over the cluster
// metadata (internal/meta: /strata/acls/, /strata/quotas/).
type metaSecurity struct {
	sec   *security
	store *meta.Store
	cache *meta.Cache

	mu               sync.Mutex
	rev              int64 // revision of the last view applied
	aclRev, quotaRev int64
	applied          bool

	stop context.CancelFunc
	done chan struct{}
}

// follow applies every new view (level-triggered) until ctx ends.
func (ms *metaSecurity) follow(ctx context.Context) {
	defer close(ms.done)
	for {
		ch := ms.cache.Changed()
		ms.refresh(ms.cache.View())
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// refresh hands the view's ACLs and quotas to the authorizer and the quota
// manager when they changed since the last view applied.
func (ms *metaSecurity) refresh(v *meta.View) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.applied && v.Rev < ms.rev {
		return // an older view than one already applied
	}
	if a := ms.sec.authorizer; a != nil && (!ms.applied || v.ACLsRev != ms.aclRev) {
		acls := make([]authz.ACL, 0, len(v.ACLs))
		for _, acl := range v.ACLs {
			acls = append(acls, acl)
		}
		a.SetACLs(acls)
	}
	if !ms.applied || v.QuotasRev != ms.quotaRev {
		qs := make(map[quota.Entity]quota.Values, len(v.Quotas))
		for _, q := range v.Quotas {
			e, err := entityFromMeta(q.Entity)
			if err != nil {
				continue // a key written by no Strata: ignored rather than fatal
			}
			qs[e] = q.Values
		}
		ms.sec.quotas.SetQuotas(qs)
	}
	ms.rev, ms.aclRev, ms.quotaRev, ms.applied = v.Rev, v.ACLsRev, v.QuotasRev, true
}

func entityFromMeta(parts []meta.QuotaEntityPart) (quota.Entity, error) {
	ps := make([]quota.EntityPart, len(parts))
	for i, p := range parts {
		ps[i] = quota.EntityPart{Type: p.Type, Name: p.Name}
	}
	return quota.ParseEntity(ps)
}

func entityToMeta(e quota.Entity) []meta.QuotaEntityPart {
	var out []meta.QuotaEntityPart
	for _, p := range e.Parts() {
		out = append(out, meta.QuotaEntityPart{Type: p.Type, Name: p.Name})
	}
	return out
}

// storeErr maps a metadata store failure to Kafka's answer: the store
// unreachable (no quorum) is the retriable REQUEST_TIMED_OUT.
func storeErr(err error) error {
	var re *meta.RetriableError
	if errors.As(err, &re) {
		return fmt.Errorf("%v: %w", err, kerr.RequestTimedOut)
	}
	return fmt.Errorf("%v: %w", err, kerr.UnknownServerError)
}

// settle waits until this node's cache holds revision rev and applies it,
// so a client that changed ACLs or quotas sees them on its next request.
func (ms *metaSecurity) settle(ctx context.Context, rev int64) error {
	if rev == 0 {
		return nil
	}
	v, err := ms.cache.WaitRev(ctx, rev)
	if err != nil {
		return storeErr(err)
	}
	ms.refresh(v)
	return nil
}

// CreateACLs implements protocol.SecurityStore.
func (ms *metaSecurity) CreateACLs(ctx context.Context, acls []authz.ACL) error {
	rev, err := ms.store.PutACLs(ctx, acls)
	if err != nil {
		return storeErr(err)
	}
	return ms.settle(ctx, rev)
}

// DeleteMatchingACLs implements protocol.SecurityStore: the filters are
// matched on a view synced with the store (not this node's possibly
// lagging one) and the matches deleted in a transaction that compares the
// ACLs are unchanged since that view (meta.Store.DeleteACLsAt); a
// concurrent change makes it match again. Matching nothing on the synced
// view is an answer as of the store's revision when the request came.
func (ms *metaSecurity) DeleteMatchingACLs(ctx context.Context, filters []authz.Filter) ([][]authz.ACL, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		v, err := ms.cache.Sync(ctx)
		if err != nil {
			return nil, storeErr(err)
		}
		all := make([]authz.ACL, 0, len(v.ACLs))
		for _, a := range v.ACLs {
			all = append(all, a)
		}
		idx := authz.New(authz.Config{}) // matches in the authorizer's order
		idx.SetACLs(all)
		matches := make([][]authz.ACL, len(filters))
		var doomed []authz.ACL
		for i, f := range filters {
			matches[i] = idx.ACLs(f)
			doomed = append(doomed, matches[i]...)
		}
		if len(doomed) == 0 {
			return matches, nil
		}
		rev, err := ms.store.DeleteACLsAt(ctx, doomed, v.Rev)
		if errors.Is(err, meta.ErrConflict) {
			continue // the ACLs changed since the view: match again
		}
		if err != nil {
			return nil, storeErr(err)
		}
		return matches, ms.settle(ctx, rev)
	}
}

// AlterQuotas implements protocol.SecurityStore: the alterations apply to
// the quotas as last read, compared on their revisions; a concurrent
// change makes it read again and retry.
func (ms *metaSecurity) AlterQuotas(ctx context.Context, alts []protocol.QuotaAlteration) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		v := ms.cache.View()
		changes := make([]meta.QuotaChange, 0, len(alts))
		for _, a := range alts {
			parts := entityToMeta(a.Entity)
			cur := v.Quotas[ms.store.Keys().Quota(parts)]
			vals, err := quota.Apply(cur.Values, a.Ops)
			if err != nil {
				return fmt.Errorf("%v: %w", err, kerr.InvalidRequest)
			}
			changes = append(changes, meta.QuotaChange{Entity: parts, Values: vals, Expect: cur.ModRevision})
		}
		rev, err := ms.store.AlterQuotas(ctx, changes)
		if errors.Is(err, meta.ErrConflict) {
			// Someone changed one of these entities: wait for the cache to
			// move past what was read, then decide again.
			if _, err := ms.cache.WaitRev(ctx, v.Rev+1); err != nil {
				return storeErr(err)
			}
			continue
		}
		if err != nil {
			return storeErr(err)
		}
		return ms.settle(ctx, rev)
	}
}
