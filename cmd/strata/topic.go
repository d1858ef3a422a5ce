package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { commands = append(commands, newTopicCmd) }

// newTopicCmd is `strata topic create|list|describe|alter|delete`.
func newTopicCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{Use: "topic", Short: "Create, list, describe, alter and delete topics"}
	addClientFlags(cmd, o)
	cmd.AddCommand(newTopicCreateCmd(o), newTopicListCmd(o), newTopicDescribeCmd(o), newTopicAlterCmd(o), newTopicDeleteCmd(o))
	return cmd
}

func newTopicCreateCmd(o *clientOpts) *cobra.Command {
	var partitions int32
	var rf int16
	var configs []string
	cmd := &cobra.Command{
		Use:   "create <topic>...",
		Short: "Create topics (--config k=v sets topic settings, e.g. cleanup.policy=compact)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kv, err := parseKV(configs, "--config")
			if err != nil {
				return err
			}
			cfg := map[string]*string{}
			for k, v := range kv {
				cfg[k] = &v
			}
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			adm, err := o.admin(ctx)
			if err != nil {
				return err
			}
			defer adm.Close()
			resps, err := adm.CreateTopics(ctx, partitions, rf, cfg, args...)
			if err != nil {
				return fmt.Errorf("create topics: %w", err)
			}
			type created struct {
				Topic      string `json:"topic"`
				ID         string `json:"id"`
				Partitions int32  `json:"partitions"`
			}
			var out []created
			for _, t := range args {
				r := resps[t]
				if err := kafkaErr("create topic", t, r.Err, r.ErrMessage); err != nil {
					return err
				}
				out = append(out, created{Topic: t, ID: r.ID.String(), Partitions: r.NumPartitions})
			}
			if o.output == "json" {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			for _, c := range out {
				unit := "partitions"
				if c.Partitions == 1 {
					unit = "partition"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "created topic %q with %d %s\n", c.Topic, c.Partitions, unit)
			}
			return nil
		},
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", -1, "number of partitions (-1 = broker's num.partitions)")
	cmd.Flags().Int16VarP(&rf, "replication-factor", "r", -1, "replication factor (-1 = broker's default.replication.factor)")
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic setting as key=value (repeatable)")
	return cmd
}

func newTopicListCmd(o *clientOpts) *cobra.Command {
	var internal bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			adm, err := o.admin(ctx)
			if err != nil {
				return err
			}
			defer adm.Close()
			var tds kadm.TopicDetails
			if internal {
				tds, err = adm.ListTopicsWithInternal(ctx)
			} else {
				tds, err = adm.ListTopics(ctx)
			}
			if err != nil {
				return fmt.Errorf("list topics: %w", err)
			}
			type listed struct {
				Topic      string `json:"topic"`
				Partitions int    `json:"partitions"`
				Internal   bool   `json:"internal"`
			}
			out := []listed{}
			for _, td := range tds.Sorted() {
				out = append(out, listed{Topic: td.Topic, Partitions: len(td.Partitions), Internal: td.IsInternal})
			}
			if o.output == "json" {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			t := newTable(cmd.OutOrStdout(), "TOPIC", "PARTITIONS")
			for _, l := range out {
				t.row(l.Topic, l.Partitions)
			}
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics (__consumer_offsets)")
	return cmd
}

// topicDescription is the JSON shape of `topic describe`.
type topicDescription struct {
	Topic      string            `json:"topic"`
	ID         string            `json:"id"`
	Internal   bool              `json:"internal"`
	Configs    []configEntry     `json:"configs"`
	Partitions []partitionDetail `json:"partitions"`
}

type configEntry struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

type partitionDetail struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	StartOffset int64   `json:"start_offset"`
	EndOffset   int64   `json:"end_offset"`
	SizeBytes   int64   `json:"size_bytes"` // -1 when the broker did not report it
}

func newTopicDescribeCmd(o *clientOpts) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "describe <topic>",
		Short: "Show a topic's settings, partitions, offsets and sizes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			adm, err := o.admin(ctx)
			if err != nil {
				return err
			}
			defer adm.Close()
			tds, err := adm.ListTopicsWithInternal(ctx, topic)
			if err != nil {
				return fmt.Errorf("describe topic %q: %w", topic, err)
			}
			td, ok := tds[topic]
			if !ok {
				return fmt.Errorf("unknown topic %q", topic)
			}
			if err := kafkaErr("describe topic", topic, td.Err, ""); err != nil {
				return err
			}
			d := topicDescription{Topic: topic, ID: td.ID.String(), Internal: td.IsInternal, Configs: []configEntry{}}
			rcs, err := adm.DescribeTopicConfigs(ctx, topic)
			if err != nil {
				return fmt.Errorf("describe configs of %q: %w", topic, err)
			}
			for _, rc := range rcs {
				if err := kafkaErr("describe configs of", topic, rc.Err, rc.ErrMessage); err != nil {
					return err
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
				return fmt.Errorf("list start offsets of %q: %w", topic, err)
			}
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err != nil {
				return fmt.Errorf("list end offsets of %q: %w", topic, err)
			}
			sizes := map[int32]int64{}
			// Name every partition: a topic with an empty partition list
			// matches nothing in DescribeLogDirs.
			set := kadm.TopicsSet{}
			for p := range td.Partitions {
				set.Add(topic, p)
			}
			if dirs, err := adm.DescribeAllLogDirs(ctx, set); err == nil {
				dirs.Each(func(ld kadm.DescribedLogDir) {
					for p, dp := range ld.Topics[topic] {
						sizes[p] += dp.Size
					}
				})
			}
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
			if o.output == "json" {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Topic: %s  ID: %s  Partitions: %d\n", d.Topic, d.ID, len(d.Partitions))
			if all {
				fmt.Fprintln(w, "\nConfigs:")
			} else {
				fmt.Fprintln(w, "\nConfigs (set on the topic; --all for every setting):")
			}
			if len(d.Configs) == 0 {
				fmt.Fprintln(w, "  (none)")
			} else {
				t := newTable(w, "  NAME", "VALUE", "SOURCE")
				for _, c := range d.Configs {
					t.row("  "+c.Name, c.Value, c.Source)
				}
				if err := t.flush(); err != nil {
					return err
				}
			}
			fmt.Fprintln(w)
			t := newTable(w, "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "START", "END", "SIZE")
			for _, p := range d.Partitions {
				size := "-"
				if p.SizeBytes >= 0 {
					size = fmt.Sprint(p.SizeBytes)
				}
				t.row(p.Partition, p.Leader, p.LeaderEpoch, ints(p.Replicas), ints(p.ISR), p.StartOffset, p.EndOffset, size)
			}
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "show every setting with its source, not only those set on the topic")
	return cmd
}

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

func newTopicAlterCmd(o *clientOpts) *cobra.Command {
	var set, del []string
	cmd := &cobra.Command{
		Use:   "alter <topic>",
		Short: "Change topic settings (--set k=v, --delete k reverts to the default)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			kv, err := parseKV(set, "--set")
			if err != nil {
				return err
			}
			if len(kv) == 0 && len(del) == 0 {
				return fmt.Errorf("nothing to alter: use --set key=value or --delete key")
			}
			var alters []kadm.AlterConfig
			for k, v := range kv {
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
			}
			for _, k := range del {
				alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			}
			sort.Slice(alters, func(i, j int) bool { return alters[i].Name < alters[j].Name })
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			adm, err := o.admin(ctx)
			if err != nil {
				return err
			}
			defer adm.Close()
			resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
			if err != nil {
				return fmt.Errorf("alter topic %q: %w", topic, err)
			}
			for _, r := range resps {
				if err := kafkaErr("alter topic", topic, r.Err, r.ErrMessage); err != nil {
					return err
				}
			}
			if o.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"topic": topic, "altered": len(alters)})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "altered topic %q\n", topic)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&set, "set", nil, "setting to set as key=value (repeatable)")
	cmd.Flags().StringArrayVar(&del, "delete", nil, "setting to remove from the topic (repeatable)")
	return cmd
}

func newTopicDeleteCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "delete <topic>...",
		Short: "Delete topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			adm, err := o.admin(ctx)
			if err != nil {
				return err
			}
			defer adm.Close()
			resps, err := adm.DeleteTopics(ctx, args...)
			if err != nil {
				return fmt.Errorf("delete topics: %w", err)
			}
			for _, t := range args {
				r, ok := resps[t]
				if !ok {
					return fmt.Errorf("delete topic %q: %w", t, kerr.UnknownServerError)
				}
				if err := kafkaErr("delete topic", t, r.Err, r.ErrMessage); err != nil {
					return err
				}
			}
			if o.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"deleted": args})
			}
			for _, t := range args {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %q\n", t)
			}
			return nil
		},
	}
}
