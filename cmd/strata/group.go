package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func init() { commands = append(commands, newGroupCmd) }

// newGroupCmd is `strata group list|describe|reset-offsets|delete`.
func newGroupCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{Use: "group", Short: "List, describe, reset and delete consumer groups"}
	addClientFlags(cmd, o)
	cmd.AddCommand(newGroupListCmd(o), newGroupDescribeCmd(o), newGroupResetCmd(o), newGroupDeleteCmd(o))
	return cmd
}

func newGroupListCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List consumer groups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			adm, err := o.admin(ctx)
			if err != nil {
				return err
			}
			defer adm.Close()
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
			if o.output == "json" {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			t := newTable(cmd.OutOrStdout(), "GROUP", "STATE", "PROTOCOL-TYPE")
			for _, g := range out {
				t.row(g.Group, g.State, g.ProtocolType)
			}
			return t.flush()
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

type groupMember struct {
	MemberID   string   `json:"member_id"`
	ClientID   string   `json:"client_id"`
	ClientHost string   `json:"client_host"`
	Assigned   []string `json:"assigned"` // topic:partition
}

type groupOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1 = none
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"` // -1 = unknown
	MemberID  string `json:"member_id,omitempty"`
}

func newGroupDescribeCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "describe <group>",
		Short: "Show a group's members, assignments, committed offsets and lag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			adm, err := o.admin(ctx)
			if err != nil {
				return err
			}
			defer adm.Close()
			d, err := describeGroup(ctx, adm, group)
			if err != nil {
				return err
			}
			if o.output == "json" {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Group: %s  State: %s  Protocol: %s  Members: %d  Total lag: %d\n\n", d.Group, d.State, d.Protocol, len(d.Members), d.TotalLag)
			if len(d.Members) > 0 {
				t := newTable(w, "MEMBER", "CLIENT-ID", "HOST", "ASSIGNED")
				for _, m := range d.Members {
					t.row(m.MemberID, m.ClientID, m.ClientHost, strings.Join(m.Assigned, ","))
				}
				if err := t.flush(); err != nil {
					return err
				}
				fmt.Fprintln(w)
			}
			t := newTable(w, "TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "MEMBER")
			for _, off := range d.Offsets {
				t.row(off.Topic, off.Partition, dash(off.Committed), off.End, dash(off.Lag), orDash(off.MemberID))
			}
			return t.flush()
		},
	}
}

func dash(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

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

func newGroupResetCmd(o *clientOpts) *cobra.Command {
	var topic, to string
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "reset-offsets <group> --topic T --to earliest|latest|offset:N|timestamp:MS",
		Short: "Set a stopped group's committed offsets",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			if topic == "" || to == "" {
				return errors.New("reset-offsets needs --topic and --to")
			}
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			adm, err := o.admin(ctx)
			if err != nil {
				return err
			}
			defer adm.Close()
			dg, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				return fmt.Errorf("describe group %q: %w", group, err)
			}
			if g, ok := dg[group]; ok && g.State != "Empty" && g.State != "Dead" {
				return fmt.Errorf("group %q has active members (state %s): stop its consumers first", group, g.State)
			}
			targets, err := resetTargets(ctx, adm, topic, to, partitions)
			if err != nil {
				return err
			}
			os := kadm.Offsets{}
			for p, at := range targets {
				os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
			}
			resps, err := adm.CommitOffsets(ctx, group, os)
			if err != nil {
				return fmt.Errorf("reset offsets of %q: %w", group, err)
			}
			if err := resps.Error(); err != nil {
				return kafkaErr("reset offsets of group", group, err, "")
			}
			out := []groupOffset{}
			for p, at := range targets {
				out = append(out, groupOffset{Topic: topic, Partition: p, Committed: at, Lag: -1})
			}
			sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
			if o.output == "json" {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			t := newTable(cmd.OutOrStdout(), "TOPIC", "PARTITION", "NEW-OFFSET")
			for _, off := range out {
				t.row(off.Topic, off.Partition, off.Committed)
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "topic whose offsets to reset")
	cmd.Flags().StringVar(&to, "to", "", "earliest, latest, offset:<n> (or <n>) or timestamp:<ms>")
	cmd.Flags().Int32SliceVarP(&partitions, "partition", "p", nil, "only these partitions (default all)")
	return cmd
}

// resetTargets resolves --to per partition of topic.
func resetTargets(ctx context.Context, adm *kadm.Client, topic, to string, only []int32) (map[int32]int64, error) {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("look up topic %q: %w", topic, err)
	}
	td, ok := tds[topic]
	if !ok {
		return nil, fmt.Errorf("unknown topic %q", topic)
	}
	if err := kafkaErr("look up topic", topic, td.Err, ""); err != nil {
		return nil, err
	}
	parts := map[int32]bool{}
	for _, p := range only {
		if _, ok := td.Partitions[p]; !ok {
			return nil, fmt.Errorf("topic %q has no partition %d", topic, p)
		}
		parts[p] = true
	}
	if len(parts) == 0 {
		for p := range td.Partitions {
			parts[p] = true
		}
	}
	var listed kadm.ListedOffsets
	fixed := int64(-1)
	switch {
	case to == "earliest":
		listed, err = adm.ListStartOffsets(ctx, topic)
	case to == "latest":
		listed, err = adm.ListEndOffsets(ctx, topic)
	case strings.HasPrefix(to, "timestamp:"):
		ms, perr := strconv.ParseInt(strings.TrimPrefix(to, "timestamp:"), 10, 64)
		if perr != nil {
			return nil, fmt.Errorf("invalid --to %q: timestamp must be unix milliseconds", to)
		}
		listed, err = adm.ListOffsetsAfterMilli(ctx, ms, topic)
	default:
		n, perr := strconv.ParseInt(strings.TrimPrefix(to, "offset:"), 10, 64)
		if perr != nil || n < 0 {
			return nil, fmt.Errorf("invalid --to %q: use earliest, latest, offset:<n> or timestamp:<ms>", to)
		}
		fixed = n
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %q: %w", topic, err)
	}
	out := map[int32]int64{}
	for p := range parts {
		if fixed >= 0 {
			out[p] = fixed
			continue
		}
		lo, ok := listed.Lookup(topic, p)
		if !ok || lo.Err != nil {
			return nil, fmt.Errorf("list offsets of %q partition %d: %v", topic, p, lo.Err)
		}
		out[p] = lo.Offset
	}
	return out, nil
}

func newGroupDeleteCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "delete <group>...",
		Short: "Delete groups without members (and their committed offsets)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := o.ctx(cmd)
			defer cancel()
			adm, err := o.admin(ctx)
			if err != nil {
				return err
			}
			defer adm.Close()
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
			if o.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"deleted": args})
			}
			for _, g := range args {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted group %q\n", g)
			}
			return nil
		},
	}
}
