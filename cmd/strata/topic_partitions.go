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

// newTopicAddPartitionsCmd is `strata topic add-partitions <topic>`
// (kafka-topics --alter --partitions N; rpk topic add-partitions --num N),
// through CreatePartitions.
func newTopicAddPartitionsCmd(o *clientOpts) *cobra.Command {
	var to, add int
	cmd := &cobra.Command{
		Use:   "add-partitions <topic> (--to N | --add N)",
		Short: "Add partitions to a topic (--to a total, as kafka-topics --partitions, or --add a count)",
		Long: `Add partitions to a topic: --to N sets the total (as kafka-topics --alter --partitions N),
--add N adds N (as rpk topic add-partitions --num N). Partitions cannot be removed.
Records with a key go to hash(key) % partitions, so after this a key's new records may
land in another partition than its old ones.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if (to > 0) == (add > 0) {
				return errors.New("add-partitions needs either --to N (the new total) or --add N (how many to add)")
			}
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				td, err := lookupTopic(ctx, adm, "add partitions to", topic, false)
				if err != nil {
					return err
				}
				before := len(td.Partitions)
				if to > 0 && to <= before {
					return fmt.Errorf("topic %q already has %d partitions: --to must be larger (partitions cannot be removed)", topic, before)
				}
				var resps kadm.CreatePartitionsResponses
				if to > 0 {
					resps, err = adm.UpdatePartitions(ctx, to, topic)
				} else {
					resps, err = adm.CreatePartitions(ctx, add, topic)
				}
				if err != nil {
					return fmt.Errorf("add partitions to %q: %w", topic, err)
				}
				r := resps[topic]
				if err := kafkaErr("add partitions to", topic, r.Err, r.ErrMessage); err != nil {
					return err
				}
				after := to
				if add > 0 {
					after = before + add
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "note: keyed records now hash over the new partition count; a key's new records may go to another partition than its old ones")
				return o.emit(cmd, map[string]any{"topic": topic, "partitions_before": before, "partitions": after}, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "topic %q: %d -> %d partitions\n", topic, before, after)
					return err
				})
			})
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "the new total number of partitions")
	cmd.Flags().IntVar(&add, "add", 0, "how many partitions to add")
	return cmd
}

// trimmed is one partition of `topic trim`.
type trimmed struct {
	Partition int32 `json:"partition"`
	Before    int64 `json:"start_before"`
	After     int64 `json:"start_after"`
}

// newTopicTrimCmd is `strata topic trim <topic> --before P`: DeleteRecords
// (kafka-delete-records, rpk topic trim-prefix) up to an offset, a time or
// the end.
func newTopicTrimCmd(o *clientOpts) *cobra.Command {
	var before string
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "trim <topic> --before <offset|time|age|end>",
		Short: "Delete a topic's records before an offset, a time or the end (DeleteRecords)",
		Long: `Delete the records of a topic's partitions before a position, moving their log start
offset (DeleteRecords, as kafka-delete-records and rpk topic trim-prefix): an offset
(1000 or offset:1000, the same for every partition), a time (2026-12-01T10:00:00Z,
timestamp:<unix ms>), an age (-7d: records older than 7 days), or end (every record).
Space is freed as whole segments fall below the new start. This cannot be undone.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if before == "" {
				return errors.New("trim needs --before: an offset, a time, an age (-7d) or end")
			}
			pos, err := trimSyntax.parse(before)
			if err != nil {
				return err
			}
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				td, err := lookupTopic(ctx, adm, "trim", topic, false)
				if err != nil {
					return err
				}
				parts, err := selectPartitions(td, partitions)
				if err != nil {
					return err
				}
				targets, err := pos.list(ctx, adm, topic, parts)
				if err != nil {
					return err
				}
				starts, err := adm.ListStartOffsets(ctx, topic)
				if err != nil {
					return fmt.Errorf("list start offsets of %q: %w", topic, err)
				}
				ends, err := adm.ListEndOffsets(ctx, topic)
				if err != nil {
					return fmt.Errorf("list end offsets of %q: %w", topic, err)
				}
				req := kadm.Offsets{}
				out := []trimmed{}
				for p := range parts {
					t, ok := targets.Lookup(topic, p)
					if !ok || t.Err != nil {
						return fmt.Errorf("offset of %q partition %d: %v", topic, p, t.Err)
					}
					at := t.Offset
					if e, ok := ends.Lookup(topic, p); ok && (at < 0 || at > e.Offset) {
						at = e.Offset // a time after the last record, or an offset past the end: everything
					}
					s, _ := starts.Lookup(topic, p)
					if at <= s.Offset {
						out = append(out, trimmed{Partition: p, Before: s.Offset, After: s.Offset})
						continue
					}
					req.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
					out = append(out, trimmed{Partition: p, Before: s.Offset, After: at})
				}
				if len(req) > 0 {
					resps, err := adm.DeleteRecords(ctx, req)
					if err != nil {
						return fmt.Errorf("trim %q: %w", topic, err)
					}
					for i, tr := range out {
						if r, ok := resps.Lookup(topic, tr.Partition); ok {
							if err := kafkaErr("trim", topic, r.Err, ""); err != nil {
								return err
							}
							out[i].After = r.LowWatermark
						}
					}
				}
				sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
				return o.emit(cmd, out, func(w io.Writer) error {
					return writeTable(w, out, func(t trimmed) []any {
						return []any{t.Partition, t.Before, t.After, t.After - t.Before}
					}, "PARTITION", "START-BEFORE", "START-AFTER", "DELETED")
				})
			})
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "delete records before this: an offset, a time, an age (-7d) or end")
	cmd.Flags().Int32SliceVarP(&partitions, "partition", "p", nil, "only these partitions (default all)")
	return cmd
}
