package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// newTopicCmd is `strata topic create|list|describe|alter|delete`.
func newTopicCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{Use: "topic", Short: "Create, list, describe, alter, grow, trim and delete topics"}
	addClientFlags(cmd, o)
	cmd.AddCommand(newTopicCreateCmd(o), newTopicListCmd(o), newTopicDescribeCmd(o), newTopicAlterCmd(o), newTopicDeleteCmd(o),
		newTopicAddPartitionsCmd(o), newTopicTrimCmd(o))
	return cmd
}

// newTopicCreateCmd is `strata topic create <topic>...`.
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
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
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
					out = append(out, created{Topic: t, ID: topicID(r.ID), Partitions: r.NumPartitions})
					if c, ok := r.Configs["min.insync.replicas"]; ok && r.ReplicationFactor > 0 {
						warnMinISR(cmd.ErrOrStderr(), t, c.MaybeValue(), int(r.ReplicationFactor))
					}
				}
				return o.emit(cmd, out, func(w io.Writer) error {
					for _, c := range out {
						unit := "partitions"
						if c.Partitions == 1 {
							unit = "partition"
						}
						fmt.Fprintf(w, "created topic %q with %d %s\n", c.Topic, c.Partitions, unit)
					}
					return nil
				})
			})
		},
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", -1, "number of partitions (-1 = broker's num.partitions)")
	cmd.Flags().Int16VarP(&rf, "replication-factor", "r", -1, "replication factor (-1 = broker's default.replication.factor)")
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic setting as key=value (repeatable)")
	return cmd
}

// newTopicListCmd is `strata topic list`.
func newTopicListCmd(o *clientOpts) *cobra.Command {
	var internal bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				var tds kadm.TopicDetails
				var err error
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
				return o.emit(cmd, out, func(w io.Writer) error {
					return writeTable(w, out, func(l listed) []any { return []any{l.Topic, l.Partitions} }, "TOPIC", "PARTITIONS")
				})
			})
		},
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics (__consumer_offsets)")
	return cmd
}

// newTopicAlterCmd is `strata topic alter <topic> --set k=v --delete k`.
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
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
				if err != nil {
					return fmt.Errorf("alter topic %q: %w", topic, err)
				}
				for _, r := range resps {
					if err := kafkaErr("alter topic", topic, r.Err, r.ErrMessage); err != nil {
						return err
					}
				}
				if minISR, rf, ok := topicMinISR(ctx, adm, topic); ok {
					warnMinISR(cmd.ErrOrStderr(), topic, minISR, rf)
				}
				return o.emit(cmd, map[string]any{"topic": topic, "altered": len(alters)}, func(w io.Writer) error {
					fmt.Fprintf(w, "altered topic %q\n", topic)
					return nil
				})
			})
		},
	}
	cmd.Flags().StringArrayVar(&set, "set", nil, "setting to set as key=value (repeatable)")
	cmd.Flags().StringArrayVar(&del, "delete", nil, "setting to remove from the topic (repeatable)")
	return cmd
}

// newTopicDeleteCmd is `strata topic delete <topic>...`.
func newTopicDeleteCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "delete <topic>...",
		Short: "Delete topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
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
				return o.emit(cmd, map[string]any{"deleted": args}, func(w io.Writer) error {
					return printEach(w, "deleted topic %q\n", args)
				})
			})
		},
	}
}

// warnMinISR warns on stderr when min.insync.replicas exceeds the
// replication factor: Kafka accepts such a topic, and acks=all produce to
// it then fails with NOT_ENOUGH_REPLICAS.
func warnMinISR(w io.Writer, topic, minISR string, rf int) {
	if n, err := strconv.Atoi(minISR); err == nil && n > rf {
		fmt.Fprintf(w, "warning: topic %q has min.insync.replicas=%d but %d replica(s): acks=all produce will fail with NOT_ENOUGH_REPLICAS until min.insync.replicas is lowered\n", topic, n, rf)
	}
}

// topicMinISR returns a topic's effective min.insync.replicas and its
// replication factor (ok false when they cannot be read).
func topicMinISR(ctx context.Context, adm *kadm.Client, topic string) (string, int, bool) {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return "", 0, false
	}
	td, ok := tds[topic]
	if !ok || td.Err != nil {
		return "", 0, false
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", 0, false
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return "", 0, false
	}
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" {
			return c.MaybeValue(), td.Partitions.NumReplicas(), true
		}
	}
	return "", 0, false
}
