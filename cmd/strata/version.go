package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=1.2.3"; "dev" otherwise.
var version = "dev"

// versionString is "strata <version> (<commit>[, modified], <date>, <go> <os>/<arch>)",
// the commit and date coming from the build's VCS stamp when present.
func versionString() string {
	commit, date, dirty := "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				date = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	out := "strata " + version + " ("
	if commit != "" {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		out += "commit " + commit
		if dirty {
			out += ", modified"
		}
		if date != "" {
			out += ", " + date
		}
		out += ", "
	}
	return out + fmt.Sprintf("%s %s/%s)", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// newVersionCmd is `strata version` (also `strata --version`).
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Strata's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
}
