// Command strata-jepsen runs the Jepsen-style workload (internal/workload)
// against a running Kafka-compatible cluster (Strata or any other), then
// drains every partition, checks the history (internal/checker) and
// prints the report; or re-checks a saved history. It injects no faults
// itself: run it while you kill, pause or partition brokers (the
// test/faults harness does that in the test suite, docs/reliability.md).
//
//	strata-jepsen run --brokers 127.0.0.1:9092 --duration 60s --out /tmp/run1
//	strata-jepsen check /tmp/run1/history.jsonl
//
// The exit status is 0 when no anomaly was found, 1 when one was, 2 on a
// usage or connection error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/checker"
	"github.com/strata-io/strata/internal/workload"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  strata-jepsen run --brokers host:port[,host:port...] [flags]   run the workload, drain, check, print the report
  strata-jepsen check history.jsonl                              re-check a saved history
Run "strata-jepsen run -h" for the workload flags.`

// errAnomalies marks a run that completed and found anomalies.
var errAnomalies = errors.New("anomalies found")

// run is the command with its arguments; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = runWorkload(ctx, args[1:], stdout, stderr)
	case "check":
		err = checkFile(args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	default:
		err = fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errAnomalies):
		return 1
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintln(stderr, "strata-jepsen:", err)
		return 2
	}
}

func runWorkload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "bootstrap brokers, comma-separated (required)")
	topic := fs.String("topic", "jepsen", "topic to create and use (and <topic>-etl with --etl)")
	partitions := fs.Int("partitions", 3, "partitions of the topic")
	rf := fs.Int("replication-factor", -1, "replication factor of the topic (-1: the cluster's default)")
	producers := fs.Int("producers", 2, "idempotent acks=all producers")
	txnProducers := fs.Int("txn-producers", 1, "transactional producers")
	groupConsumers := fs.Int("group-consumers", 1, "consumer-group sessions (READ_COMMITTED)")
	assignConsumers := fs.Int("assign-consumers", 1, "assign-mode sessions from each partition's start (READ_COMMITTED)")
	etl := fs.Int("etl", 0, "consume-transform-produce transactional sessions")
	rate := fs.Float64("rate", 50, "records (transactions) per second per producer")
	duration := fs.Duration("duration", 30*time.Second, "how long the workload runs before the drain")
	drainTimeout := fs.Duration("drain-timeout", 2*time.Minute, "how long the drain may take")
	deliveryTimeout := fs.Duration("delivery-timeout", 60*time.Second, "the producers' record delivery timeout")
	seed := fs.Uint64("seed", 0, "seed of the partition choices and abort decisions (0: random)")
	out := fs.String("out", "", "directory for report.txt, anomalies.json and history.jsonl (none if empty)")
	verbose := fs.Bool("v", false, "print the workload's progress lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *brokers == "" {
		fs.Usage()
		return errors.New("--brokers is required")
	}
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	}
	cfg := workload.Config{Brokers: strings.Split(*brokers, ","), Topic: *topic, Partitions: int32(*partitions),
		ReplicationFactor: int16(*rf), Producers: *producers, TxnProducers: *txnProducers,
		GroupConsumers: *groupConsumers, AssignConsumers: *assignConsumers, EtlWorkers: *etl,
		Rate: *rate, Seed: *seed, Logf: logf, ClientOpts: []kgo.Opt{kgo.RecordDeliveryTimeout(*deliveryTimeout)}}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	r, err := workload.Start(startCtx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("start the workload: %w", err)
	}
	fmt.Fprintf(stderr, "strata-jepsen: running for %v against %s\n", *duration, *brokers)
	select {
	case <-time.After(*duration):
	case <-ctx.Done():
		fmt.Fprintln(stderr, "strata-jepsen: interrupted; draining")
	}
	r.Stop()
	dctx, cancel := context.WithTimeout(context.Background(), *drainTimeout)
	defer cancel()
	if err := r.Drain(dctx); err != nil {
		fmt.Fprintf(stderr, "strata-jepsen: drain: %v (unread acknowledged records are counted, not reported as lost)\n", err)
	}
	res := r.Check()
	res.Note("brokers", *brokers)
	res.Note("duration", duration.String())
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		if err := workload.WriteArtifacts(*out, r.History(), res); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "strata-jepsen: artifacts in %s\n", filepath.Clean(*out))
	}
	return report(res, stdout)
}

func checkFile(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("check takes one history.jsonl\n%s", usage)
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	h, err := checker.ReadJSONL(f)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	// A saved run's history ends with its drain when the run drained.
	drained := false
	for _, op := range h.Ops {
		if strings.HasPrefix(op.Process, "drain") {
			drained = true
			break
		}
	}
	return report(checker.Check(h, checker.Options{Drained: drained}), stdout)
}

func report(res *checker.Result, stdout io.Writer) error {
	if err := res.WriteReport(stdout); err != nil {
		return err
	}
	if !res.Valid() {
		return errAnomalies
	}
	return nil
}
