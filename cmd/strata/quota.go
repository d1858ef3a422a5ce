package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/internal/suggest"
)

// newQuotaCmd is `strata quota set|describe|delete`: Kafka's client quotas
// (producer_byte_rate, consumer_byte_rate, request_percentage,
// controller_mutation_rate) on users, client ids, both, and their
// defaults, through AlterClientQuotas and DescribeClientQuotas (what
// kafka-configs --entity-type users|clients does).
func newQuotaCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{Use: "quota", Short: "Set, describe and delete client quotas (kafka-configs --entity-type users/clients)"}
	addClientFlags(cmd, o)
	cmd.AddCommand(newQuotaSetCmd(o), newQuotaDescribeCmd(o), newQuotaDeleteCmd(o))
	return cmd
}

// entityFlags name a quota entity: --user NAME or --user-default, and/or
// --client-id NAME or --client-id-default.
type entityFlags struct {
	user, clientID               string
	userDefault, clientIDDefault bool
}

func (e *entityFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.user, "user", "", "user (principal name, e.g. alice for User:alice)")
	f.BoolVar(&e.userDefault, "user-default", false, "the default user entity (every user without a quota of its own)")
	f.StringVar(&e.clientID, "client-id", "", "client id")
	f.BoolVar(&e.clientIDDefault, "client-id-default", false, "the default client id entity")
}

// entity builds the entity; empty is allowed only when allowEmpty.
func (e *entityFlags) entity(allowEmpty bool) (kadm.ClientQuotaEntity, error) {
	if e.user != "" && e.userDefault {
		return nil, errors.New("--user and --user-default are exclusive")
	}
	if e.clientID != "" && e.clientIDDefault {
		return nil, errors.New("--client-id and --client-id-default are exclusive")
	}
	var out kadm.ClientQuotaEntity
	switch {
	case e.user != "":
		out = append(out, kadm.ClientQuotaEntityComponent{Type: quota.EntityUser, Name: kadm.StringPtr(e.user)})
	case e.userDefault:
		out = append(out, kadm.ClientQuotaEntityComponent{Type: quota.EntityUser})
	}
	switch {
	case e.clientID != "":
		out = append(out, kadm.ClientQuotaEntityComponent{Type: quota.EntityClientID, Name: kadm.StringPtr(e.clientID)})
	case e.clientIDDefault:
		out = append(out, kadm.ClientQuotaEntityComponent{Type: quota.EntityClientID})
	}
	if len(out) == 0 && !allowEmpty {
		return nil, errors.New("name the entity: --user NAME or --user-default, and/or --client-id NAME or --client-id-default")
	}
	return out, nil
}

func entityString(e kadm.ClientQuotaEntity) string {
	var parts []string
	for _, c := range e {
		n := "<default>"
		if c.Name != nil {
			n = *c.Name
		}
		parts = append(parts, c.Type+"="+n)
	}
	return strings.Join(parts, ",")
}

func alterQuotas(ctx context.Context, adm *kadm.Client, e kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return withBrokerMessage(r.Err, r.ErrMessage)
		}
	}
	return nil
}

// newQuotaSetCmd is `strata quota set`.
func newQuotaSetCmd(o *clientOpts) *cobra.Command {
	var e entityFlags
	var addConfig string
	vals := map[string]*float64{}
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Set quotas on an entity (kafka-configs --alter --add-config)",
		Example: `  strata quota set --user alice --producer-byte-rate 1048576
  strata quota set --user-default --consumer-byte-rate 10485760
  strata quota set --user alice --client-id etl \
      --add-config producer_byte_rate=2097152,controller_mutation_rate=10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ent, err := e.entity(false)
			if err != nil {
				return err
			}
			var ops []kadm.AlterClientQuotaOp
			for _, k := range quota.Keys() {
				if cmd.Flags().Changed(strings.ReplaceAll(k, "_", "-")) {
					ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: *vals[k]})
				}
			}
			for _, kv := range strings.Split(addConfig, ",") {
				if kv = strings.TrimSpace(kv); kv == "" {
					continue
				}
				k, v, ok := strings.Cut(kv, "=")
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if !ok || err != nil {
					return fmt.Errorf("--add-config %q: want key=number", kv)
				}
				ops = append(ops, kadm.AlterClientQuotaOp{Key: strings.TrimSpace(k), Value: f})
			}
			if len(ops) == 0 {
				return errors.New("name a quota: --producer-byte-rate, --consumer-byte-rate, --request-percentage, --controller-mutation-rate or --add-config")
			}
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				if err := alterQuotas(ctx, adm, ent, ops); err != nil {
					return fmt.Errorf("set quotas of %s: %w", entityString(ent), err)
				}
				for _, op := range ops {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: %s = %s\n", entityString(ent), op.Key, strconv.FormatFloat(op.Value, 'f', -1, 64))
				}
				return nil
			})
		},
	}
	e.register(cmd)
	docs := map[string]string{
		quota.ProducerByteRate:       "bytes per second the entity's produce requests may carry",
		quota.ConsumerByteRate:       "bytes per second the entity's fetch responses may carry",
		quota.RequestPercentage:      "percent of one request-handling thread the entity may keep busy (per broker)",
		quota.ControllerMutationRate: "partitions per second the entity may create or delete",
	}
	for _, k := range quota.Keys() {
		v := new(float64)
		vals[k] = v
		cmd.Flags().Float64Var(v, strings.ReplaceAll(k, "_", "-"), 0, k+": "+docs[k])
	}
	cmd.Flags().StringVar(&addConfig, "add-config", "", "quotas as kafka-configs takes them: key=value,key=value")
	return cmd
}

// quotaRow is one entity's quotas (-o json).
type quotaRow struct {
	Entity string             `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// newQuotaDescribeCmd is `strata quota describe`.
func newQuotaDescribeCmd(o *clientOpts) *cobra.Command {
	var e entityFlags
	var strict bool
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Describe quotas: all, or those of entities matching the flags (kafka-configs --describe)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ent, err := e.entity(true)
			if err != nil {
				return err
			}
			var comps []kadm.DescribeClientQuotaComponent
			for _, c := range ent {
				dc := kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name}
				if c.Name == nil {
					dc.MatchType = quota.MatchDefault
				}
				comps = append(comps, dc)
			}
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				d, err := adm.DescribeClientQuotas(ctx, strict, comps)
				if err != nil {
					return fmt.Errorf("describe quotas: %w", err)
				}
				rows := []quotaRow{}
				for _, q := range d {
					r := quotaRow{Entity: entityString(q.Entity), Values: map[string]float64{}}
					for _, v := range q.Values {
						r.Values[v.Key] = v.Value
					}
					rows = append(rows, r)
				}
				sort.Slice(rows, func(i, j int) bool { return rows[i].Entity < rows[j].Entity })
				return o.emit(cmd, rows, func(w io.Writer) error {
					t := newTable(w, "ENTITY", "QUOTA", "VALUE")
					for _, r := range rows {
						keys := make([]string, 0, len(r.Values))
						for k := range r.Values {
							keys = append(keys, k)
						}
						sort.Strings(keys)
						for _, k := range keys {
							t.row(r.Entity, k, strconv.FormatFloat(r.Values[k], 'f', -1, 64))
						}
					}
					return t.flush()
				})
			})
		},
	}
	e.register(cmd)
	cmd.Flags().BoolVar(&strict, "strict", false, "only entities with exactly the named components (e.g. --user alice: not user alice with a client id)")
	return cmd
}

// newQuotaDeleteCmd is `strata quota delete`.
func newQuotaDeleteCmd(o *clientOpts) *cobra.Command {
	var e entityFlags
	var keys []string
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete an entity's quotas, all or those named (kafka-configs --alter --delete-config)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ent, err := e.entity(false)
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				keys = quota.Keys()
			}
			for _, k := range keys {
				// Kafka's controller skips the removal of a key it does
				// not know (ClientQuotaControlManager), so a typo would
				// print "deleted" and delete nothing.
				if !slices.Contains(quota.Keys(), k) {
					hint := ""
					if near := suggest.Closest(k, quota.Keys()); near != "" {
						hint = fmt.Sprintf(": did you mean %s?", near)
					}
					return fmt.Errorf("--delete-config %s: not a quota key (%s)%s", k, strings.Join(quota.Keys(), ", "), hint)
				}
			}
			var ops []kadm.AlterClientQuotaOp
			for _, k := range keys {
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
			}
			return o.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				if err := alterQuotas(ctx, adm, ent, ops); err != nil {
					return fmt.Errorf("delete quotas of %s: %w", entityString(ent), err)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: deleted %s\n", entityString(ent), strings.Join(keys, ", "))
				return err
			})
		},
	}
	e.register(cmd)
	cmd.Flags().StringSliceVar(&keys, "delete-config", nil, "quota keys to delete (default: all four)")
	return cmd
}
