package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafka is the console's Kafka client: its connections to this broker
// are in-process pipes into its protocol server; those to another broker
// (a partition's leader, a group's coordinator) go to that broker.
type kafka struct {
	cl  *kgo.Client
	adm *kadm.Client
}

// seedAddr is the console clients' seed: never resolved, always this
// broker in process.
const seedAddr = "in-process:9092"

func newKafka(dial func(ctx context.Context, addr string) (net.Conn, error)) (*kafka, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seedAddr),
		kgo.Dialer(func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) }),
		kgo.ClientID("strata-console"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.RequestRetries(3),
		kgo.RetryTimeout(5*time.Second),
		kgo.MetadataMinAge(time.Second),
	)
	if err != nil {
		return nil, fmt.Errorf("console: kafka client: %w", err)
	}
	return &kafka{cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (k *kafka) close() { k.cl.Close() }

// partitionInfo is one partition as the topic pages show it.
type partitionInfo struct {
	Partition     int32
	Leader        int32
	LeaderEpoch   int32
	Replicas      []int32
	ISR           []int32
	Offline       []int32
	Start, End    int64 // -1 unknown
	Size          int64 // -1 unknown
	UnderReplicat bool
	// UnderMinISR: the ISR is smaller than min.insync.replicas, so the
	// leader refuses acks=all produce (NOT_ENOUGH_REPLICAS).
	UnderMinISR bool
	Err         string
}

// state says in a few words how a partition's replication stands.
func (p partitionInfo) State() string {
	switch {
	case p.Leader < 0:
		return "offline: no leader"
	case p.UnderMinISR:
		return "under min ISR: acks=all refused"
	case p.UnderReplicat:
		return "under-replicated"
	}
	return "in sync"
}

// topicInfo is one topic as the topic list shows it.
type topicInfo struct {
	Name        string
	ID          [16]byte
	Internal    bool
	Partitions  int
	Replication int
	Size        int64 // -1 unknown
	Policy      string
	Retention   string
	Err         string
	// MsgRate is records per second appended lately (-1 unknown).
	MsgRate float64
	// URP and Offline count under-replicated and leaderless partitions,
	// UnderMinISR those whose ISR is below min.insync.replicas.
	URP, Offline, UnderMinISR int
}

// metadata returns the cluster metadata (all topics when none given).
func (k *kafka) metadata(ctx context.Context, topics ...string) (kadm.Metadata, error) {
	m, err := k.adm.Metadata(ctx, topics...)
	if err != nil {
		return m, fmt.Errorf("metadata: %w", err)
	}
	return m, nil
}

// replicaSizes are the bytes on disk of each replica: topic, partition,
// broker.
type replicaSizes map[string]map[int32]map[int32]int64

// of returns a partition's size: its leader's replica (each replica holds
// the same records, so adding them up would count a record once per
// replica; -1 when the leader's is unknown).
func (rs replicaSizes) of(topic string, p, leader int32) int64 {
	if b, ok := rs[topic][p][leader]; ok {
		return b
	}
	return -1
}

// sizes returns the bytes on disk of each replica, from DescribeLogDirs
// sent to every broker (nil set: all partitions), and the described log
// dirs of every broker.
func (k *kafka) sizes(ctx context.Context, set kadm.TopicsSet) (replicaSizes, []kadm.DescribedLogDir, error) {
	all, err := k.adm.DescribeAllLogDirs(ctx, set)
	if err != nil && !partial(err) {
		return nil, nil, fmt.Errorf("describe log dirs: %w", err)
	}
	// A broker that did not answer (stopping, unreachable) leaves its
	// replicas unknown; the others stand.
	out := replicaSizes{}
	var dirs []kadm.DescribedLogDir
	for broker, byDir := range all {
		for _, d := range byDir {
			dirs = append(dirs, d)
			for t, ps := range d.Topics {
				m := out[t]
				if m == nil {
					m = map[int32]map[int32]int64{}
					out[t] = m
				}
				for p, dp := range ps {
					if m[p] == nil {
						m[p] = map[int32]int64{}
					}
					m[p][broker] += dp.Size
				}
			}
		}
	}
	sort.Slice(dirs, func(i, j int) bool {
		if dirs[i].Broker != dirs[j].Broker {
			return dirs[i].Broker < dirs[j].Broker
		}
		return dirs[i].Dir < dirs[j].Dir
	})
	if err != nil {
		return out, dirs, fmt.Errorf("describe log dirs: %w", err)
	}
	return out, dirs, nil
}

// listConfigNames are the configs the topic list shows.
var listConfigNames = []string{"cleanup.policy", "retention.ms", "retention.bytes", "min.insync.replicas"}

// topicConfigs returns, per topic, the values of names (DescribeConfigs
// asking for those names only).
func (k *kafka) topicConfigs(ctx context.Context, topics []string, names []string) (map[string]map[string]string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range topics {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeTopic
		r.ResourceName = t
		r.ConfigNames = names
		req.Resources = append(req.Resources, r)
	}
	out := map[string]map[string]string{}
	if len(topics) == 0 {
		return out, nil
	}
	shards := k.cl.RequestSharded(ctx, req)
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, fmt.Errorf("describe configs: %w", sh.Err)
		}
		resp := sh.Resp.(*kmsg.DescribeConfigsResponse)
		for _, r := range resp.Resources {
			if r.ErrorCode != 0 {
				continue
			}
			m := map[string]string{}
			for _, c := range r.Configs {
				if c.Value != nil {
					m[c.Name] = *c.Value
				}
			}
			out[r.ResourceName] = m
		}
	}
	return out, nil
}

// configEntry is one topic config as the configs table shows it.
type configEntry struct {
	Name      string
	Value     string
	Null      bool
	Source    string
	IsDefault bool
	ReadOnly  bool
	Sensitive bool
	Doc       string
	Type      string
	// Default is the value the config takes without a topic override.
	Default string
}

// describeTopicConfigs returns every config of topic with its source,
// documentation and default (from the synonyms).
func (k *kafka) describeTopicConfigs(ctx context.Context, topic string) ([]configEntry, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	req.IncludeDocumentation = true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeTopic
	r.ResourceName = topic
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, k.cl)
	if err != nil {
		return nil, fmt.Errorf("describe configs of %q: %w", topic, err)
	}
	if len(resp.Resources) != 1 {
		return nil, fmt.Errorf("describe configs of %q: %d resources in the answer", topic, len(resp.Resources))
	}
	res := resp.Resources[0]
	if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
		msg := ""
		if res.ErrorMessage != nil {
			msg = *res.ErrorMessage
		}
		return nil, kafkaError(err, msg)
	}
	var out []configEntry
	for _, c := range res.Configs {
		e := configEntry{
			Name: c.Name, Null: c.Value == nil, Source: sourceName(c.Source),
			IsDefault: c.Source == kmsg.ConfigSourceDefaultConfig || c.Source == kmsg.ConfigSourceStaticBrokerConfig || c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig,
			ReadOnly:  c.ReadOnly, Sensitive: c.IsSensitive, Type: c.ConfigType.String(),
		}
		if c.Value != nil {
			e.Value = *c.Value
		}
		if c.Documentation != nil {
			e.Doc = *c.Documentation
		}
		for _, s := range c.ConfigSynonyms {
			if s.Source != kmsg.ConfigSourceDynamicTopicConfig && s.Value != nil {
				e.Default = *s.Value
				break
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func sourceName(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "dynamic broker"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "dynamic default"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "broker"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	case kmsg.ConfigSourceDynamicBrokerLoggerConfig:
		return "logger"
	}
	return "unknown"
}

// alterTopicConfig sets (value != nil) or reverts to the default (nil) one
// config of topic with IncrementalAlterConfigs: the broker validates it
// exactly as for any client.
func (k *kafka) alterTopicConfig(ctx context.Context, topic, name string, value *string) error {
	op := kadm.SetConfig
	if value == nil {
		op = kadm.DeleteConfig
	}
	resps, err := k.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: name, Value: value}}, topic)
	if err != nil {
		return fmt.Errorf("alter configs of %q: %w", topic, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return kafkaError(r.Err, r.ErrMessage)
		}
	}
	return nil
}

// offsets returns the start and end (high watermark) offsets of topics'
// partitions. When some partitions could not be asked (no leader: an
// offline partition), it returns the others with a kadm.ShardErrors.
func (k *kafka) offsets(ctx context.Context, topics ...string) (start, end kadm.ListedOffsets, err error) {
	start, err1 := k.adm.ListStartOffsets(ctx, topics...)
	end, err2 := k.adm.ListEndOffsets(ctx, topics...)
	for _, err := range []error{err1, err2} {
		var se *kadm.ShardErrors
		if err != nil && !errors.As(err, &se) {
			return nil, nil, fmt.Errorf("list offsets: %w", err)
		}
	}
	if err := errors.Join(err1, err2); err != nil {
		return start, end, fmt.Errorf("list offsets: %w", err)
	}
	return start, end, nil
}

// partial reports whether err (from offsets) left out only some
// partitions: the rest of the answer stands.
func partial(err error) bool {
	var se *kadm.ShardErrors
	return errors.As(err, &se)
}

// kafkaError is a Kafka error code with the broker's message, if any.
func kafkaError(err error, msg string) error {
	if msg == "" {
		return err
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Errorf("%s: %s", ke.Message, msg)
	}
	return fmt.Errorf("%w: %s", err, msg)
}

// groupLag is one partition's committed offset and lag.
type groupLag struct {
	Topic     string
	Partition int32
	Committed int64 // -1 none
	End       int64 // -1 unknown
	Lag       int64 // -1 unknown
	Member    string
	Metadata  string
}

// lags returns the committed offsets of groups with their lag against the
// end offsets (high watermark, as kafka-consumer-groups.sh computes it).
func (k *kafka) lags(ctx context.Context, groups ...string) (map[string][]groupLag, error) {
	out := map[string][]groupLag{}
	if len(groups) == 0 {
		return out, nil
	}
	fetched := k.adm.FetchManyOffsets(ctx, groups...)
	topicSet := map[string]bool{}
	for _, r := range fetched {
		if r.Err != nil {
			continue
		}
		for t := range r.Fetched {
			topicSet[t] = true
		}
	}
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	var ends kadm.ListedOffsets
	if len(topics) > 0 {
		var err error
		if ends, err = k.adm.ListEndOffsets(ctx, topics...); err != nil {
			return nil, fmt.Errorf("list end offsets: %w", err)
		}
	}
	for g, r := range fetched {
		if r.Err != nil {
			if len(groups) == 1 {
				return nil, fmt.Errorf("fetch offsets of group %q: %w", g, r.Err)
			}
			continue // one group's failure (say, deleted meanwhile) leaves it out
		}
		var rows []groupLag
		for t, ps := range r.Fetched {
			for p, o := range ps {
				if o.Err != nil {
					continue
				}
				row := groupLag{Topic: t, Partition: p, Committed: o.At, End: -1, Lag: -1}
				if o.Metadata != "" {
					row.Metadata = o.Metadata
				}
				if e, ok := ends.Lookup(t, p); ok && e.Err == nil {
					row.End = e.Offset
					if o.At >= 0 {
						row.Lag = max(0, e.Offset-o.At)
					}
				}
				rows = append(rows, row)
			}
		}
		sortLags(rows)
		out[g] = rows
	}
	return out, nil
}

func sortLags(rows []groupLag) {
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		return rows[i].Partition < rows[j].Partition
	})
}

// totalLag sums the known lags (-1 when none is known).
func totalLag(rows []groupLag) int64 {
	total, known := int64(0), false
	for _, r := range rows {
		if r.Lag >= 0 {
			total += r.Lag
			known = true
		}
	}
	if !known {
		return -1
	}
	return total
}

// topicOps returns the operations this client's principal may perform on
// each topic it may see (Metadata v8+ with include_topic_authorized_operations,
// KIP-430: a bit per Kafka AclOperation code); nil topics asks for every
// topic. A topic the principal may not describe is absent, as Metadata
// leaves it out. Without an authorizer the broker sets every bit.
func (k *kafka) topicOps(ctx context.Context, topics []string) (map[string]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, k.cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	out := map[string]int32{}
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			out[*t.Topic] = t.AuthorizedOperations
		}
	}
	return out, nil
}

// allows reports whether an authorized-operations bit set grants op.
func allows(ops int32, op kmsg.ACLOperation) bool { return ops&(1<<uint(op)) != 0 }
