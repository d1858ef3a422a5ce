package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceOpts are the flags of `strata produce`.
type produceOpts struct {
	keyDelim  string
	key       string
	keySet    bool
	nullEmpty bool
	headers   []string
	partition int32
	acks      string
	maxLine   int
}

// newProduceCmd is `strata produce <topic>`: one record per stdin line.
func newProduceCmd() *cobra.Command {
	o := &clientOpts{}
	p := &produceOpts{}
	cmd := &cobra.Command{
		Use:   "produce <topic>",
		Short: "Produce one record per line of stdin (kcat-style -k key, -K key delimiter, -Z null)",
		Long: `Produce one record per line of stdin. -k gives every record the same key; -K splits each
line into key and value at the first delimiter; -Z sends an empty value as null (a
tombstone). A topic that does not exist is created by the broker when it allows it
(auto.create.topics.enable), as with kcat.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p.keySet = cmd.Flags().Changed("key")
			return runProduce(cmd, o, p, args[0], cmd.InOrStdin())
		},
	}
	addClientFlags(cmd, o)
	f := cmd.Flags()
	f.StringVarP(&p.key, "key", "k", "", "key of every record")
	f.StringVarP(&p.keyDelim, "key-delimiter", "K", "", "split each line at the first occurrence into key and value")
	f.BoolVarP(&p.nullEmpty, "null", "Z", false, "send an empty key or value as null (an empty value is a tombstone)")
	f.StringArrayVarP(&p.headers, "header", "H", nil, "header key=value added to every record (repeatable)")
	f.Int32Var(&p.partition, "partition", -1, "partition to produce to (-1 = by key hash, or sticky for null keys)")
	f.StringVar(&p.acks, "acks", "all", "required acks: all (-1), 1 or 0")
	f.IntVar(&p.maxLine, "max-line-bytes", 16<<20, "longest accepted input line")
	return cmd
}

// runProduce sends one record per line of in to topic and waits for
// every acknowledgement. An acks=all write to a topic whose
// min.insync.replicas exceeds its replication factor, which no retry can
// fix (Kafka accepts such a topic too), fails at once with the reason; a
// timeout says what keeps the partitions from accepting the records.
func runProduce(cmd *cobra.Command, o *clientOpts, p *produceOpts, topic string, in io.Reader) error {
	if p.keySet && p.keyDelim != "" {
		return errors.New("use -k (one key for every record) or -K (a key on each line), not both")
	}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.UnknownTopicRetries(2), kgo.AllowAutoTopicCreation()}
	switch p.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return fmt.Errorf("invalid --acks %q: use all, 1 or 0", p.acks)
	}
	if p.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	hdrs, err := parseHeaders(p.headers)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	cl, err := o.connect(ctx, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	existed := topicExists(ctx, adm, o.timeout, topic)
	if existed && (p.acks == "all" || p.acks == "-1") {
		if err := impossibleISR(ctx, adm, o.timeout, topic); err != nil {
			return err
		}
	}

	var (
		mu       sync.Mutex
		firstErr error
		n        int
	)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), p.maxLine)
	for sc.Scan() {
		rec := p.record(sc.Text(), hdrs)
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err == nil {
				n++
			}
		})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	fctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		// kgo retries retriable errors (NOT_ENOUGH_REPLICAS, NOT_LEADER,
		// ...) without returning them; the partitions' state says why.
		if why := diagnoseProduce(ctx, adm, o.timeout, topic, p.acks); why != "" {
			return fmt.Errorf("produce to %q: no acknowledgement within %s: %s", topic, o.timeout, why)
		}
		return fmt.Errorf("produce to %q: no acknowledgement within %s (%v)", topic, o.timeout, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		if errors.Is(firstErr, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("unknown topic %q: the broker does not create topics on first use (auto.create.topics.enable=false); create it with: strata topic create %s", topic, topic)
		}
		return fmt.Errorf("produce to %q: %w", topic, describeProduceErr(firstErr))
	}
	if !existed && n > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "topic %q did not exist: the broker created it (auto.create.topics.enable)\n", topic)
	}
	// The table form is a note on stderr, leaving stdout empty.
	return o.emit(cmd, map[string]any{"topic": topic, "records": n}, func(io.Writer) error {
		fmt.Fprintf(cmd.ErrOrStderr(), "produced %d %s to %q\n", n, plural(int64(n), "record", "records"), topic)
		return nil
	})
}

// topicExists reports whether the topic exists now (false when unknown or
// the question cannot be answered).
func topicExists(ctx context.Context, adm *kadm.Client, timeout time.Duration, topic string) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tds, err := adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return false
	}
	td, ok := tds[topic]
	return ok && td.Err == nil
}

// impossibleISR returns the error to report when topic's
// min.insync.replicas exceeds its replication factor, else nil.
func impossibleISR(ctx context.Context, adm *kadm.Client, timeout time.Duration, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, rf, ok := topicMinISR(ctx, adm, topic)
	if minISR, err := strconv.Atoi(v); ok && err == nil && minISR > rf {
		return fmt.Errorf("produce to %q: NOT_ENOUGH_REPLICAS: the topic has min.insync.replicas=%d but %d replica(s), so no acks=all write can succeed: "+
			"lower it (strata topic alter %s --set min.insync.replicas=%d) or produce with --acks 1", topic, minISR, rf, topic, rf)
	}
	return nil
}

// diagnoseProduce explains, from the topic's metadata and settings, why
// the broker keeps refusing records with a retriable error: a partition
// without a leader (LEADER_NOT_AVAILABLE), or fewer in-sync replicas than
// min.insync.replicas for acks=all (NOT_ENOUGH_REPLICAS). "" when neither.
func diagnoseProduce(ctx context.Context, adm *kadm.Client, timeout time.Duration, topic, acks string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return ""
	}
	td, ok := tds[topic]
	if !ok || td.Err != nil {
		return ""
	}
	minISR := 0
	if v, _, ok := topicMinISR(ctx, adm, topic); ok {
		minISR, _ = strconv.Atoi(v)
	}
	for _, p := range td.Partitions.Sorted() {
		switch {
		case p.Leader < 0:
			return fmt.Sprintf("LEADER_NOT_AVAILABLE: partition %d has no leader", p.Partition)
		case (acks == "all" || acks == "-1") && len(p.ISR) < minISR:
			return fmt.Sprintf("NOT_ENOUGH_REPLICAS: partition %d has %d in-sync replica(s) but the topic has min.insync.replicas=%d, which acks=all needs: "+
				"lower it (strata topic alter %s --set min.insync.replicas=%d) or produce with --acks 1", p.Partition, len(p.ISR), minISR, topic, len(p.ISR))
		}
	}
	return ""
}

// describeProduceErr words a Kafka error as its name and meaning, keeping
// it matchable with errors.Is.
func describeProduceErr(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Errorf("%w: %s", kafkaCode{ke}, ke.Description)
	}
	return err
}

// record builds one record from an input line.
func (p *produceOpts) record(line string, hdrs []kgo.RecordHeader) *kgo.Record {
	rec := &kgo.Record{Headers: hdrs, Partition: p.partition}
	var key, val []byte
	hasKey := false
	switch {
	case p.keySet:
		key, val, hasKey = []byte(p.key), []byte(line), true
	case p.keyDelim != "":
		if k, v, ok := strings.Cut(line, p.keyDelim); ok {
			key, val, hasKey = []byte(k), []byte(v), true
		} else {
			val = []byte(line)
		}
	default:
		val = []byte(line)
	}
	if hasKey && (len(key) > 0 || !p.nullEmpty) {
		rec.Key = key
		if rec.Key == nil {
			rec.Key = []byte{}
		}
	}
	if len(val) > 0 || !p.nullEmpty {
		rec.Value = val
		if rec.Value == nil {
			rec.Value = []byte{}
		}
	}
	return rec
}

// parseHeaders parses repeated -H key=value flags, keeping their order.
func parseHeaders(items []string) ([]kgo.RecordHeader, error) {
	var out []kgo.RecordHeader
	for _, it := range items {
		k, v, err := cutKV(it, "--header")
		if err != nil {
			return nil, err
		}
		out = append(out, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return out, nil
}
