package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrConflict means a compare-and-set lost: the key changed since the
// revision the decision was made on. The caller re-reads and decides again.
var ErrConflict = errors.New("metadata changed concurrently (compare-and-set lost)")

// ErrExists means a create found the key present.
var ErrExists = errors.New("already exists")

// Store reads and changes the metadata in etcd. Every change is a
// transaction whose compares name the exact revision of each key it
// writes.
type Store struct {
	cli  *clientv3.Client
	keys Keys
	// maxOps is etcd's max-txn-ops: the most operations one transaction
	// may carry.
	maxOps int
}

// NewStore returns a store over cli with key layout keys. maxOps is the
// etcd member's max-txn-ops (etcdnode.DefaultMaxTxnOps).
func NewStore(cli *clientv3.Client, keys Keys, maxOps int) *Store {
	if maxOps <= 0 {
		maxOps = 128
	}
	return &Store{cli: cli, keys: keys, maxOps: maxOps}
}

// Client is the underlying etcd client.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Keys is the key layout.
func (s *Store) Keys() Keys { return s.keys }

// MaxOps is the largest number of changes one Txn may carry.
func (s *Store) MaxOps() int { return s.maxOps }

// Change is one key write in a transaction, guarded by a compare on the
// key's mod revision: Expect 0 means "must not exist", a positive value
// "must still be at this revision", AnyRevision no compare.
type Change struct {
	Key    string
	Value  []byte // nil with Delete
	Delete bool
	// Prefix with Delete removes every key under Key (no compare).
	Prefix bool
	Expect int64
	// CheckCreate, when not 0, makes this a compare-only change: the
	// transaction applies only if Key's create revision equals it, and
	// nothing is written to Key. A broker registration's create revision is
	// its broker epoch, so this checks that a broker is still the
	// incarnation a decision was made about (KIP-903).
	CheckCreate int64
}

// AnyRevision in Change.Expect writes without a compare (only for keys
// no decision depends on, such as a broker's own registration).
const AnyRevision int64 = -1

// PutJSON builds a Change writing v encoded as JSON.
func PutJSON(key string, v any, expect int64) (Change, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Change{}, fmt.Errorf("encode %s: %w", key, err)
	}
	return Change{Key: key, Value: b, Expect: expect}, nil
}

// PartitionChange writes a partition's new state, comparing the revision
// the state was read at (0 to create it).
func (s *Store) PartitionChange(tp TopicPartition, st PartitionState, expect int64) Change {
	c, _ := PutJSON(s.keys.Partition(tp), st, expect) // PartitionState always encodes
	return c
}

// Txn applies changes atomically: all or none. It returns the revision of
// the transaction, or ErrConflict when a compare failed. len(changes) must
// not exceed MaxOps.
func (s *Store) Txn(ctx context.Context, changes []Change) (int64, error) {
	if len(changes) > s.maxOps {
		return 0, fmt.Errorf("metadata transaction of %d changes exceeds max-txn-ops %d", len(changes), s.maxOps)
	}
	cmps := make([]clientv3.Cmp, 0, len(changes))
	ops := make([]clientv3.Op, 0, len(changes))
	for _, c := range changes {
		if c.CheckCreate != 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(c.Key), "=", c.CheckCreate))
			continue
		}
		switch {
		case c.Prefix:
		case c.Expect == 0:
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(c.Key), "=", 0))
		case c.Expect > 0:
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(c.Key), "=", c.Expect))
		}
		if c.Delete && c.Prefix {
			ops = append(ops, clientv3.OpDelete(c.Key, clientv3.WithPrefix()))
		} else if c.Delete {
			ops = append(ops, clientv3.OpDelete(c.Key))
		} else {
			ops = append(ops, clientv3.OpPut(c.Key, string(c.Value)))
		}
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

// Batches applies independent changes in transactions of at most MaxOps
// each (one partition's change never depends on another's). It returns
// how many changes were applied and the first error; changes after a
// failed batch are not attempted.
func (s *Store) Batches(ctx context.Context, changes []Change) (applied int, rev int64, err error) {
	for len(changes) > 0 {
		n := min(len(changes), s.maxOps)
		r, err := s.Txn(ctx, changes[:n])
		if err != nil {
			return applied, rev, err
		}
		applied += n
		rev = r
		changes = changes[n:]
	}
	return applied, rev, nil
}

// EnsureClusterID writes id as the cluster id unless one is already
// stored, and returns the stored one.
func (s *Store) EnsureClusterID(ctx context.Context, id string) (string, error) {
	k := s.keys.ClusterID()
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, id)).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return "", Retriable(err)
	}
	if resp.Succeeded {
		return id, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return "", ErrConflict
	}
	return string(kvs[0].Value), nil
}

// DuplicateBrokerError is returned by Register when another broker (a
// different log directory) holds the node id's registration.
type DuplicateBrokerError struct {
	ID       int32
	Existing Broker
}

func (e *DuplicateBrokerError) Error() string {
	addr := ""
	if len(e.Existing.Listeners) > 0 {
		l := e.Existing.Listeners[0]
		addr = fmt.Sprintf(" at %s:%d", l.Host, l.Port)
	}
	return fmt.Sprintf("node.id %d is already registered by another running broker%s (log directory id %s): every node needs its own node.id",
		e.ID, addr, e.Existing.DirectoryID)
}

// Register writes b's registration attached to lease and returns its
// epoch (the registration's create revision, new at every start).
//
// A registration left by the same broker (same DirectoryID: a restart
// after a crash, before the old lease expired) is replaced at once. One
// written by a different directory is a live duplicate node.id or one
// whose lease has not yet expired: Register returns a
// *DuplicateBrokerError and the caller may retry until the session
// timeout has passed (as a Kafka broker retries DUPLICATE_BROKER_REGISTRATION).
func (s *Store) Register(ctx context.Context, b Broker, lease clientv3.LeaseID) (int64, error) {
	k := s.keys.Broker(b.ID)
	val, err := json.Marshal(b)
	if err != nil {
		return 0, err
	}
	for {
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, string(val), clientv3.WithLease(lease))).Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return 0, Retriable(err)
		}
		if resp.Succeeded {
			return resp.Header.Revision, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue // expired meanwhile
		}
		var old Broker
		if err := json.Unmarshal(kvs[0].Value, &old); err != nil {
			return 0, fmt.Errorf("broker %d registration: %w", b.ID, err)
		}
		if old.DirectoryID != b.DirectoryID {
			return 0, &DuplicateBrokerError{ID: b.ID, Existing: old}
		}
		// Our own previous incarnation: delete it (if unchanged) and
		// create anew, so the epoch (create revision) changes. etcd
		// allows one operation per key in a transaction, hence two.
		if _, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", kvs[0].ModRevision)).
			Then(clientv3.OpDelete(k)).Commit(); err != nil {
			return 0, Retriable(err)
		}
	}
}

// Unregister deletes b's registration if it is still the one at epoch.
func (s *Store) Unregister(ctx context.Context, id int32, epoch int64) error {
	k := s.keys.Broker(id)
	_, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", epoch)).Then(clientv3.OpDelete(k)).Commit()
	return Retriable(err)
}

// Load reads every key under the prefix into a View.
func (s *Store) Load(ctx context.Context) (*View, error) {
	resp, err := s.cli.Get(ctx, s.keys.Root(), clientv3.WithPrefix())
	if err != nil {
		return nil, Retriable(err)
	}
	evs := make([]event, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		evs = append(evs, event{key: string(kv.Key), value: kv.Value, createRev: kv.CreateRevision, modRev: kv.ModRevision})
	}
	return NewView().apply(s.keys, resp.Header.Revision, evs)
}

// RetriableError wraps an etcd failure that says nothing about the
// metadata (no quorum, timeout, connection lost): the caller answers the
// client with a retriable Kafka error and tries again later.
type RetriableError struct{ Err error }

func (e *RetriableError) Error() string {
	if errors.Is(e.Err, rpctypes.ErrNoSpace) || errors.Is(e.Err, rpctypes.ErrGRPCNoSpace) {
		// etcd's NOSPACE alarm: the backend reached its quota; the
		// controllers compact and defragment it (etcdnode spaceLoop).
		return "metadata store full (its size quota is reached; it is being compacted and defragmented, retry later): " + e.Err.Error()
	}
	return "metadata store unavailable (is a majority of the controllers running?): " + e.Err.Error()
}
func (e *RetriableError) Unwrap() error { return e.Err }

// Retriable wraps a non-nil etcd error as *RetriableError.
func Retriable(err error) error {
	if err == nil {
		return nil
	}
	var re *RetriableError
	if errors.As(err, &re) {
		return err
	}
	return &RetriableError{Err: err}
}
