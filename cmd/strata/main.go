// Command strata is the Strata broker and its operator tools in one binary:
// `strata serve` runs a broker; the other commands administer any
// Kafka-compatible cluster, inspect log directories offline and benchmark.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}

// newRootCmd assembles the command tree. Each command group lives in its
// own file (serve.go, topic.go, ...), owned by whoever builds that feature.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "strata",
		Short:         "Strata: a Kafka-compatible event-streaming broker",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, add := range commands {
		root.AddCommand(add())
	}
	return root
}

// commands is appended to by each command file's init function, so command
// files can be added without touching this one.
var commands []func() *cobra.Command
