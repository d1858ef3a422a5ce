package meta

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Topic deletion (docs/cluster.md "Deleting a topic"): DeleteTopics marks
// the topic Deleting; every broker stops serving it, deletes its replicas
// and acknowledges under
//
//	<p>/deletions/<topic-id>/<node.id>     (attached to the broker's lease)
//
// and the active controller removes the topic, its partitions and the
// acknowledgements once every live broker holding a replica has
// acknowledged. DeleteTopics is answered when the topic key is gone: no
// broker serves the topic any more.

// Deletions is the prefix of every deletion acknowledgement.
func (k Keys) Deletions() string { return k.Prefix + "/deletions/" }

// TopicDeletions is the prefix of one topic's acknowledgements.
func (k Keys) TopicDeletions(topicID string) string { return k.Deletions() + topicID + "/" }

// Deletion is the key of broker node's acknowledgement for topicID.
func (k Keys) Deletion(topicID string, node int32) string {
	return k.TopicDeletions(topicID) + strconv.Itoa(int(node))
}

// parseDeletion splits "<topic-id>/<node>".
func parseDeletion(rest string) (string, int32, error) {
	id, n, ok := strings.Cut(rest, "/")
	node, err := strconv.ParseInt(n, 10, 32)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("bad deletion key %q", rest)
	}
	return id, int32(node), nil
}

// Acked reports whether broker node acknowledged the deletion of topicID.
func (v *View) Acked(topicID string, node int32) bool { return v.Deletions[topicID][node] }

// AckDeletion records that this broker deleted its replicas of topicID,
// attached to its session lease (a broker that dies no longer counts).
func (s *Store) AckDeletion(ctx context.Context, topicID string, node int32, lease clientv3.LeaseID) error {
	_, err := s.cli.Put(ctx, s.keys.Deletion(topicID, node), "", clientv3.WithLease(lease))
	return Retriable(err)
}

// ProducerIDs is the key of the next producer id not yet handed out in
// the cluster (Kafka's ProducerIdsRecord: blocks are allocated from it).
func (k Keys) ProducerIDs() string { return k.Prefix + "/producer-ids" }

// AllocateProducerIDs reserves a block of n producer ids, never handed out
// before in the cluster (Kafka's AllocateProducerIds, KIP-730), starting no
// lower than floor. It returns the block's first id.
func (s *Store) AllocateProducerIDs(ctx context.Context, n, floor int64) (int64, error) {
	k := s.keys.ProducerIDs()
	for {
		resp, err := s.cli.Get(ctx, k)
		if err != nil {
			return 0, Retriable(err)
		}
		next, rev := int64(0), int64(0)
		if len(resp.Kvs) > 0 {
			rev = resp.Kvs[0].ModRevision
			if next, err = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64); err != nil {
				return 0, fmt.Errorf("producer id block %q: %w", resp.Kvs[0].Value, err)
			}
		}
		first := max(next, floor)
		cmp := clientv3.Compare(clientv3.ModRevision(k), "=", rev)
		if rev == 0 {
			cmp = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
		}
		tr, err := s.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(k, strconv.FormatInt(first+n, 10))).Commit()
		if err != nil {
			return 0, Retriable(err)
		}
		if tr.Succeeded {
			return first, nil
		}
		if ctx.Err() != nil {
			return 0, Retriable(errors.Join(ErrConflict, ctx.Err()))
		}
	}
}
