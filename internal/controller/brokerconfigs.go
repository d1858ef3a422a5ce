package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/strata-io/strata/internal/meta"
)

// AlterBrokerConfigs replaces the dynamic broker configs of one broker
// (scope: its node id) or of the cluster default (meta.DefaultBrokerScope)
// with edit's result on the configs stored now (Kafka's BROKER config
// resource; docs/cluster.md "Dynamic broker configs"). The write is a
// compare-and-set on the key's revision (create-only when absent; a
// concurrent change makes it read and edit again); an empty result deletes
// the key. edit validates; validateOnly stops after it.
func (a *Admin) AlterBrokerConfigs(ctx context.Context, scope int32, edit func(cur map[string]string) (map[string]string, error), validateOnly bool) error {
	st := a.Store
	key := st.Keys().BrokerConfig(scope)
	for {
		resp, err := st.Client().Get(ctx, key)
		if err != nil {
			return meta.Retriable(err)
		}
		cur := map[string]string{}
		var modRev int64
		if len(resp.Kvs) > 0 {
			modRev = resp.Kvs[0].ModRevision
			if err := json.Unmarshal(resp.Kvs[0].Value, &cur); err != nil {
				return fmt.Errorf("broker configs %s: %w", key, err)
			}
		}
		next, err := edit(maps.Clone(cur))
		if err != nil || validateOnly {
			return err
		}
		if maps.Equal(next, cur) {
			return nil
		}
		var c meta.Change
		if len(next) == 0 {
			c = meta.Change{Key: key, Delete: true, Expect: modRev}
		} else if c, err = meta.PutJSON(key, next, modRev); err != nil {
			return err
		}
		rev, err := st.Txn(ctx, []meta.Change{c})
		if err == meta.ErrConflict {
			continue
		}
		if err != nil {
			return err
		}
		_, err = a.Cache.WaitRev(ctx, rev)
		return err
	}
}
