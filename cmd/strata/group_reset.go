package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// resetOpts are the flags of `group reset-offsets`.
type resetOpts struct {
	topics     []string
	allTopics  bool
	partitions []int32
	to         string
	shiftBy    int64
	shiftSet   bool
	byDuration string
	execute    bool
}

// resetRow is one partition of `group reset-offsets`.
type resetRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current"` // -1 = nothing committed
	New       int64  `json:"new"`
}

// newGroupResetCmd is `strata group reset-offsets`, shaped after
// kafka-consumer-groups --reset-offsets: a dry run unless --execute.
func newGroupResetCmd(o *clientOpts) *cobra.Command {
	r := &resetOpts{}
	cmd := &cobra.Command{
		Use:   "reset-offsets <group> (--topic T | --all-topics) (--to P | --shift-by N | --by-duration D) [--execute]",
		Short: "Plan or set (--execute) a stopped group's committed offsets, as kafka-consumer-groups --reset-offsets",
		Long: `Compute new committed offsets for a group and print them; with --execute, commit them.
As Kafka's kafka-consumer-groups, nothing changes without --execute, and a group with
active members is refused (stop its consumers first).

Which partitions: --topic T (repeatable; T:0,2 names partitions, as Kafka's tool), or
--all-topics (every topic the group has committed offsets for); -p limits partitions.
Where to: --to earliest|latest|current|offset:N|<time>|<age> (a time is RFC 3339 or
timestamp:<unix ms>, an age -10m, -2h, -1d), --shift-by N (N records from the committed
offset, negative to go back), or --by-duration D (the first record of the last D: 30m, 1d,
or ISO-8601 as Kafka's tool, PT30M, P1D). Offsets are kept within each partition's log.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r.shiftSet = cmd.Flags().Changed("shift-by")
			return runReset(cmd, o, r, args[0])
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&r.topics, "topic", nil, "topic to reset, T or T:0,1 (repeatable)")
	f.BoolVar(&r.allTopics, "all-topics", false, "every topic the group has committed offsets for")
	f.Int32SliceVarP(&r.partitions, "partition", "p", nil, "only these partitions (default all)")
	f.StringVar(&r.to, "to", "", "earliest, latest, current, offset:<n>, a time or an age")
	f.Int64Var(&r.shiftBy, "shift-by", 0, "move each committed offset by N (negative: back)")
	f.StringVar(&r.byDuration, "by-duration", "", "the first offset of the last D (30m, 1d, PT30M)")
	f.BoolVar(&r.execute, "execute", false, "commit the new offsets (default: print them only)")
	return cmd
}

// runReset validates the flags, computes and prints the new offsets, and
// commits them with --execute.
func runReset(cmd *cobra.Command, o *clientOpts, r *resetOpts, group string) error {
	modes := 0
	for _, set := range []bool{r.to != "", r.shiftSet, r.byDuration != ""} {
		if set {
			modes++
		}
	}
	switch {
	case len(r.topics) == 0 && !r.allTopics:
		return errors.New("reset-offsets needs --topic T or --all-topics")
	case len(r.topics) > 0 && r.allTopics:
		return errors.New("use --topic or --all-topics, not both")
	case modes != 1:
		return errors.New("reset-offsets needs one of --to, --shift-by or --by-duration")
	}
	var target position
	switch {
	case r.to == "current":
	case r.to != "":
		p, err := toSyntax.parse(r.to)
		if err != nil {
			return err
		}
		target = p
	case r.byDuration != "":
		d, ok := parseISODuration(r.byDuration)
		if !ok {
			d, ok = parseAge(r.byDuration)
		}
		if !ok {
			return fmt.Errorf("invalid --by-duration %q: use a duration such as 30m, 2h, 1d or ISO-8601 PT30M, P1D", r.byDuration)
		}
		target = position{kind: atMillis, n: time.Now().Add(-d).UnixMilli()}
	}
	return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return fmt.Errorf("describe group %q: %w", group, err)
		}
		active := ""
		if g, ok := dg[group]; ok && g.State != "Empty" && g.State != "Dead" && g.State != "" {
			active = g.State
		}
		if active != "" && r.execute {
			return fmt.Errorf("group %q has active members (state %s): stop its consumers first", group, active)
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return fmt.Errorf("committed offsets of %q: %w", group, err)
		}
		want, err := r.selection(ctx, adm, group, committed)
		if err != nil {
			return err
		}
		rows, err := r.plan(ctx, adm, group, want, committed, target)
		if err != nil {
			return err
		}
		if r.execute {
			os := kadm.Offsets{}
			for _, row := range rows {
				os.Add(kadm.Offset{Topic: row.Topic, Partition: row.Partition, At: row.New, LeaderEpoch: -1})
			}
			resps, err := adm.CommitOffsets(ctx, group, os)
			if err != nil {
				return fmt.Errorf("reset offsets of %q: %w", group, err)
			}
			if err := resps.Error(); err != nil {
				return kafkaErr("reset offsets of group", group, err, "")
			}
		}
		err = o.emit(cmd, rows, func(w io.Writer) error {
			return writeTable(w, rows, func(row resetRow) []any {
				return []any{row.Topic, row.Partition, dash(row.Current), row.New}
			}, "TOPIC", "PARTITION", "CURRENT", "NEW")
		})
		if err != nil {
			return err
		}
		switch {
		case r.execute:
			fmt.Fprintf(cmd.ErrOrStderr(), "committed the new offsets of group %q\n", group)
		case active != "":
			fmt.Fprintf(cmd.ErrOrStderr(), "dry run: nothing committed; group %q has active members (state %s), so --execute will be refused until its consumers stop\n", group, active)
		default:
			fmt.Fprintln(cmd.ErrOrStderr(), "dry run: nothing committed; add --execute to commit these offsets")
		}
		return nil
	})
}

// selection resolves --topic / --all-topics / -p to partitions by topic.
func (r *resetOpts) selection(ctx context.Context, adm *kadm.Client, group string, committed kadm.OffsetResponses) (map[string]map[int32]bool, error) {
	named := map[string][]int32{}
	var order []string
	if r.allTopics {
		// Kafka's tool takes the partitions the group has committed.
		committed.Each(func(or kadm.OffsetResponse) {
			if or.Err == nil && or.At >= 0 {
				if _, ok := named[or.Topic]; !ok {
					order = append(order, or.Topic)
				}
				named[or.Topic] = append(named[or.Topic], or.Partition)
			}
		})
		if len(named) == 0 {
			return nil, fmt.Errorf("group %q has no committed offsets: name the topics with --topic", group)
		}
	}
	for _, t := range r.topics {
		name, list, _ := strings.Cut(t, ":")
		var ps []int32
		for _, s := range strings.Split(list, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			n, err := strconv.ParseInt(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("invalid --topic %q: use T or T:0,1", t)
			}
			ps = append(ps, int32(n))
		}
		if _, ok := named[name]; !ok {
			order = append(order, name)
		}
		named[name] = append(named[name], ps...)
	}
	out := map[string]map[int32]bool{}
	for _, name := range order {
		td, err := lookupTopic(ctx, adm, "look up topic", name, false)
		if err != nil {
			return nil, err
		}
		only := append(append([]int32(nil), named[name]...), r.partitions...)
		if out[name], err = selectPartitions(td, only); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// plan computes the new offset of every selected partition, kept within
// [log start, log end] as Kafka's tool does.
func (r *resetOpts) plan(ctx context.Context, adm *kadm.Client, group string, want map[string]map[int32]bool, committed kadm.OffsetResponses, target position) ([]resetRow, error) {
	var rows []resetRow
	for topic, parts := range want {
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("list start offsets of %q: %w", topic, err)
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("list end offsets of %q: %w", topic, err)
		}
		var listed kadm.ListedOffsets
		if r.to != "current" && !r.shiftSet {
			if listed, err = target.list(ctx, adm, topic, parts); err != nil {
				return nil, err
			}
		}
		for p := range parts {
			cur := int64(-1)
			if c, ok := committed.Lookup(topic, p); ok && c.Err == nil {
				cur = c.At
			}
			var next int64
			switch {
			case r.to == "current" || r.shiftSet:
				if cur < 0 {
					return nil, fmt.Errorf("cannot move partition %s-%d of group %q from its committed offset: it has none", topic, p, group)
				}
				next = cur
				if r.shiftSet {
					next = cur + r.shiftBy
				}
			default:
				lo, ok := listed.Lookup(topic, p)
				if !ok || lo.Err != nil {
					return nil, fmt.Errorf("list offsets of %q partition %d: %v", topic, p, lo.Err)
				}
				next = lo.Offset
			}
			s, _ := starts.Lookup(topic, p)
			e, _ := ends.Lookup(topic, p)
			if next < 0 || next > e.Offset {
				next = e.Offset // a time after the last record
			}
			next = max(next, s.Offset)
			rows = append(rows, resetRow{Topic: topic, Partition: p, Current: cur, New: next})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		return rows[i].Partition < rows[j].Partition
	})
	return rows, nil
}

// isoDurationRE is an ISO-8601 duration of days, hours, minutes and
// seconds (Kafka's --by-duration format: PnDTnHnMn.nS).
var isoDurationRE = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// parseISODuration parses PnDTnHnMnS.
func parseISODuration(s string) (time.Duration, bool) {
	m := isoDurationRE.FindStringSubmatch(strings.ToUpper(s))
	if m == nil || s == "P" || strings.HasSuffix(strings.ToUpper(s), "T") {
		return 0, false
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
		if m[i+1] != "" {
			n, _ := strconv.Atoi(m[i+1])
			d += time.Duration(n) * unit
		}
	}
	if m[4] != "" {
		f, _ := strconv.ParseFloat(m[4], 64)
		d += time.Duration(f * float64(time.Second))
	}
	return d, d > 0
}
