package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/strata-io/strata/internal/logtool"
)

// Exit statuses of the log commands: 0 sound, 1 problems found (or an
// unreadable path), 2 usage error.
const exitUsage = 2

// newLogCmd is `strata log dump|verify`: offline inspection of log dirs.
func newLogCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Inspect log directories offline (dump segments and indexes, verify a log dir)",
	}
	// Usage errors (bad flags, wrong argument count) exit with status 2.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		usageExit(c, flagError(c, err))
		return err
	})
	cmd.AddCommand(newLogDumpCmd(), newLogVerifyCmd())
	return cmd
}

// usageExit prints err and the usage of c and exits with status 2.
func usageExit(c *cobra.Command, err error) {
	fmt.Fprintf(c.ErrOrStderr(), "strata: %v\n%s", err, c.UsageString())
	os.Exit(exitUsage)
}

// outputJSON validates an -o value ("text" or "json").
func outputJSON(c *cobra.Command, output string) bool {
	switch output {
	case "text":
		return false
	case "json":
		return true
	}
	usageExit(c, fmt.Errorf("-o %q: want text or json", output))
	return false
}

func newLogDumpCmd() *cobra.Command {
	var opts logtool.DumpOptions
	var output string
	cmd := &cobra.Command{
		Use:   "dump <segment file or partition dir>...",
		Short: "Print the batches, records and index entries of segment files, like kafka-dump-log",
		Long: `Print .log segments (one line per batch, --print-records adds one line per record),
.index, .timeindex and .txnindex files. A partition directory dumps all its segment
files in offset order. --verify-index checks each index entry against the .log of the
same segment. Exit status: 0 no problems, 1 problems found (bad CRC, torn tail,
index mismatch, unreadable file), 2 usage error.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				usageExit(cmd, fmt.Errorf("log dump: need a segment file or partition directory"))
			}
			opts.JSON = outputJSON(cmd, output)
			total := 0
			for _, path := range args {
				probs, err := logtool.Dump(cmd.OutOrStdout(), path, opts)
				if err != nil {
					return err
				}
				total += len(probs)
			}
			if total > 0 {
				return fmt.Errorf("log dump: %d problems found", total)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.PrintRecords, "print-records", false, "print every record (offset, timestamp, key, value, headers)")
	f.BoolVar(&opts.VerifyIndex, "verify-index", false, "check .index/.timeindex entries against the segment's .log")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json (JSON Lines)")
	return cmd
}

func newLogVerifyCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "verify <log dir>",
		Short: "Check every partition of a log directory: batches, CRCs, offset order, indexes",
		Long: `Walk every partition directory <topic>-<n> of a log directory and check every segment:
batches frame and decode, CRC-32C valid, offsets strictly increasing across batches and
segments, the base offset in each file name <= its first batch's offset, and .index /
.timeindex entries agree with the log. Each problem is printed as "file: position N: reason".
A partial batch at the end of the active segment is reported as
"torn tail at position N (will be truncated by recovery)" and counts as a problem.
Exit status: 0 sound, 1 problems found, 2 usage error.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				usageExit(cmd, fmt.Errorf("log verify: need exactly one log directory, got %d arguments", len(args)))
			}
			asJSON := outputJSON(cmd, output)
			if st, err := os.Stat(args[0]); err != nil || !st.IsDir() {
				usageExit(cmd, fmt.Errorf("log verify: %s is not a directory", args[0]))
			}
			if brokerRunning(args[0]) {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: a broker is running on %s (it holds the directory's .lock): its active segments change while they are read, so a problem at their tail may be a write in progress; stop the broker for an exact verdict\n", args[0])
			}
			var opts logtool.VerifyOptions
			if isTerminal(os.Stderr) {
				opts.Progress = func(done, total int) { progressBar(os.Stderr, done, total) }
			}
			rep, err := logtool.Verify(args[0], opts)
			if err != nil {
				return err
			}
			if err := printReport(cmd.OutOrStdout(), rep, asJSON); err != nil {
				return err
			}
			if !rep.OK() {
				return fmt.Errorf("log verify: %d problems found", len(rep.Problems))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// printReport prints each problem and a summary line.
func printReport(w io.Writer, rep *logtool.Report, asJSON bool) error {
	if asJSON {
		if rep.Problems == nil {
			rep.Problems = []logtool.Problem{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	for _, p := range rep.Problems {
		if _, err := fmt.Fprintln(w, p); err != nil {
			return err
		}
	}
	status := "OK"
	if !rep.OK() {
		status = fmt.Sprintf("%d PROBLEMS", len(rep.Problems))
	}
	_, err := fmt.Fprintf(w, "checked %d partitions, %d segments, %d batches, %d records, %d bytes: %s\n",
		rep.Partitions, rep.Segments, rep.Batches, rep.Records, rep.Bytes, status)
	return err
}

// progressBar redraws "\r[####    ] n/m partitions", ending the line when done.
func progressBar(w io.Writer, done, total int) {
	const width = 30
	filled := width * done / max(total, 1)
	fmt.Fprintf(w, "\r[%s%s] %d/%d partitions", strings.Repeat("#", filled), strings.Repeat(" ", width-filled), done, total)
	if done == total {
		fmt.Fprintln(w)
	}
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
