package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newBrokerCmd is `strata broker config get|set`: broker settings through
// Kafka's DescribeConfigs and IncrementalAlterConfigs on BROKER resources
// (kafka-configs --entity-type brokers, rpk cluster config).
func newBrokerCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{Use: "broker", Short: "Read and change broker settings (DescribeConfigs, IncrementalAlterConfigs)"}
	addClientFlags(cmd, o)
	cfg := &cobra.Command{Use: "config", Short: "Get or set a broker's settings"}
	var broker int32
	cfg.PersistentFlags().Int32Var(&broker, "broker", -1, "node id of the broker (default: the broker answering --brokers)")
	cfg.AddCommand(newBrokerConfigGetCmd(o, &broker), newBrokerConfigSetCmd(o, &broker))
	cmd.AddCommand(cfg)
	return cmd
}

// targetBroker is --broker, or the node id of a broker of the cluster.
func targetBroker(ctx context.Context, adm *kadm.Client, broker int32) (int32, error) {
	if broker >= 0 {
		return broker, nil
	}
	m, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return 0, fmt.Errorf("cluster metadata: %w", err)
	}
	if len(m.Brokers) == 0 {
		return 0, errors.New("the cluster lists no broker")
	}
	return m.Brokers[0].NodeID, nil
}

// brokerSetting is one row of `broker config get`.
type brokerSetting struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive,omitempty"`
}

func newBrokerConfigGetCmd(o *clientOpts, broker *int32) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "get [name]...",
		Short: "Show a broker's settings: those named, or those not at their default (--all for every one)",
		RunE: func(cmd *cobra.Command, names []string) error {
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				id, err := targetBroker(ctx, adm, *broker)
				if err != nil {
					return err
				}
				rcs, err := adm.DescribeBrokerConfigs(ctx, id)
				if err != nil {
					return fmt.Errorf("describe configs of broker %d: %w", id, err)
				}
				rc, err := rcs.On(strconv.Itoa(int(id)), nil)
				if err != nil {
					return fmt.Errorf("describe configs of broker %d: %w", id, err)
				}
				if err := kafkaErr("describe configs of broker", strconv.Itoa(int(id)), rc.Err, rc.ErrMessage); err != nil {
					return err
				}
				want, found := map[string]bool{}, map[string]bool{}
				for _, n := range names {
					want[n] = true
				}
				out := []brokerSetting{}
				for _, c := range rc.Configs {
					switch {
					case len(want) > 0 && !want[c.Key]:
						continue
					case len(want) == 0 && !all && c.Source == kmsg.ConfigSourceDefaultConfig:
						continue
					}
					found[c.Key] = true
					out = append(out, brokerSetting{Name: c.Key, Value: c.Value, Source: configSource(c.Source), Sensitive: c.Sensitive})
				}
				for _, n := range names {
					if !found[n] {
						return fmt.Errorf("broker %d has no setting %q", id, n)
					}
				}
				sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
				return o.emit(cmd, out, func(w io.Writer) error {
					return writeTable(w, out, func(s brokerSetting) []any {
						v := "(null)"
						switch {
						case s.Sensitive:
							v = "(sensitive)"
						case s.Value != nil:
							v = *s.Value
						}
						return []any{s.Name, v, s.Source}
					}, "NAME", "VALUE", "SOURCE")
				})
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every setting, defaults included")
	return cmd
}

func newBrokerConfigSetCmd(o *clientOpts, broker *int32) *cobra.Command {
	var del []string
	cmd := &cobra.Command{
		Use:   "set name=value... [--delete name]",
		Short: "Change a broker's settings at run time (IncrementalAlterConfigs; the broker may refuse static ones)",
		RunE: func(cmd *cobra.Command, args []string) error {
			kv, err := parseKV(args, "setting")
			if err != nil {
				return err
			}
			if len(kv) == 0 && len(del) == 0 {
				return errors.New("nothing to set: give name=value arguments or --delete name")
			}
			var alters []kadm.AlterConfig
			for k, v := range kv {
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
			}
			for _, k := range del {
				alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			}
			sort.Slice(alters, func(i, j int) bool { return alters[i].Name < alters[j].Name })
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				id, err := targetBroker(ctx, adm, *broker)
				if err != nil {
					return err
				}
				resps, err := adm.AlterBrokerConfigs(ctx, alters, id)
				if err != nil {
					return fmt.Errorf("alter configs of broker %d: %w", id, err)
				}
				for _, r := range resps {
					if err := kafkaErr("alter configs of broker", strconv.Itoa(int(id)), r.Err, r.ErrMessage); err != nil {
						return err
					}
				}
				return o.emit(cmd, map[string]any{"broker": id, "altered": len(alters)}, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "altered %d setting(s) of broker %d\n", len(alters), id)
					return err
				})
			})
		},
	}
	cmd.Flags().StringArrayVar(&del, "delete", nil, "setting to return to its default (repeatable)")
	return cmd
}
