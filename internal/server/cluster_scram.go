package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/sasl"
)

// SCRAM credentials in the cluster metadata (meta/scram.go): every broker
// authenticates from its watch-fed view, AlterUserScramCredentials on any
// broker writes through the store, and a broker that was down reads what
// changed meanwhile when its cache loads. Kafka keeps them in its metadata
// log the same way (UserScramCredentialRecord).

// scramRemote implements broker.ScramRemote over the cluster metadata.
type scramRemote struct{ c *cluster }

func (r scramRemote) Lookup(mechanism, user string) (sasl.ScramCredential, bool) {
	c, ok := r.c.cache.View().Scram[user].Creds[mechanism]
	if !ok {
		return sasl.ScramCredential{}, false
	}
	return sasl.ScramCredential(c), true
}

func (r scramRemote) Load() (map[string]map[string]sasl.ScramCredential, map[string]int64) {
	v := r.c.cache.View()
	users := make(map[string]map[string]sasl.ScramCredential, len(v.Scram))
	versions := make(map[string]int64, len(v.Scram))
	for u, su := range v.Scram {
		users[u] = make(map[string]sasl.ScramCredential, len(su.Creds))
		for m, c := range su.Creds {
			users[u][m] = sasl.ScramCredential(c)
		}
		versions[u] = su.ModRevision
	}
	return users, versions
}

// Store writes the changed users compared with the versions read, then
// waits until this broker's view holds the change (the next
// authentication here sees it).
func (r scramRemote) Store(changed map[string]map[string]sasl.ScramCredential, versions map[string]int64) error {
	ctx, cancel := context.WithTimeout(r.c.bgCtx, 10*time.Second)
	defer cancel()
	var chs []meta.ScramChange
	for u, mechs := range changed {
		ch := meta.ScramChange{User: u, Expect: versions[u], Creds: map[string]meta.ScramCredential{}}
		for m, c := range mechs {
			ch.Creds[m] = meta.ScramCredential(c)
		}
		chs = append(chs, ch)
	}
	rev, err := r.c.store.PutScram(ctx, chs)
	if errors.Is(err, meta.ErrConflict) {
		return fmt.Errorf("%w: %v", broker.ErrScramConflict, err)
	}
	if err != nil || rev == 0 {
		return err
	}
	_, err = r.c.cache.WaitRev(ctx, rev)
	return err
}

// attachScram moves this broker's SCRAM credentials to the cluster
// metadata: users of the local credential file (the single-node release,
// or a node that bootstrapped users with `strata user` offline) that the
// cluster does not have yet are written there, create-only, so adoption
// never overwrites a credential another broker set. Then every local user
// (adopted, or already in the cluster) leaves the file: a user deleted
// through the cluster later must not come back at the next start.
func (s *Server) attachScram(ctx context.Context, c *cluster) error {
	local := s.broker.LocalScramUsers()
	if len(local) > 0 {
		v := c.cache.View()
		var chs []meta.ScramChange
		for u, mechs := range local {
			if _, ok := v.Scram[u]; ok {
				continue
			}
			ch := meta.ScramChange{User: u, Creds: map[string]meta.ScramCredential{}}
			for m, cr := range mechs {
				ch.Creds[m] = meta.ScramCredential(cr)
			}
			chs = append(chs, ch)
		}
		for _, ch := range chs {
			rev, err := c.store.PutScram(ctx, []meta.ScramChange{ch})
			if err != nil && !errors.Is(err, meta.ErrConflict) {
				return fmt.Errorf("adopt the SCRAM credentials of %q into the cluster metadata: %w", ch.User, err)
			}
			if err == nil {
				if _, err := c.cache.WaitRev(ctx, rev); err != nil {
					return err
				}
			}
		}
		if len(chs) > 0 {
			s.logger.Info("adopted the local SCRAM credentials into the cluster metadata", "users", len(chs))
		}
		names := make([]string, 0, len(local))
		for u := range local {
			names = append(names, u)
		}
		if err := s.broker.ForgetLocalScramUsers(names); err != nil {
			return err
		}
	}
	s.broker.SetScramRemote(scramRemote{c})
	return nil
}
