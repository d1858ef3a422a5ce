package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// decommission is the JSON shape of `strata cluster decommission`.
type decommission struct {
	Broker int32       `json:"broker"`
	Moves  []decomMove `json:"moves"`
	Done   bool        `json:"done"`
}

type decomMove struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	From      []int32 `json:"from"`
	To        []int32 `json:"to"`
}

// planDecommission replaces broker id in every partition's replica list
// by the live broker, not already a replica, holding the fewest replicas
// (ties: lowest id); the replica order is kept, so the preferred leader
// changes only where id was preferred.
func planDecommission(id int32, live []int32, parts map[string]map[int32][]int32) ([]decomMove, error) {
	load := map[int32]int{}
	for _, b := range live {
		load[b] = 0
	}
	for _, ps := range parts {
		for _, reps := range ps {
			for _, r := range reps {
				if _, ok := load[r]; ok {
					load[r]++
				}
			}
		}
	}
	topics := make([]string, 0, len(parts))
	for t := range parts {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var moves []decomMove
	for _, t := range topics {
		idx := make([]int32, 0, len(parts[t]))
		for p := range parts[t] {
			idx = append(idx, p)
		}
		slices.Sort(idx)
		for _, p := range idx {
			reps := parts[t][p]
			at := slices.Index(reps, id)
			if at < 0 {
				continue
			}
			best := int32(-1)
			for _, b := range live {
				if b == id || slices.Contains(reps, b) {
					continue
				}
				if best < 0 || load[b] < load[best] || (load[b] == load[best] && b < best) {
					best = b
				}
			}
			if best < 0 {
				return nil, fmt.Errorf("%s-%d has replicas %v: no other live broker can take broker %d's replica", t, p, reps, id)
			}
			to := slices.Clone(reps)
			to[at] = best
			load[best]++
			moves = append(moves, decomMove{Topic: t, Partition: p, From: reps, To: to})
		}
	}
	return moves, nil
}

// newClusterDecommissionCmd is `strata cluster decommission N`: it moves
// every replica off broker N (live or dead) with
// AlterPartitionReassignments (KIP-455: the new replicas catch up and join
// the ISR before N's replica leaves) and, unless --wait=false, reports
// progress from ListPartitionReassignments until every move is done.
func newClusterDecommissionCmd() *cobra.Command {
	o := &clientOpts{}
	var wait bool
	cmd := &cobra.Command{
		Use:   "decommission BROKER_ID",
		Short: "Move every partition replica off a broker (AlterPartitionReassignments), then wait until the moves finish",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id64, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil {
				return fmt.Errorf("broker id %q: %w", args[0], err)
			}
			id := int32(id64)
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				m, err := adm.Metadata(ctx)
				if err != nil {
					return fmt.Errorf("cluster metadata: %w", err)
				}
				var live []int32
				for _, b := range m.Brokers {
					live = append(live, b.NodeID)
				}
				parts := map[string]map[int32][]int32{}
				for name, t := range m.Topics {
					parts[name] = map[int32][]int32{}
					for p, pd := range t.Partitions {
						parts[name][p] = pd.Replicas
					}
				}
				moves, err := planDecommission(id, live, parts)
				if err != nil {
					return err
				}
				out := decommission{Broker: id, Moves: moves}
				if len(moves) > 0 {
					var req kadm.AlterPartitionAssignmentsReq
					for _, mv := range moves {
						req.Assign(mv.Topic, mv.Partition, mv.To)
					}
					res, err := adm.AlterPartitionAssignments(ctx, req)
					if err != nil {
						return fmt.Errorf("reassign: %w", err)
					}
					for _, r := range res.Sorted() {
						if r.Err != nil {
							return fmt.Errorf("reassign %s-%d: %w (%s)", r.Topic, r.Partition, r.Err, r.ErrMessage)
						}
					}
				}
				for wait && len(moves) > 0 {
					set := kadm.TopicsSet{}
					for _, mv := range moves {
						set.Add(mv.Topic, mv.Partition)
					}
					l, err := adm.ListPartitionReassignments(ctx, set)
					if err != nil {
						return fmt.Errorf("list reassignments: %w", err)
					}
					left := len(l.Sorted())
					if left == 0 {
						// The broker answering may not have seen a move
						// start yet (each broker answers from its view of
						// the metadata): done only once the replica lists
						// are the targets.
						if left, err = notMoved(ctx, adm, moves); err != nil {
							return err
						}
					}
					if left == 0 {
						break
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d partitions still moving off broker %d\n", left, len(moves), id)
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(time.Second):
					}
				}
				out.Done = wait || len(moves) == 0
				return o.emit(cmd, out, func(w io.Writer) error {
					for _, mv := range out.Moves {
						fmt.Fprintf(w, "%s-%d\t%v -> %v\n", mv.Topic, mv.Partition, mv.From, mv.To)
					}
					if out.Done {
						fmt.Fprintf(w, "broker %d holds no replica (%d moved)\n", id, len(out.Moves))
					} else {
						fmt.Fprintf(w, "%d moves started\n", len(out.Moves))
					}
					return nil
				})
			})
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until every move has finished")
	addClientFlags(cmd, o)
	return cmd
}

// notMoved counts the moves whose partition's replica list, as the
// cluster metadata reports it, is not yet the target.
func notMoved(ctx context.Context, adm *kadm.Client, moves []decomMove) (int, error) {
	topics := map[string]bool{}
	for _, mv := range moves {
		topics[mv.Topic] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	m, err := adm.Metadata(ctx, names...)
	if err != nil {
		return 0, fmt.Errorf("cluster metadata: %w", err)
	}
	n := 0
	for _, mv := range moves {
		pd, ok := m.Topics[mv.Topic].Partitions[mv.Partition]
		if !ok || !slices.Equal(pd.Replicas, mv.To) {
			n++
		}
	}
	return n, nil
}
