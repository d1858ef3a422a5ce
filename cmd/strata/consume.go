package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strconv"
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
	keys       []string
	timeFormat string
}

// newConsumeCmd is `strata consume <topic>...`.
func newConsumeCmd() *cobra.Command {
	o := &clientOpts{}
	c := &consumeOpts{}
	cmd := &cobra.Command{
		Use:   "consume <topic|^regex>...",
		Short: "Print records of topics (kcat-style -f format, -e exit at end, -c count)",
		Long: `Print records of one or more topics; a topic starting with ^ is a regular expression
matched against the topic names (as kcat's), e.g. '^orders-.*'.

--from is beginning, end, an offset (42 or offset:42), -N (the last N records of each
partition), a time (2026-12-01T10:00:00Z, timestamp:<unix ms>) or an age (-10m, -2h, -1d).
-f is a kcat-style format: %t topic, %p partition, %o offset, %k key, %s value,
%K key length, %S value length, %T timestamp (unix ms; --time-format rfc3339 or local for
a readable time), %h headers (k=v,...), %%, and \n \t \r \\ escapes.
-o json prints one JSON object per record; a key, value or header value that is not
UTF-8 is printed in base64, marked by "key_encoding": "base64" (value_encoding,
header_encodings).
While following a topic, losing and regaining the broker is reported on stderr.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsume(cmd, o, c, args)
		},
	}
	addClientFlags(cmd, o)
	f := cmd.Flags()
	f.StringVar(&c.from, "from", "beginning", "start position: beginning, end, <offset>, -<N>, <RFC 3339 time>, -<age> (see above)")
	f.IntVarP(&c.count, "count", "c", 0, "exit after this many records (0 = no limit)")
	f.BoolVarP(&c.exitAtEnd, "exit", "e", false, "exit when every partition reaches its end offset as of start")
	f.StringVarP(&c.format, "format", "f", "", `output format (default "%s\n", or "%k<delim>%s\n" with -K)`)
	f.StringVarP(&c.keyDelim, "key-delimiter", "K", "", "print key<delim>value when no -f is given")
	f.StringVarP(&c.group, "group", "g", "", "consume as this consumer group and commit what is printed")
	f.Int32SliceVarP(&c.partitions, "partition", "p", nil, "only these partitions (not with --group)")
	f.StringArrayVarP(&c.keys, "key", "k", nil, "print only records with this key (repeatable)")
	f.StringVar(&c.timeFormat, "time-format", "ms", "how %T prints timestamps: ms (unix milliseconds, as kcat), rfc3339 (UTC) or local")
	return cmd
}

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// runConsume resolves the topics (a clear error for a missing one, and
// the end offsets for -e), then prints records until -c, -e or a signal.
func runConsume(cmd *cobra.Command, o *clientOpts, c *consumeOpts, args []string) error {
	if o.output != "table" && o.output != "json" && looksLikeOffset(o.output) {
		return fmt.Errorf("invalid output format %q: -o is the output format here (table or json); to start at %s use --from %s (kcat's -o is --from)",
			o.output, o.output, kcatOffset(o.output))
	}
	pos, err := fromSyntax.parse(c.from)
	if err != nil {
		return err
	}
	if c.group != "" && len(c.partitions) > 0 {
		return errors.New("--partition cannot be used with --group")
	}
	if c.timeFormat != "ms" && c.timeFormat != "rfc3339" && c.timeFormat != "local" {
		return fmt.Errorf("invalid --time-format %q: use ms, rfc3339 or local", c.timeFormat)
	}
	if err := checkOutput(o.output); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var topics []string
	parts := map[string]map[int32]bool{}
	remaining := map[tp]int64{} // partition -> end offset still to reach (for -e)
	err = o.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		if topics, err = resolveTopics(ctx, adm, args); err != nil {
			return err
		}
		for _, topic := range topics {
			td, err := lookupTopic(ctx, adm, "consume", topic, true)
			if err != nil {
				return err
			}
			if parts[topic], err = selectPartitions(td, c.partitions); err != nil {
				return err
			}
			if c.exitAtEnd {
				ends, err := endTargets(ctx, adm, topic, parts[topic], pos, c.group)
				if err != nil {
					return err
				}
				for p, end := range ends {
					remaining[tp{topic, p}] = end
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}

	hooks := &connWatch{w: cmd.ErrOrStderr()}
	cl, err := o.connect(ctx, append(c.clientOpts(topics, parts, pos.kgoOffset()), kgo.WithHooks(hooks))...)
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
	return c.print(ctx, cl, w, strings.Join(topics, ","), o.output == "json", remaining)
}

// resolveTopics expands ^regex arguments against the topic names (internal
// topics only when a pattern names them explicitly, e.g. ^__consumer);
// plain names are kept as given. Duplicates are dropped, order kept.
func resolveTopics(ctx context.Context, adm *kadm.Client, args []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	var all kadm.TopicDetails
	for _, a := range args {
		if !strings.HasPrefix(a, "^") {
			add(a)
			continue
		}
		re, err := regexp.Compile(a)
		if err != nil {
			return nil, fmt.Errorf("invalid topic pattern %q: %v", a, err)
		}
		if all == nil {
			if all, err = adm.ListTopicsWithInternal(ctx); err != nil {
				return nil, fmt.Errorf("list topics: %w", err)
			}
		}
		var matched []string
		for _, td := range all.Sorted() {
			if re.MatchString(td.Topic) && (!td.IsInternal || strings.HasPrefix(a, "^__")) {
				matched = append(matched, td.Topic)
			}
		}
		if len(matched) == 0 {
			return nil, fmt.Errorf("no topic matches %q", a)
		}
		for _, t := range matched {
			add(t)
		}
	}
	return out, nil
}

// looksLikeOffset reports whether an -o value is a kcat offset (beginning,
// end, stored, 42, -10, s@..., e@..., @...) rather than an output format.
func looksLikeOffset(v string) bool {
	switch v {
	case "beginning", "end", "stored", "earliest", "latest":
		return true
	}
	if strings.HasPrefix(v, "s@") || strings.HasPrefix(v, "e@") || strings.HasPrefix(v, "@") {
		return true
	}
	_, err := strconv.ParseInt(v, 10, 64)
	return err == nil
}

// kcatOffset translates a kcat -o value to --from.
func kcatOffset(v string) string {
	switch {
	case v == "stored":
		return "beginning --group <group> (a group resumes from its committed offsets)"
	case strings.HasPrefix(v, "s@"):
		return "timestamp:" + v[2:]
	case strings.HasPrefix(v, "@"):
		return "timestamp:" + v[1:]
	case strings.HasPrefix(v, "e@"):
		return "timestamp:<ms> with -c/-e"
	}
	return v
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
func (c *consumeOpts) clientOpts(topics []string, parts map[string]map[int32]bool, from kgo.Offset) []kgo.Opt {
	// Control records (transaction markers) are not printed, but their
	// offsets tell -e that a partition whose last offset is a marker is done.
	opts := []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}
	if c.group != "" {
		return append(opts, kgo.ConsumerGroup(c.group), kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(from), kgo.AutoCommitMarks())
	}
	m := map[string]map[int32]kgo.Offset{}
	for topic, ps := range parts {
		m[topic] = map[int32]kgo.Offset{}
		for p := range ps {
			m[topic][p] = from
		}
	}
	return append(opts, kgo.ConsumePartitions(m))
}

// wanted reports whether a record passes the --key filter.
func (c *consumeOpts) wanted(r *kgo.Record) bool {
	if len(c.keys) == 0 {
		return true
	}
	for _, k := range c.keys {
		if r.Key != nil && bytes.Equal(r.Key, []byte(k)) {
			return true
		}
	}
	return false
}

// print polls cl and writes records to w until -c records are printed,
// every partition in remaining reaches its end (-e), or ctx ends (quietly).
func (c *consumeOpts) print(ctx context.Context, cl *kgo.Client, w *bufio.Writer, topics string, asJSON bool, remaining map[tp]int64) error {
	pr := recordPrinter{format: c.recordFormat(), json: asJSON, time: c.timeFormat}
	printed := 0
	done := func() bool {
		return (c.count > 0 && printed >= c.count) || (c.exitAtEnd && len(remaining) == 0)
	}
	reached := func(r *kgo.Record) {
		k := tp{r.Topic, r.Partition}
		if end, ok := remaining[k]; ok && r.Offset+1 >= end {
			delete(remaining, k)
		}
	}
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil // interrupted: exit quietly
		}
		var ferr error
		var ftopic string
		fetches.EachError(func(t string, _ int32, err error) {
			if ferr == nil {
				ferr, ftopic = err, t
			}
		})
		if ferr != nil {
			if ftopic == "" {
				ftopic = topics
			}
			return kafkaErr("consume", ftopic, ferr, "")
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if done() {
				return
			}
			if r.Attrs.IsControl() || !c.wanted(r) {
				reached(r)
				return
			}
			if err := pr.print(w, r); err != nil && ferr == nil {
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
	ids := make([]int32, 0, len(parts))
	for p := range parts {
		ids = append(ids, p)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, p := range ids {
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
