package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/server"
)

// newServeCmd is `strata serve`: one flag per broker setting (named like
// the setting, defaults from the table), plus --config and
// --shutdown-timeout.
func newServeCmd() *cobra.Command {
	var cfgPath string
	var kafkaOverrides []string
	var shutdownTimeout time.Duration
	var helpAll bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Strata broker (zero config: PLAINTEXT://127.0.0.1:9092, data in ./strata-data)",
		Long: `Run a Strata broker. Settings come from, in rising precedence: the --config file (Kafka's server.properties format), STRATA_<NAME> environment variables, and --override name=value or the flags below. Every problem in them is reported at once, before anything starts; docs/configuration.md lists every setting and how Strata treats Kafka's.

SIGINT or SIGTERM shuts the broker down cleanly (flushing every log); a second signal exits at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if helpAll {
				return writeServeHelp(cmd.OutOrStdout(), cmd, true)
			}
			// --override k=v (kafka-server-start's flag) first, so a
			// setting's own flag wins.
			overrides, err := parseKV(kafkaOverrides, "--override")
			if err != nil {
				return err
			}
			cmd.Flags().Visit(func(f *pflag.Flag) {
				if _, ok := config.LookupBroker(f.Name); ok {
					overrides[f.Name] = f.Value.String()
				}
			})
			cfg, err := config.LoadBroker(cfgPath, os.Environ(), overrides)
			if err != nil {
				return err
			}
			logger := newLogger(cmd.ErrOrStderr(), cfg)
			for _, w := range cfg.Warnings() {
				logger.Warn(w)
			}
			return serve(cmd.Context(), cfg, logger, shutdownTimeout)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&cfgPath, "config", "", "server.properties file to read settings from (Kafka's format)")
	f.StringArrayVar(&kafkaOverrides, "override", nil, "any setting as name=value (repeatable), as kafka-server-start.sh --override")
	f.DurationVar(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a clean shutdown may take")
	f.BoolVar(&helpAll, "help-all", false, "show every setting, with its valid values and environment variable")
	for _, s := range config.BrokerSettings() {
		f.String(s.Name, s.Default, s.Doc)
		if s.Type == config.TypeBoolean {
			f.Lookup(s.Name).NoOptDefVal = "true" // --log.preallocate alone means true
		}
	}
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		_ = writeServeHelp(c.OutOrStdout(), c, false)
	})
	return cmd
}

// newLogger builds the broker's slog logger from strata.log.level and
// strata.log.format.
func newLogger(w io.Writer, cfg *config.Broker) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Get("strata.log.level"))) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Get("strata.log.format") == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve runs the broker until SIGINT/SIGTERM, then shuts it down within
// timeout; a second signal exits immediately with status 1.
func serve(ctx context.Context, cfg *config.Broker, logger *slog.Logger, timeout time.Duration) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	// Zero configuration (no KRaft setting) is a one-node cluster: the
	// same code path as every cluster node, with a single-member metadata
	// store on a loopback controller port (docs/cluster.md "Zero
	// configuration"). The log dirs' free-space reserve
	// (strata.log.min.free.bytes) keeps the store off a full disk.
	srv, err := server.NewWithOptions(cfg, logger, server.Options{OneNodeCluster: true})
	if err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	if err := srv.Start(); err != nil {
		shutdown(srv, timeout, logger)
		return fmt.Errorf("start broker: %w", err)
	}
	var attrs []any
	if a := srv.Addr(); a != nil {
		attrs = append(attrs, "kafka", a.String())
	}
	if a := srv.ControllerAddr(); a != nil {
		attrs = append(attrs, "controller", a.String())
	}
	attrs = append(attrs, "node.id", cfg.Int("node.id"), "log.dirs", strings.Join(cfg.List("log.dirs"), ","))
	if ma := srv.MetricsAddr(); ma != nil {
		attrs = append(attrs, "metrics", "http://"+ma.String()+"/metrics")
	}
	logger.Info("strata broker listening", attrs...)

	select {
	case sig := <-sigs:
		logger.Info("shutting down", "signal", sig.String(), "timeout", timeout.String())
	case <-ctx.Done():
		logger.Info("shutting down", "reason", ctx.Err().Error())
	}
	done := make(chan struct{})
	defer close(done)
	go func() { // owner: serve; ends when serve returns
		select {
		case sig := <-sigs:
			logger.Error("second signal: exiting immediately without a clean shutdown", "signal", sig.String())
			os.Exit(1)
		case <-done:
		}
	}()
	if err := shutdown(srv, timeout, logger); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("shutdown complete")
	return nil
}

// shutdown stops srv within timeout, logging a failure. The timeout is a
// promise: when it passes, shutdown returns at once (serve then exits with
// status 1) whatever is still running; the broker writes its
// clean-shutdown marker only when everything finished before the deadline,
// so the next start recovers the logs as after a crash. Container
// platforms kill a process that outlives their grace period anyway
// (Kubernetes: 30 s); this way the exit is the broker's own.
func shutdown(srv *server.Server, timeout time.Duration, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }() // owner: shutdown; abandoned at the deadline, as the process exits
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = fmt.Errorf("not finished within --shutdown-timeout %s: exiting without the clean-shutdown marker, the next start recovers the logs", timeout)
	}
	if err != nil {
		logger.Error("shutdown", "err", err)
	}
	return err
}

// listenerFlags lets `strata serve` take Kafka's per-listener settings as
// flags for any listener name (--listener.name.internal.ssl.keystore.location
// PATH): a --listener.name.* flag that is not one of serve's own flags is
// passed on as --override name=value, which validates it like the
// config file does.
func listenerFlags(args []string) []string {
	if len(args) == 0 || args[0] != "serve" {
		return args
	}
	known := map[string]bool{}
	for _, s := range config.BrokerSettings() {
		known[s.Name] = true
	}
	out := []string{args[0]}
	for i := 1; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--listener.name.") || known[name] {
			out = append(out, a)
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			value = args[i]
		}
		out = append(out, "--override", name+"="+value)
	}
	return out
}
