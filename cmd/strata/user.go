package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/sasl"
)

// newUserCmd is `strata user scram set|delete|list`: SCRAM credentials
// through Kafka's AlterUserScramCredentials and
// DescribeUserScramCredentials (PLAIN users live in the broker's JAAS
// setting, not here).
func newUserCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{Use: "user", Short: "Manage SASL/SCRAM users (credentials stored by the broker)"}
	addClientFlags(cmd, o)
	scram := &cobra.Command{Use: "scram", Short: "Set, delete and list SCRAM-SHA-256/512 credentials"}
	scram.AddCommand(newUserScramSetCmd(o), newUserScramDeleteCmd(o), newUserScramListCmd(o))
	cmd.AddCommand(scram)
	return cmd
}

// scramMechanism parses --mechanism.
func scramMechanism(v string) (kadm.ScramMechanism, error) {
	switch v {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("--mechanism %q: must be SCRAM-SHA-256 or SCRAM-SHA-512", v)
}

// alterErr returns the first per-user error of an alteration.
func alterErr(res kadm.AlteredUserSCRAMs) error {
	for _, u := range res.Sorted() {
		if u.Err != nil {
			return fmt.Errorf("user %q: %w", u.User, withBrokerMessage(u.Err, u.ErrMessage))
		}
	}
	return nil
}

// msgSuffix formats a broker error message, if any.
func msgSuffix(m string) string {
	if m == "" {
		return ""
	}
	return ": " + m
}

// withBrokerMessage is a per-entity Kafka error as the other commands
// print it: the broker's message first, then the code, without kerr's
// generic description of the code ("This most likely occurs because of a
// request being malformed ...") in between.
func withBrokerMessage(err error, msg string) error {
	var ke *kerr.Error
	if msg != "" && errors.As(err, &ke) {
		return fmt.Errorf("%s (%w)", msg, kafkaCode{ke})
	}
	return fmt.Errorf("%w%s", err, msgSuffix(msg))
}

// newUserScramSetCmd is `strata user scram set NAME`.
func newUserScramSetCmd(o *clientOpts) *cobra.Command {
	var mech, password, offlineDirs string
	var iterations int32
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Create or replace a user's SCRAM credential (salted and hashed by the client; the broker never sees the password)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := scramMechanism(mech)
			if err != nil {
				return err
			}
			if password == "" {
				return errors.New("--password (or env STRATA_SCRAM_PASSWORD) is required")
			}
			if offlineDirs != "" {
				salt := make([]byte, 24)
				if _, err := rand.Read(salt); err != nil {
					return err
				}
				sp, err := sasl.SaltPassword(mech, password, salt, int(iterations))
				if err != nil {
					return err
				}
				up := broker.ScramUpsertion{User: args[0], Mechanism: mech, Iterations: int(iterations), Salt: salt, SaltedPassword: sp}
				if err := alterOffline(offlineDirs, args[0], nil, []broker.ScramUpsertion{up}); err != nil {
					return fmt.Errorf("set SCRAM credential: %w", err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s credential of %q set (%d iterations) in %s\n", mech, args[0], iterations, offlineDirs)
				return err
			}
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: args[0], Mechanism: m, Iterations: iterations, Password: password}})
				if err == nil {
					err = alterErr(res)
				}
				if err != nil {
					return fmt.Errorf("set SCRAM credential: %w", err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s credential of %q set (%d iterations)\n", mech, args[0], iterations)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&mech, "mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256 or SCRAM-SHA-512")
	f.Int32Var(&iterations, "iterations", 4096, "PBKDF2 iterations, 4096 to 16384 (Kafka's limits)")
	f.StringVar(&password, "password", os.Getenv("STRATA_SCRAM_PASSWORD"), "the user's password (env STRATA_SCRAM_PASSWORD keeps it out of the process list)")
	f.StringVar(&offlineDirs, "log.dirs", "", "write into the credential store of a STOPPED broker with these log.dirs instead of calling a running one (bootstraps the first user of a SCRAM-only listener, as kafka-storage format --add-scram)")
	return cmd
}

// alterOffline applies one user's alterations to a stopped broker's
// credential store.
func alterOffline(logDirs, user string, dels []broker.ScramDeletion, ups []broker.ScramUpsertion) error {
	cfg, err := config.LoadBroker("", nil, map[string]string{"log.dirs": logDirs})
	if err != nil {
		return err
	}
	res, err := broker.AlterScramOffline(cfg, dels, ups)
	if err != nil {
		return err
	}
	return res[user]
}

// newUserScramDeleteCmd is `strata user scram delete NAME`.
func newUserScramDeleteCmd(o *clientOpts) *cobra.Command {
	var mech, offlineDirs string
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a user's SCRAM credential for one mechanism",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := scramMechanism(mech)
			if err != nil {
				return err
			}
			if offlineDirs != "" {
				if err := alterOffline(offlineDirs, args[0], []broker.ScramDeletion{{User: args[0], Mechanism: mech}}, nil); err != nil {
					return fmt.Errorf("delete SCRAM credential: %w", err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s credential of %q deleted from %s\n", mech, args[0], offlineDirs)
				return err
			}
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: args[0], Mechanism: m}}, nil)
				if err == nil {
					err = alterErr(res)
				}
				if err != nil {
					return fmt.Errorf("delete SCRAM credential: %w", err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s credential of %q deleted\n", mech, args[0])
				return err
			})
		},
	}
	cmd.Flags().StringVar(&mech, "mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256 or SCRAM-SHA-512")
	cmd.Flags().StringVar(&offlineDirs, "log.dirs", "", "delete from the credential store of a STOPPED broker with these log.dirs instead of calling a running one")
	return cmd
}

// scramListed is one row of `user scram list`.
type scramListed struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

// newUserScramListCmd is `strata user scram list [NAME...]`.
func newUserScramListCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list [NAME...]",
		Short: "List users' SCRAM mechanisms and iterations (all users without names)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				d, err := adm.DescribeUserSCRAMs(ctx, args...)
				if err != nil {
					return fmt.Errorf("list SCRAM credentials: %w", err)
				}
				out := []scramListed{}
				for _, u := range d.Sorted() {
					if u.Err != nil {
						return fmt.Errorf("user %q: %w", u.User, withBrokerMessage(u.Err, u.ErrMessage))
					}
					for _, ci := range u.CredInfos {
						out = append(out, scramListed{u.User, ci.Mechanism.String(), ci.Iterations})
					}
				}
				sort.SliceStable(out, func(i, j int) bool { return out[i].User < out[j].User })
				return o.emit(cmd, out, func(w io.Writer) error {
					return writeTable(w, out, func(s scramListed) []any {
						return []any{s.User, s.Mechanism, s.Iterations}
					}, "USER", "MECHANISM", "ITERATIONS")
				})
			})
		},
	}
}
