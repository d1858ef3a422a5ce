package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceOpts are the flags of `strata produce`.
type produceOpts struct {
	keyDelim  string
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
		Short: "Produce one record per line of stdin (kcat-style -K key delimiter, -Z null for empty values)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProduce(cmd, o, p, args[0], cmd.InOrStdin())
		},
	}
	addClientFlags(cmd, o)
	f := cmd.Flags()
	f.StringVarP(&p.keyDelim, "key-delimiter", "K", "", "split each line at the first occurrence into key and value")
	f.BoolVarP(&p.nullEmpty, "null", "Z", false, "send an empty key or value as null (an empty value is a tombstone)")
	f.StringArrayVarP(&p.headers, "header", "H", nil, "header key=value added to every record (repeatable)")
	f.Int32Var(&p.partition, "partition", -1, "partition to produce to (-1 = by key hash, or sticky for null keys)")
	f.StringVar(&p.acks, "acks", "all", "required acks: all (-1), 1 or 0")
	f.IntVar(&p.maxLine, "max-line-bytes", 16<<20, "longest accepted input line")
	return cmd
}

// runProduce sends one record per line of in to topic and waits for
// every acknowledgement.
func runProduce(cmd *cobra.Command, o *clientOpts, p *produceOpts, topic string, in io.Reader) error {
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.UnknownTopicRetries(2)}
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
		return fmt.Errorf("produce to %q: %w", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		if errors.Is(firstErr, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("unknown topic %q", topic)
		}
		return fmt.Errorf("produce to %q: %w", topic, firstErr)
	}
	// The table form is a note on stderr, leaving stdout empty.
	return o.emit(cmd, map[string]any{"topic": topic, "records": n}, func(io.Writer) error {
		fmt.Fprintf(cmd.ErrOrStderr(), "produced %d records to %q\n", n, topic)
		return nil
	})
}

// record builds one record from an input line.
func (p *produceOpts) record(line string, hdrs []kgo.RecordHeader) *kgo.Record {
	rec := &kgo.Record{Headers: hdrs, Partition: p.partition}
	var key, val []byte
	hasKey := false
	if p.keyDelim != "" {
		if k, v, ok := strings.Cut(line, p.keyDelim); ok {
			key, val, hasKey = []byte(k), []byte(v), true
		} else {
			val = []byte(line)
		}
	} else {
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
