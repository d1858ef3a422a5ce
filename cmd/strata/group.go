package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// newGroupCmd is `strata group list|describe|reset-offsets|delete`.
func newGroupCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{Use: "group", Short: "List, describe, reset and delete consumer groups"}
	addClientFlags(cmd, o)
	cmd.AddCommand(newGroupListCmd(o), newGroupDescribeCmd(o), newGroupResetCmd(o), newGroupDeleteCmd(o))
	return cmd
}

// newGroupListCmd is `strata group list`.
func newGroupListCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List consumer groups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				gs, err := adm.ListGroups(ctx)
				if err != nil {
					return fmt.Errorf("list groups: %w", err)
				}
				type listed struct {
					Group        string `json:"group"`
					State        string `json:"state"`
					ProtocolType string `json:"protocol_type"`
				}
				out := []listed{}
				for _, g := range gs.Sorted() {
					out = append(out, listed{g.Group, g.State, g.ProtocolType})
				}
				return o.emit(cmd, out, func(w io.Writer) error {
					return writeTable(w, out, func(g listed) []any {
						return []any{g.Group, g.State, g.ProtocolType}
					}, "GROUP", "STATE", "PROTOCOL-TYPE")
				})
			})
		},
	}
}

// groupDescription is the JSON shape of `group describe`.
type groupDescription struct {
	Group    string        `json:"group"`
	State    string        `json:"state"`
	Protocol string        `json:"protocol"`
	Members  []groupMember `json:"members"`
	Offsets  []groupOffset `json:"offsets"`
	TotalLag int64         `json:"total_lag"`
}

// groupMember is one member in `group describe`.
type groupMember struct {
	MemberID   string   `json:"member_id"`
	ClientID   string   `json:"client_id"`
	ClientHost string   `json:"client_host"`
	Assigned   []string `json:"assigned"` // topic:partition
}

// groupOffset is one partition's committed offset and lag in `group
// describe` and `group reset-offsets`.
type groupOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1 = none
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"` // -1 = unknown
	MemberID  string `json:"member_id,omitempty"`
}

// newGroupDescribeCmd is `strata group describe <group>`.
func newGroupDescribeCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "describe <group>",
		Short: "Show a group's members, assignments, committed offsets and lag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				d, err := describeGroup(ctx, adm, args[0])
				if err != nil {
					return err
				}
				return o.emit(cmd, d, func(w io.Writer) error { return printGroup(w, d) })
			})
		},
	}
}

// printGroup is the table form of `group describe`.
func printGroup(w io.Writer, d *groupDescription) error {
	fmt.Fprintf(w, "Group: %s  State: %s  Protocol: %s  Members: %d  Total lag: %d\n\n", d.Group, d.State, d.Protocol, len(d.Members), d.TotalLag)
	if len(d.Members) > 0 {
		err := writeTable(w, d.Members, func(m groupMember) []any {
			return []any{m.MemberID, m.ClientID, m.ClientHost, strings.Join(m.Assigned, ",")}
		}, "MEMBER", "CLIENT-ID", "HOST", "ASSIGNED")
		if err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return writeTable(w, d.Offsets, func(off groupOffset) []any {
		return []any{off.Topic, off.Partition, dash(off.Committed), off.End, dash(off.Lag), orDash(off.MemberID)}
	}, "TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "MEMBER")
}

// dash prints n, or "-" for a negative (unknown) value.
func dash(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// orDash prints s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// describeGroup gathers members, commits and lag; an unknown group (Dead
// with nothing committed) is an error.
func describeGroup(ctx context.Context, adm *kadm.Client, group string) (*groupDescription, error) {
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describe group %q: %w", group, err)
	}
	l, ok := lags[group]
	if !ok {
		return nil, fmt.Errorf("unknown group %q", group)
	}
	if err := l.Error(); err != nil {
		return nil, kafkaErr("describe group", group, err, "")
	}
	if l.State == "Dead" && len(l.Members) == 0 && len(l.Lag) == 0 {
		return nil, fmt.Errorf("unknown group %q", group)
	}
	d := &groupDescription{Group: group, State: l.State, Protocol: l.Protocol, Members: []groupMember{}, Offsets: []groupOffset{}}
	for _, m := range l.Members {
		gm := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: []string{}}
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range ca.Topics {
				for _, p := range t.Partitions {
					gm.Assigned = append(gm.Assigned, fmt.Sprintf("%s:%d", t.Topic, p))
				}
			}
		}
		d.Members = append(d.Members, gm)
	}
	for _, ml := range l.Lag.Sorted() {
		off := groupOffset{Topic: ml.Topic, Partition: ml.Partition, Committed: ml.Commit.At, End: ml.End.Offset, Lag: ml.Lag}
		if ml.Member != nil {
			off.MemberID = ml.Member.MemberID
		}
		if off.Lag > 0 {
			d.TotalLag += off.Lag
		}
		d.Offsets = append(d.Offsets, off)
	}
	return d, nil
}

// newGroupDeleteCmd is `strata group delete <group>...`.
func newGroupDeleteCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "delete <group>...",
		Short: "Delete groups without members (and their committed offsets)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				resps, err := adm.DeleteGroups(ctx, args...)
				if err != nil {
					return fmt.Errorf("delete groups: %w", err)
				}
				for _, g := range args {
					r := resps[g]
					if errors.Is(r.Err, kerr.NonEmptyGroup) {
						return fmt.Errorf("group %q has active members: stop its consumers first", g)
					}
					if err := kafkaErr("delete group", g, r.Err, r.ErrMessage); err != nil {
						return err
					}
				}
				return o.emit(cmd, map[string]any{"deleted": args}, func(w io.Writer) error {
					return printEach(w, "deleted group %q\n", args)
				})
			})
		},
	}
}
