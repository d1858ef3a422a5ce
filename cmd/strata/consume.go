package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeOpts are the flags of `strata consume`.
type consumeOpts struct {
	from       string
	count      int
	exitAtEnd  bool
	format     string
	keyDelim   string
	group      string
	partitions []int32
}

// newConsumeCmd is `strata consume <topic>`.
func newConsumeCmd() *cobra.Command {
	o := &clientOpts{}
	c := &consumeOpts{}
	cmd := &cobra.Command{
		Use:   "consume <topic>",
		Short: "Print records of a topic (kcat-style -f format, -e exit at end, -c count)",
		Long: `Print records of a topic.

--from is beginning, end, an offset (42 or offset:42) or timestamp:<unix ms>.
-f is a kcat-style format: %t topic, %p partition, %o offset, %k key, %s value,
%K key length, %S value length, %T timestamp (ms), %h headers (k=v,...), %%,
and \n \t \r \\ escapes. -o json prints one JSON object per record.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsume(cmd, o, c, args[0])
		},
	}
	addClientFlags(cmd, o)
	f := cmd.Flags()
	f.StringVar(&c.from, "from", "beginning", "start position: beginning, end, <offset>, offset:<n>, timestamp:<ms>")
	f.IntVarP(&c.count, "count", "c", 0, "exit after this many records (0 = no limit)")
	f.BoolVarP(&c.exitAtEnd, "exit", "e", false, "exit when every partition reaches its end offset as of start")
	f.StringVarP(&c.format, "format", "f", "", `output format (default "%s\n", or "%k<delim>%s\n" with -K)`)
	f.StringVarP(&c.keyDelim, "key-delimiter", "K", "", "print key<delim>value when no -f is given")
	f.StringVarP(&c.group, "group", "g", "", "consume as this consumer group and commit what is printed")
	f.Int32SliceVarP(&c.partitions, "partition", "p", nil, "only these partitions (not with --group)")
	return cmd
}

// runConsume looks the topic up (a clear error for a missing topic, and
// the end offsets for -e), then prints records until -c, -e or a signal.
func runConsume(cmd *cobra.Command, o *clientOpts, c *consumeOpts, topic string) error {
	pos, err := fromSyntax.parse(c.from)
	if err != nil {
		return err
	}
	if c.group != "" && len(c.partitions) > 0 {
		return errors.New("--partition cannot be used with --group")
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var parts map[int32]bool
	remaining := map[int32]int64{} // partition -> end offset still to reach (for -e)
	err = o.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		td, err := lookupTopic(ctx, adm, "consume", topic, true)
		if err != nil {
			return err
		}
		if parts, err = selectPartitions(td, c.partitions); err != nil {
			return err
		}
		if c.exitAtEnd {
			remaining, err = endTargets(ctx, adm, topic, parts, pos, c.group)
		}
		return err
	})
	if err != nil {
		return err
	}

	cl, err := o.connect(ctx, c.clientOpts(topic, parts, pos.kgoOffset())...)
	if err != nil {
		return err
	}
	defer cl.Close()
	defer func() {
		if c.group != "" {
			ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
			defer cancel()
			_ = cl.CommitMarkedOffsets(ctx)
		}
	}()
	w := bufio.NewWriter(cmd.OutOrStdout())
	defer w.Flush()
	return c.print(ctx, cl, w, topic, o.output == "json", remaining)
}

// recordFormat is -f, or its default: the value, or key<delim>value with -K.
func (c *consumeOpts) recordFormat() string {
	if c.format != "" {
		return c.format
	}
	if c.keyDelim != "" {
		return "%k" + strings.ReplaceAll(c.keyDelim, "%", "%%") + "%s\n"
	}
	return "%s\n"
}

// clientOpts are the consumer options: as group c.group from the reset
// position from, or the partitions parts from position from.
func (c *consumeOpts) clientOpts(topic string, parts map[int32]bool, from kgo.Offset) []kgo.Opt {
	// Control records (transaction markers) are not printed, but their
	// offsets tell -e that a partition whose last offset is a marker is done.
	opts := []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}
	if c.group != "" {
		return append(opts, kgo.ConsumerGroup(c.group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(from), kgo.AutoCommitMarks())
	}
	m := map[int32]kgo.Offset{}
	for p := range parts {
		m[p] = from
	}
	return append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: m}))
}

// print polls cl and writes records to w until -c records are printed,
// every partition in remaining reaches its end (-e), or ctx ends (quietly).
func (c *consumeOpts) print(ctx context.Context, cl *kgo.Client, w *bufio.Writer, topic string, asJSON bool, remaining map[int32]int64) error {
	format := c.recordFormat()
	printed := 0
	done := func() bool {
		return (c.count > 0 && printed >= c.count) || (c.exitAtEnd && len(remaining) == 0)
	}
	reached := func(r *kgo.Record) {
		if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
			delete(remaining, r.Partition)
		}
	}
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil // interrupted: exit quietly
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if ferr == nil {
				ferr = err
			}
		})
		if ferr != nil {
			return kafkaErr("consume", topic, ferr, "")
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if done() {
				return
			}
			if r.Attrs.IsControl() {
				reached(r)
				return
			}
			if err := printRecord(w, r, format, asJSON); err != nil && ferr == nil {
				ferr = err
			}
			printed++
			if c.group != "" {
				cl.MarkCommitRecords(r)
			}
			reached(r)
		})
		if ferr != nil {
			return fmt.Errorf("write output: %w", ferr)
		}
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return nil
}

// endTargets returns, for -e, the end offset each partition must reach,
// leaving out partitions already at their end from the start position
// (or from the group's committed offset).
func endTargets(ctx context.Context, adm *kadm.Client, topic string, parts map[int32]bool, from position, group string) (map[int32]int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %q: %w", topic, err)
	}
	starts := ends
	if from.kind != atEnd {
		if starts, err = from.list(ctx, adm, topic, parts); err != nil {
			return nil, err
		}
	}
	committed := map[int32]int64{}
	if group != "" {
		if ors, err := adm.FetchOffsets(ctx, group); err == nil {
			ors.Each(func(r kadm.OffsetResponse) {
				if r.Topic == topic && r.Err == nil && r.At >= 0 {
					committed[r.Partition] = r.At
				}
			})
		}
	}
	out := map[int32]int64{}
	for p := range parts {
		end, ok := ends.Lookup(topic, p)
		if !ok || end.Err != nil {
			continue
		}
		pos := int64(-1)
		if s, ok := starts.Lookup(topic, p); ok && s.Err == nil {
			pos = s.Offset
		}
		if at, ok := committed[p]; ok {
			pos = at
		}
		if pos < 0 || pos < end.Offset {
			if end.Offset > 0 {
				out[p] = end.Offset
			}
		}
	}
	return out, nil
}
