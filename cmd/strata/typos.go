package main

// Mistyped commands and flags fail with a non-zero exit status and a
// "did you mean" hint, on one line.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/strata-io/strata/internal/suggest"
)

// strictCommands makes every command that only groups subcommands (topic,
// group, ...) refuse an unknown subcommand instead of printing its help
// and exiting 0 (cobra's default below the root), and adds "did you mean"
// to unknown flags everywhere.
func strictCommands(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) == 0 {
					return cmd.Help()
				}
				return unknownCommand(cmd, args[0])
			}
		} else if c.Args != nil {
			// cobra's "accepts 1 arg(s), received 0" names neither the
			// command nor what the argument is: add the usage line.
			check := c.Args
			c.Args = func(cmd *cobra.Command, args []string) error {
				if err := check(cmd, args); err != nil {
					return fmt.Errorf("%w (usage: %s)", err, cmd.UseLine())
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownCommand is the error for `strata <path> <word>` where word is no
// subcommand of cmd.
func unknownCommand(cmd *cobra.Command, word string) error {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
			names = append(names, sub.Aliases...)
		}
	}
	msg := fmt.Sprintf("unknown command %q for %q", word, cmd.CommandPath())
	if near := suggest.Closest(word, names); near != "" {
		return fmt.Errorf("%s: did you mean %q?", msg, near)
	}
	return fmt.Errorf("%s: run '%s --help' for the commands", msg, cmd.CommandPath())
}

// flagError adds the closest flag name to pflag's "unknown flag" errors.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var name string
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		name = strings.TrimPrefix(msg, "unknown flag: --")
	case strings.HasPrefix(msg, "unknown shorthand flag: "):
		// "unknown shorthand flag: 'x' in -xyz"
		if i := strings.Index(msg, "'"); i >= 0 && i+2 < len(msg) {
			name = msg[i+1 : i+2]
		}
	default:
		return err
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if near := suggest.Closest(name, names); near != "" && len(name) > 1 {
		return fmt.Errorf("%s: did you mean --%s?", msg, near)
	}
	return errors.New(msg)
}
