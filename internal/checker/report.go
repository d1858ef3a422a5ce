package checker

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Note adds a line to the report's header (run parameters, faults).
func (r *Result) Note(key, value string) { r.extra[key] = value }

// maxListed bounds the anomalies of one type the text report spells out;
// the JSON form has them all.
const maxListed = 20

// WriteReport writes a readable report: what ran, counts, then every anomaly
// type with the operations involved.
func (r *Result) WriteReport(w io.Writer) error {
	var b strings.Builder
	verdict := "VALID: no anomaly found"
	if !r.Valid() {
		verdict = fmt.Sprintf("INVALID: %d anomalies", len(r.Anomalies))
	}
	fmt.Fprintf(&b, "# Strata fault-run report\n\n%s\n\n", verdict)
	if len(r.extra) > 0 {
		keys := make([]string, 0, len(r.extra))
		for k := range r.extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s: %s\n", k, r.extra[k])
		}
		b.WriteString("\n")
	}
	st := r.Stats
	b.WriteString("## Counts\n\n")
	fmt.Fprintf(&b, "records sent: %d (acknowledged %d, definitely failed or aborted %d, unknown %d)\n",
		st.Sends, st.AckedSends, st.FailedSends, st.UnknownSends)
	fmt.Fprintf(&b, "records read: %d (%d distinct values), partitions: %d, drained after healing: %v\n",
		st.RecordsRead, st.ValuesRead, st.Partitions, r.Drained)
	fmt.Fprintf(&b, "acknowledged but never read: %d; duplicates from non-idempotent producers (allowed): %d\n",
		r.Unseen, st.AllowedDuplicates)
	fmt.Fprintf(&b, "committed consume-transform-produce transactions: %d\n", st.ConsumeTxnsCommitted)
	kinds := make([]string, 0, len(st.Ops))
	for k := range st.Ops {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		m := st.Ops[Kind(k)]
		fmt.Fprintf(&b, "ops %-9s ok %d, fail %d, unknown %d\n", k, m[OK], m[Fail], m[Unknown])
	}
	for _, m := range []struct {
		label    string
		verdicts map[string]string
	}{{"linearizability of offsets (exact)", st.Linearizability}, {"linearizability of offsets (porcupine)", st.Porcupine}} {
		if len(m.verdicts) == 0 {
			continue
		}
		count := map[string]int{}
		for _, v := range m.verdicts {
			count[v]++
		}
		var parts []string
		for v, n := range count {
			parts = append(parts, fmt.Sprintf("%s: %d partition(s)", v, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(&b, "%s: %s\n", m.label, strings.Join(parts, "; "))
	}
	b.WriteString("\n## Anomalies\n\n")
	for _, t := range AllAnomalyTypes {
		fmt.Fprintf(&b, "%-22s %d\n", t, r.Counts[t])
	}
	for _, t := range AllAnomalyTypes {
		list := r.Of(t)
		if len(list) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s (%d)\n\n", t, len(list))
		for i, an := range list {
			if i == maxListed {
				fmt.Fprintf(&b, "... %d more in anomalies.json\n", len(list)-maxListed)
				break
			}
			fmt.Fprintf(&b, "- %s", an.TP)
			if an.Offset >= 0 {
				fmt.Fprintf(&b, " offset %d", an.Offset)
			}
			if len(an.Values) > 0 {
				fmt.Fprintf(&b, " values %s", strings.Join(head(an.Values, 4), ","))
			}
			fmt.Fprintf(&b, ": %s\n", an.Detail)
			if r.history != nil {
				for _, oi := range an.Ops {
					if oi >= 0 && oi < len(r.history.Ops) {
						fmt.Fprintf(&b, "    %s\n", r.history.Ops[oi].String())
					}
				}
			}
		}
	}
	if r.history != nil {
		var faults []string
		for i := range r.history.Ops {
			if op := &r.history.Ops[i]; op.Kind == KindNemesis {
				faults = append(faults, fmt.Sprintf("- [%s..%s] %s %s", time.Duration(op.Start).Round(time.Millisecond),
					time.Duration(op.End).Round(time.Millisecond), op.Status, op.Note))
			}
		}
		if len(faults) > 0 {
			fmt.Fprintf(&b, "\n## Faults (%d)\n\n%s\n", len(faults), strings.Join(faults, "\n"))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is a one-line form of the result for logs.
func (r *Result) Summary() string {
	var parts []string
	for _, t := range AllAnomalyTypes {
		if n := r.Counts[t]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", t, n))
		}
	}
	s := fmt.Sprintf("sent %d (acked %d, unknown %d, failed %d), read %d distinct", r.Stats.Sends, r.Stats.AckedSends,
		r.Stats.UnknownSends, r.Stats.FailedSends, r.Stats.ValuesRead)
	if len(parts) == 0 {
		return s + ": no anomalies"
	}
	return s + ": " + strings.Join(parts, " ")
}

// WriteJSON writes the whole result (every anomaly) as JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
