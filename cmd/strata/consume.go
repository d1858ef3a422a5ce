package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { commands = append(commands, newConsumeCmd) }

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

// startOffset parses --from into a kgo offset.
func startOffset(from string) (kgo.Offset, error) {
	switch {
	case from == "beginning" || from == "earliest":
		return kgo.NewOffset().AtStart(), nil
	case from == "end" || from == "latest":
		return kgo.NewOffset().AtEnd(), nil
	case strings.HasPrefix(from, "timestamp:"):
		ms, err := strconv.ParseInt(strings.TrimPrefix(from, "timestamp:"), 10, 64)
		if err != nil {
			return kgo.Offset{}, fmt.Errorf("invalid --from %q: timestamp must be unix milliseconds", from)
		}
		return kgo.NewOffset().AfterMilli(ms), nil
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(from, "offset:"), 10, 64)
	if err != nil || n < 0 {
		return kgo.Offset{}, fmt.Errorf("invalid --from %q: use beginning, end, <offset>, offset:<n> or timestamp:<ms>", from)
	}
	return kgo.NewOffset().At(n), nil
}

func runConsume(cmd *cobra.Command, o *clientOpts, c *consumeOpts, topic string) error {
	from, err := startOffset(c.from)
	if err != nil {
		return err
	}
	if c.group != "" && len(c.partitions) > 0 {
		return errors.New("--partition cannot be used with --group")
	}
	format := c.format
	if format == "" {
		format = "%s\n"
		if c.keyDelim != "" {
			format = "%k" + strings.ReplaceAll(c.keyDelim, "%", "%%") + "%s\n"
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Look the topic up first: a clear error for a missing topic, and the
	// end offsets for -e.
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	adm, err := o.admin(cctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	tds, err := adm.ListTopicsWithInternal(cctx, topic)
	if err != nil {
		return fmt.Errorf("consume %q: %w", topic, err)
	}
	td, ok := tds[topic]
	if !ok {
		return fmt.Errorf("unknown topic %q", topic)
	}
	if err := kafkaErr("consume", topic, td.Err, ""); err != nil {
		return err
	}
	parts := map[int32]bool{}
	for _, p := range c.partitions {
		if _, ok := td.Partitions[p]; !ok {
			return fmt.Errorf("topic %q has no partition %d", topic, p)
		}
		parts[p] = true
	}
	if len(parts) == 0 {
		for p := range td.Partitions {
			parts[p] = true
		}
	}
	remaining := map[int32]int64{} // partition -> end offset still to reach (for -e)
	if c.exitAtEnd {
		remaining, err = endTargets(cctx, adm, topic, parts, from, c.from, c.group)
		if err != nil {
			return err
		}
	}

	// Control records (transaction markers) are not printed, but their
	// offsets tell -e that a partition whose last offset is a marker is done.
	opts := []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}
	if c.group != "" {
		opts = append(opts, kgo.ConsumerGroup(c.group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(from), kgo.AutoCommitMarks())
	} else {
		m := map[int32]kgo.Offset{}
		for p := range parts {
			m[p] = from
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: m}))
	}
	cl, err := o.connect(ctx, opts...)
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
	printed := 0
	done := func() bool {
		return (c.count > 0 && printed >= c.count) || (c.exitAtEnd && len(remaining) == 0)
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
				if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
					delete(remaining, r.Partition)
				}
				return
			}
			if err := printRecord(w, r, format, o.output == "json"); err != nil && ferr == nil {
				ferr = err
			}
			printed++
			if c.group != "" {
				cl.MarkCommitRecords(r)
			}
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
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
// leaving out partitions already at their end from the start position.
func endTargets(ctx context.Context, adm *kadm.Client, topic string, parts map[int32]bool, from kgo.Offset, fromFlag, group string) (map[int32]int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %q: %w", topic, err)
	}
	var starts kadm.ListedOffsets
	switch {
	case fromFlag == "beginning" || fromFlag == "earliest":
		starts, err = adm.ListStartOffsets(ctx, topic)
	case strings.HasPrefix(fromFlag, "timestamp:"):
		ms, _ := strconv.ParseInt(strings.TrimPrefix(fromFlag, "timestamp:"), 10, 64)
		starts, err = adm.ListOffsetsAfterMilli(ctx, ms, topic)
	case fromFlag == "end" || fromFlag == "latest":
		starts = ends
	default:
		starts = kadm.ListedOffsets{}
		n := from.EpochOffset().Offset
		for p := range parts {
			lo := kadm.ListedOffset{Topic: topic, Partition: p, Offset: n}
			if starts[topic] == nil {
				starts[topic] = map[int32]kadm.ListedOffset{}
			}
			starts[topic][p] = lo
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %q: %w", topic, err)
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

// jsonRecord is the -o json shape of one record.
type jsonRecord struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp int64             `json:"timestamp"`
	Key       *string           `json:"key"`
	Value     *string           `json:"value"`
	Headers   map[string]string `json:"headers,omitempty"`
}

// printRecord writes one record in the kcat-style format or as JSON.
func printRecord(w io.Writer, r *kgo.Record, format string, asJSON bool) error {
	if asJSON {
		jr := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
		if r.Key != nil {
			k := string(r.Key)
			jr.Key = &k
		}
		if r.Value != nil {
			v := string(r.Value)
			jr.Value = &v
		}
		if len(r.Headers) > 0 {
			jr.Headers = map[string]string{}
			for _, h := range r.Headers {
				jr.Headers[h.Key] = string(h.Value)
			}
		}
		b, err := json.Marshal(jr)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := io.WriteString(w, formatRecord(r, format))
	return err
}

// formatRecord expands kcat-style tokens.
func formatRecord(r *kgo.Record, format string) string {
	var sb strings.Builder
	for i := 0; i < len(format); i++ {
		ch := format[i]
		if (ch != '%' && ch != '\\') || i+1 == len(format) {
			sb.WriteByte(ch)
			continue
		}
		i++
		if ch == '\\' {
			switch format[i] {
			case 'n':
				sb.WriteByte('\n')
			case 't':
				sb.WriteByte('\t')
			case 'r':
				sb.WriteByte('\r')
			default:
				sb.WriteByte(format[i])
			}
			continue
		}
		switch format[i] {
		case 't':
			sb.WriteString(r.Topic)
		case 'p':
			sb.WriteString(strconv.Itoa(int(r.Partition)))
		case 'o':
			sb.WriteString(strconv.FormatInt(r.Offset, 10))
		case 'k':
			sb.Write(r.Key)
		case 's':
			sb.Write(r.Value)
		case 'K':
			sb.WriteString(strconv.Itoa(lenOrMinus(r.Key)))
		case 'S':
			sb.WriteString(strconv.Itoa(lenOrMinus(r.Value)))
		case 'T':
			sb.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'h':
			for j, h := range r.Headers {
				if j > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(h.Key)
				sb.WriteByte('=')
				sb.Write(h.Value)
			}
		case '%':
			sb.WriteByte('%')
		default:
			sb.WriteByte('%')
			sb.WriteByte(format[i])
		}
	}
	return sb.String()
}

// lenOrMinus is len(b), or -1 for null (as kcat prints it).
func lenOrMinus(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}
