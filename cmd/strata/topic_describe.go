package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicDescription is the JSON shape of `topic describe`.
type topicDescription struct {
	Topic      string            `json:"topic"`
	ID         string            `json:"id"`
	Internal   bool              `json:"internal"`
	Configs    []configEntry     `json:"configs"`
	Partitions []partitionDetail `json:"partitions"`
}

// configEntry is one setting in `topic describe`.
type configEntry struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// partitionDetail is one partition in `topic describe`.
type partitionDetail struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	StartOffset int64   `json:"start_offset"`
	EndOffset   int64   `json:"end_offset"`
	SizeBytes   int64   `json:"size_bytes"` // the leader's replica; -1 when the leader did not report it
}

// newTopicDescribeCmd is `strata topic describe <topic>`.
func newTopicDescribeCmd(o *clientOpts) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "describe <topic>",
		Short: "Show a topic's settings, partitions, offsets and sizes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				d, err := describeTopic(ctx, adm, args[0], all)
				if err != nil {
					return err
				}
				return o.emit(cmd, d, func(w io.Writer) error { return printTopic(w, d, all) })
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "show every setting with its source, not only those set on the topic")
	return cmd
}

// describeTopic gathers a topic's settings (all of them, or those set on
// the topic), partitions, offsets and sizes.
func describeTopic(ctx context.Context, adm *kadm.Client, topic string, all bool) (*topicDescription, error) {
	td, err := lookupTopic(ctx, adm, "describe topic", topic, true)
	if err != nil {
		return nil, err
	}
	d := &topicDescription{Topic: topic, ID: topicID(td.ID), Internal: td.IsInternal, Configs: []configEntry{}}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe configs of %q: %w", topic, err)
	}
	for _, rc := range rcs {
		if err := kafkaErr("describe configs of", topic, rc.Err, rc.ErrMessage); err != nil {
			return nil, err
		}
		for _, c := range rc.Configs {
			if !all && c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				continue
			}
			d.Configs = append(d.Configs, configEntry{Name: c.Key, Value: c.MaybeValue(), Source: configSource(c.Source)})
		}
	}
	sort.Slice(d.Configs, func(i, j int) bool { return d.Configs[i].Name < d.Configs[j].Name })
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %q: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %q: %w", topic, err)
	}
	sizes := partitionSizes(ctx, adm, td)
	for _, p := range td.Partitions.Sorted() {
		pd := partitionDetail{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: p.Replicas, ISR: p.ISR, StartOffset: -1, EndOffset: -1, SizeBytes: -1}
		if lo, ok := starts.Lookup(topic, p.Partition); ok && lo.Err == nil {
			pd.StartOffset = lo.Offset
		}
		if lo, ok := ends.Lookup(topic, p.Partition); ok && lo.Err == nil {
			pd.EndOffset = lo.Offset
		}
		if s, ok := sizes[p.Partition]; ok {
			pd.SizeBytes = s
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d, nil
}

// partitionSizes gives each partition's size as its leader's replica
// holds it (summed over the leader's log dirs), as the console shows it:
// every replica holds the same records, so summing over the replicas
// would count a replicated partition once per replica. A broker that does
// not answer DescribeLogDirs (stopped, say) leaves out only the
// partitions it leads: kadm keeps the answers of the others.
func partitionSizes(ctx context.Context, adm *kadm.Client, td kadm.TopicDetail) map[int32]int64 {
	sizes := map[int32]int64{}
	// Name every partition: a topic with an empty partition list
	// matches nothing in DescribeLogDirs.
	set := kadm.TopicsSet{}
	for p := range td.Partitions {
		set.Add(td.Topic, p)
	}
	dirs, _ := adm.DescribeAllLogDirs(ctx, set)
	dirs.Each(func(ld kadm.DescribedLogDir) {
		if ld.Err != nil {
			return
		}
		for p, dp := range ld.Topics[td.Topic] {
			if pd, ok := td.Partitions[p]; ok && pd.Leader == ld.Broker {
				sizes[p] += dp.Size
			}
		}
	})
	return sizes
}

// printTopic is the table form of `topic describe`.
func printTopic(w io.Writer, d *topicDescription, all bool) error {
	fmt.Fprintf(w, "Topic: %s  ID: %s  Partitions: %d\n", d.Topic, d.ID, len(d.Partitions))
	if all {
		fmt.Fprintln(w, "\nConfigs:")
	} else {
		fmt.Fprintln(w, "\nConfigs (set on the topic; --all for every setting):")
	}
	if len(d.Configs) == 0 {
		fmt.Fprintln(w, "  (none)")
	} else {
		err := writeTable(w, d.Configs, func(c configEntry) []any {
			return []any{"  " + c.Name, c.Value, c.Source}
		}, "  NAME", "VALUE", "SOURCE")
		if err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	return writeTable(w, d.Partitions, func(p partitionDetail) []any {
		size := "-"
		if p.SizeBytes >= 0 {
			size = fmt.Sprint(p.SizeBytes)
		}
		return []any{p.Partition, p.Leader, p.LeaderEpoch, ints(p.Replicas), ints(p.ISR), p.StartOffset, p.EndOffset, size}
	}, "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "START", "END", "SIZE")
}

// ints prints partition ids as [1,2,3].
func ints(v []int32) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// configSource names a DescribeConfigs source the way Kafka's tools do.
func configSource(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "dynamic-broker"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "broker"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	}
	return strings.ToLower(s.String())
}
