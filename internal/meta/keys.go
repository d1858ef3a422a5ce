package meta

import (
	"fmt"
	"strconv"
	"strings"
)

// Keys is the etcd key layout under one prefix (default "/strata"):
//
//	<p>/cluster/id                     Kafka cluster id (written once, create-only)
//	<p>/brokers/<node.id>              Broker registration, attached to the broker's lease
//	<p>/topics/<name>                  Topic (id, partition count, dynamic configs)
//	<p>/partitions/<topic-id>/<n>      PartitionState: one key per partition
//	<p>/configs/brokers/default        cluster-wide dynamic broker configs (JSON map)
//	<p>/configs/brokers/<node.id>      per-broker dynamic broker configs
//	<p>/controller/<lease>             controller election candidates (etcd concurrency.Election)
//	<p>/acls/<binding>                 one ACL binding (security.go)
//	<p>/quotas/<entity>                one client quota entity's quotas (security.go)
//	<p>/deletions/<topic-id>/<node.id> a broker deleted its replicas of a topic being deleted (deletions.go)
//	<p>/producer-ids                   the next producer id not yet allocated (deletions.go)
//	<p>/scram/<user>                   one user's SCRAM credentials (scram.go)
type Keys struct{ Prefix string }

// DefaultKeys is the layout Strata uses.
var DefaultKeys = Keys{Prefix: "/strata"}

func (k Keys) Root() string      { return k.Prefix + "/" }
func (k Keys) ClusterID() string { return k.Prefix + "/cluster/id" }
func (k Keys) Brokers() string   { return k.Prefix + "/brokers/" }
func (k Keys) Broker(id int32) string {
	return k.Brokers() + strconv.Itoa(int(id))
}
func (k Keys) Topics() string                   { return k.Prefix + "/topics/" }
func (k Keys) Topic(name string) string         { return k.Topics() + name }
func (k Keys) Partitions() string               { return k.Prefix + "/partitions/" }
func (k Keys) TopicPartitions(id string) string { return k.Partitions() + id + "/" }
func (k Keys) Partition(tp TopicPartition) string {
	return k.TopicPartitions(tp.TopicID) + strconv.Itoa(int(tp.Partition))
}
func (k Keys) BrokerConfigs() string { return k.Prefix + "/configs/brokers/" }

// BrokerConfig is the key of one broker's dynamic configs, or of the
// cluster default when id is DefaultBrokerScope.
func (k Keys) BrokerConfig(id int32) string {
	if id == DefaultBrokerScope {
		return k.BrokerConfigs() + "default"
	}
	return k.BrokerConfigs() + strconv.Itoa(int(id))
}
func (k Keys) Controller() string { return k.Prefix + "/controller/" }

// keyKind classifies a key for the cache.
type keyKind int

const (
	kindOther keyKind = iota
	kindClusterID
	kindBroker
	kindTopic
	kindPartition
	kindBrokerConfig
	kindController
	kindACL
	kindQuota
	kindDeletion
	kindScram
)

// maxPartitionsPerTopic bounds the partition number of a partition key:
// the view indexes a topic's partitions by number, so a key naming
// partition 2147483647 would otherwise allocate two billion slots. Kafka
// creates at most 10,000 partitions per request (its controller's
// MAX_PARTITIONS_PER_BATCH); no topic Strata creates comes near this.
const maxPartitionsPerTopic = 1 << 20

// parse classifies key and returns its parts: broker or config scope id,
// topic name, or topic id and partition.
func (k Keys) parse(key string) (kind keyKind, id int32, name string, tp TopicPartition, err error) {
	rest, ok := strings.CutPrefix(key, k.Prefix+"/")
	if !ok {
		return kindOther, 0, "", tp, nil
	}
	switch {
	case rest == "cluster/id":
		return kindClusterID, 0, "", tp, nil
	case strings.HasPrefix(rest, "brokers/"):
		n, err := strconv.ParseInt(strings.TrimPrefix(rest, "brokers/"), 10, 32)
		if err != nil {
			return kindOther, 0, "", tp, fmt.Errorf("bad broker key %q", key)
		}
		return kindBroker, int32(n), "", tp, nil
	case strings.HasPrefix(rest, "topics/"):
		return kindTopic, 0, strings.TrimPrefix(rest, "topics/"), tp, nil
	case strings.HasPrefix(rest, "partitions/"):
		idStr, pStr, ok := strings.Cut(strings.TrimPrefix(rest, "partitions/"), "/")
		n, err := strconv.ParseInt(pStr, 10, 32)
		if !ok || err != nil || n < 0 || n >= maxPartitionsPerTopic {
			return kindOther, 0, "", tp, fmt.Errorf("bad partition key %q", key)
		}
		return kindPartition, 0, "", TopicPartition{TopicID: idStr, Partition: int32(n)}, nil
	case strings.HasPrefix(rest, "configs/brokers/"):
		s := strings.TrimPrefix(rest, "configs/brokers/")
		if s == "default" {
			return kindBrokerConfig, DefaultBrokerScope, "", tp, nil
		}
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return kindOther, 0, "", tp, fmt.Errorf("bad broker config key %q", key)
		}
		return kindBrokerConfig, int32(n), "", tp, nil
	case strings.HasPrefix(rest, "controller/"):
		return kindController, 0, "", tp, nil
	case strings.HasPrefix(rest, "acls/"):
		return kindACL, 0, "", tp, nil
	case strings.HasPrefix(rest, "quotas/"):
		return kindQuota, 0, "", tp, nil
	case strings.HasPrefix(rest, "scram/"):
		u, err := parseScramUser(strings.TrimPrefix(rest, "scram/"))
		if err != nil {
			return kindOther, 0, "", tp, err
		}
		return kindScram, 0, u, tp, nil
	case strings.HasPrefix(rest, "deletions/"):
		id, node, err := parseDeletion(strings.TrimPrefix(rest, "deletions/"))
		if err != nil {
			return kindOther, 0, "", tp, err
		}
		return kindDeletion, node, "", TopicPartition{TopicID: id}, nil
	}
	return kindOther, 0, "", tp, nil
}
