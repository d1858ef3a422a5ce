package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// newGroupResetCmd is `strata group reset-offsets <group> --topic T --to P`.
func newGroupResetCmd(o *clientOpts) *cobra.Command {
	var topic, to string
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "reset-offsets <group> --topic T --to earliest|latest|offset:N|timestamp:MS",
		Short: "Set a stopped group's committed offsets",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			if topic == "" || to == "" {
				return errors.New("reset-offsets needs --topic and --to")
			}
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				out, err := resetOffsets(ctx, adm, group, topic, to, partitions)
				if err != nil {
					return err
				}
				return o.emit(cmd, out, func(w io.Writer) error {
					return writeTable(w, out, func(off groupOffset) []any {
						return []any{off.Topic, off.Partition, off.Committed}
					}, "TOPIC", "PARTITION", "NEW-OFFSET")
				})
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "topic whose offsets to reset")
	cmd.Flags().StringVar(&to, "to", "", "earliest, latest, offset:<n> (or <n>) or timestamp:<ms>")
	cmd.Flags().Int32SliceVarP(&partitions, "partition", "p", nil, "only these partitions (default all)")
	return cmd
}

// resetOffsets commits the --to position of each selected partition of
// topic for a group without active members, and returns the new offsets
// by partition.
func resetOffsets(ctx context.Context, adm *kadm.Client, group, topic, to string, only []int32) ([]groupOffset, error) {
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describe group %q: %w", group, err)
	}
	if g, ok := dg[group]; ok && g.State != "Empty" && g.State != "Dead" {
		return nil, fmt.Errorf("group %q has active members (state %s): stop its consumers first", group, g.State)
	}
	targets, err := resetTargets(ctx, adm, topic, to, only)
	if err != nil {
		return nil, err
	}
	os := kadm.Offsets{}
	for p, at := range targets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	resps, err := adm.CommitOffsets(ctx, group, os)
	if err != nil {
		return nil, fmt.Errorf("reset offsets of %q: %w", group, err)
	}
	if err := resps.Error(); err != nil {
		return nil, kafkaErr("reset offsets of group", group, err, "")
	}
	out := []groupOffset{}
	for p, at := range targets {
		out = append(out, groupOffset{Topic: topic, Partition: p, Committed: at, Lag: -1})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out, nil
}

// resetTargets resolves --to per partition of topic.
func resetTargets(ctx context.Context, adm *kadm.Client, topic, to string, only []int32) (map[int32]int64, error) {
	td, err := lookupTopic(ctx, adm, "look up topic", topic, false)
	if err != nil {
		return nil, err
	}
	parts, err := selectPartitions(td, only)
	if err != nil {
		return nil, err
	}
	pos, err := toSyntax.parse(to)
	if err != nil {
		return nil, err
	}
	listed, err := pos.list(ctx, adm, topic, parts)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p := range parts {
		lo, ok := listed.Lookup(topic, p)
		if !ok || lo.Err != nil {
			return nil, fmt.Errorf("list offsets of %q partition %d: %v", topic, p, lo.Err)
		}
		out[p] = lo.Offset
	}
	return out, nil
}
