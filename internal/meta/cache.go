package meta

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cache is a broker's read-only copy of the metadata, kept current by an
// etcd watch. Requests read View() and never wait on etcd; when the quorum
// is lost the cache keeps the last state it saw (existing leaders go on
// serving) and catches up when the watch resumes.
type Cache struct {
	store  *Store
	logger *slog.Logger
	cur    atomic.Pointer[View]

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every publish

	cancel context.CancelFunc
	done   chan struct{}
}

// StartCache loads the metadata and starts watching it. Close stops it.
func StartCache(ctx context.Context, store *Store, logger *slog.Logger) (*Cache, error) {
	if logger == nil {
		logger = slog.Default()
	}
	v, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	c := &Cache{store: store, logger: logger, changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	c.cur.Store(v)
	go c.run(wctx)
	return c, nil
}

// View returns the current snapshot. It is immutable.
func (c *Cache) View() *View { return c.cur.Load() }

// Changed returns a channel closed when a newer view than the current one
// is published. Read View() after it fires (level-triggered).
func (c *Cache) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// WaitRev waits until the view reflects revision rev (for example the
// revision of a transaction this node just committed).
func (c *Cache) WaitRev(ctx context.Context, rev int64) (*View, error) {
	for {
		ch := c.Changed()
		if v := c.View(); v.Rev >= rev {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, Retriable(ctx.Err())
		}
	}
}

func (c *Cache) publish(v *View) {
	c.cur.Store(v)
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Close stops the watch.
func (c *Cache) Close() {
	c.cancel()
	<-c.done
}

func (c *Cache) run(ctx context.Context) {
	defer close(c.done)
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := c.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		c.logger.Warn("metadata watch interrupted; reloading", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
		v, err := c.store.Load(ctx)
		if err != nil {
			continue
		}
		backoff = 50 * time.Millisecond
		c.publish(v)
	}
}

// watch follows changes from the current view's revision until the watch
// fails or ctx ends.
func (c *Cache) watch(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	k := c.store.keys
	wch := c.store.cli.Watch(clientv3.WithRequireLeader(wctx), k.Root(), clientv3.WithPrefix(), clientv3.WithRev(c.View().Rev+1))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return err
		}
		if len(resp.Events) == 0 {
			continue
		}
		evs := make([]event, 0, len(resp.Events))
		for _, e := range resp.Events {
			ev := event{key: string(e.Kv.Key), createRev: e.Kv.CreateRevision, modRev: e.Kv.ModRevision}
			if e.Type == clientv3.EventTypePut {
				ev.value = e.Kv.Value
				if ev.value == nil {
					ev.value = []byte{}
				}
			}
			evs = append(evs, ev)
		}
		// The view's revision is its last event's: a response header may
		// name a later revision whose events are still to come.
		rev := resp.Events[len(resp.Events)-1].Kv.ModRevision
		nv, err := c.View().apply(k, rev, evs)
		if err != nil {
			return err
		}
		c.publish(nv)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("watch channel closed")
}
