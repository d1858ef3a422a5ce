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
	root := newRootCmd()
	root.SetArgs(listenerFlags(os.Args[1:]))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}

// newRootCmd assembles the command tree. Each command group lives in its
// own file (serve.go, topic.go, ...).
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "strata",
		Short:         "Strata: a Kafka-compatible event-streaming broker",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newServeCmd(),
		newTopicCmd(),
		newProduceCmd(),
		newConsumeCmd(),
		newGroupCmd(),
		newCompactionCmd(),
		newLogCmd(),
		newBenchCmd(),
		newUserCmd(),
		newACLCmd(),
		newQuotaCmd(),
		newClusterCmd(),
		newControllerCmd(),
		newBrokerCmd(),
		newVersionCmd(),
	)
	root.Version = versionString()
	root.SetVersionTemplate("{{.Version}}\n")
	installHelp(root, termWidth())
	strictCommands(root)
	return root
}
