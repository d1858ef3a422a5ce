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
	// progress asks the running watch for a progress notification (Sync).
	progress chan struct{}

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
	c := &Cache{store: store, logger: logger, changed: make(chan struct{}), progress: make(chan struct{}, 1),
		cancel: cancel, done: make(chan struct{})}
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

// Sync waits until the view reflects every change the store committed
// before the call, and returns it. A linearizable read gives the store's
// current revision; the watch is asked for a progress notification (etcd's
// RequestProgress, as a watch cache serving consistent reads does), which
// comes once every event up to that revision has been delivered. The view
// is otherwise only as recent as the last event the watch delivered, so a
// decision taken on it right after another node's write (a placement
// right after a broker registered) could miss that write; after Sync it
// cannot, as Kafka's active controller decides on its committed state.
func (c *Cache) Sync(ctx context.Context) (*View, error) {
	resp, err := c.store.cli.Get(ctx, c.store.keys.Root(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, Retriable(err)
	}
	rev := resp.Header.Revision
	for {
		ch := c.Changed()
		if v := c.View(); v.Rev >= rev {
			return v, nil
		}
		select { // at most one request waiting; the watch may be restarting
		case c.progress <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
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
	wctx = clientv3.WithRequireLeader(wctx)
	wch := c.store.cli.Watch(wctx, k.Root(), clientv3.WithPrefix(), clientv3.WithRev(c.View().Rev+1))
	// Progress requests (Sync) go out on this watch's own stream: the
	// request's context must carry the same metadata as the watch's.
	go func() { // owner: watch; ends with wctx
		for {
			select {
			case <-wctx.Done():
				return
			case <-c.progress:
				_ = c.store.cli.RequestProgress(wctx)
			}
		}
	}()
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return err
		}
		if resp.IsProgressNotify() {
			// Every event up to the header's revision has been
			// delivered: the view is current as of it.
			if resp.Header.Revision > c.View().Rev {
				nv, err := c.View().apply(k, resp.Header.Revision, nil)
				if err != nil {
					return err
				}
				c.publish(nv)
			}
			continue
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
