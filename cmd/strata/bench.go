package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/strata-io/strata/internal/bench"
)

// newBenchCmd is `strata bench produce|consume|e2e`.
func newBenchCmd() *cobra.Command {
	o := &clientOpts{}
	c := &bench.Config{}
	var quiet bool
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark any Kafka-compatible cluster (produce, consume, end-to-end)",
	}
	addClientFlags(cmd, o)
	f := cmd.PersistentFlags()
	f.StringVarP(&c.Topic, "topic", "t", "strata-bench", "topic (created if missing)")
	f.Int32VarP(&c.Partitions, "partitions", "p", 1, "partitions when the topic is created")
	f.IntVarP(&c.RecordSize, "record-size", "s", 1024, "value bytes per record")
	f.Int64VarP(&c.Count, "count", "n", 0, "records to send or read (0 = use --duration)")
	f.DurationVarP(&c.Duration, "duration", "d", 10*time.Second, "run time when --count is 0")
	f.Float64Var(&c.Rate, "rate", 0, "target records per second (0 = unlimited)")
	f.Int64Var(&c.Keys, "keys", 0, "distinct random keys, for compaction workloads (0 = null keys)")
	f.StringVar(&c.Acks, "acks", "all", "required acks: all, 1 or 0")
	f.StringVar(&c.Compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	f.DurationVar(&c.Linger, "linger", 0, "producer linger")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")

	mk := func(use, short string, fn func(context.Context, bench.Config) (bench.Result, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := checkOutput(o.output); err != nil {
					return err
				}
				tlsCfg, err := o.tlsConfig()
				if err != nil {
					return err
				}
				mech, err := o.saslMech()
				if err != nil {
					return err
				}
				cfg := *c
				cfg.ExactPartitions = cmd.Flags().Changed("partitions")
				cfg.Brokers = o.seeds()
				cfg.TLS = tlsCfg
				cfg.SASL = mech
				if !quiet {
					cfg.Progress = cmd.ErrOrStderr()
				}
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				res, err := fn(ctx, cfg)
				if err != nil {
					return err
				}
				return o.emit(cmd, res, func(w io.Writer) error {
					_, err := fmt.Fprintln(w, res.String())
					return err
				})
			},
		}
	}
	cmd.AddCommand(
		mk("produce", "Produce records as fast as possible (or at --rate); reports ack latency (including client queueing: use --rate to measure the broker)", bench.Produce),
		mk("consume", "Read the topic from the beginning up to its end (or --count/--duration)", bench.Consume),
		mk("e2e", "Produce and consume at once; reports produce-to-consume latency", bench.E2E),
	)
	return cmd
}
