package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// adminOpts are the flags of commands that use the broker's HTTP admin API
// (served on strata.metrics.listener).
type adminOpts struct {
	admin    string
	output   string
	timeout  time.Duration
	all      bool
	internal bool
}

// newCompactionCmd is `strata compaction status|run`.
func newCompactionCmd() *cobra.Command {
	o := &adminOpts{}
	cmd := &cobra.Command{
		Use:   "compaction",
		Short: "Show and trigger log compaction (broker admin API on the metrics listener)",
	}
	def := os.Getenv("STRATA_ADMIN")
	if def == "" {
		def = "http://127.0.0.1:9644"
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.admin, "admin", def, "broker admin API base URL (strata.metrics.listener; env STRATA_ADMIN)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to wait for the broker")
	f.BoolVar(&o.all, "all", false, "status: show every field the admin API returns (wide)")

	status := &cobra.Command{
		Use:   "status [topic]",
		Short: "Compaction state of compacted topics (internal topics with --internal)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if len(args) == 1 {
				q.Set("topic", args[0])
			}
			body, err := o.call(cmd, http.MethodGet, "/v1/compaction", q)
			if err != nil {
				return err
			}
			return o.printStatus(cmd, body, len(args) == 1)
		},
	}
	status.Flags().BoolVar(&o.internal, "internal", false, "include internal topics (__consumer_offsets, __transaction_state)")
	var partition int32
	runCmd := &cobra.Command{
		Use:   "run <topic>",
		Short: "Clean a topic's partitions now, wait, and say what was removed or why nothing was",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"topic": {args[0]}}
			if partition >= 0 {
				q.Set("partition", strconv.Itoa(int(partition)))
			}
			before, err := o.call(cmd, http.MethodGet, "/v1/compaction", url.Values{"topic": {args[0]}})
			if err != nil {
				return err
			}
			after, err := o.call(cmd, http.MethodPost, "/v1/compaction/run", q)
			if err != nil {
				return err
			}
			if o.output == "json" {
				return writeIndented(cmd.OutOrStdout(), after)
			}
			return printVerdict(cmd.OutOrStdout(), args[0], before, after)
		},
	}
	runCmd.Flags().Int32Var(&partition, "partition", -1, "only this partition (default all)")
	cmd.AddCommand(status, runCmd)
	return cmd
}

// call performs one admin API request and returns the JSON body of a 2xx
// answer; any other answer is an error with the API's message.
func (o *adminOpts) call(cmd *cobra.Command, method, path string, q url.Values) ([]byte, error) {
	if err := checkOutput(o.output); err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(o.admin, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("admin API request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach admin API at %s: %w", base, unwrapURLErr(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read admin API response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, adminError(resp.Status, body)
	}
	return body, nil
}

// writeIndented prints a JSON body indented.
func writeIndented(w io.Writer, body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "  "); err != nil {
		return fmt.Errorf("admin API returned invalid JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// partStatus is the part of the API's per-partition status the CLI reads.
type partStatus struct {
	Topic               string  `json:"topic"`
	Partition           int32   `json:"partition"`
	FirstDirtyOffset    int64   `json:"first_dirty_offset"`
	FirstUncleanable    int64   `json:"first_uncleanable_offset"`
	LogEndOffset        int64   `json:"log_end_offset"`
	DirtyRatio          float64 `json:"dirty_ratio"`
	MinCleanableRatio   float64 `json:"min_cleanable_dirty_ratio"`
	Eligible            bool    `json:"eligible"`
	InProgress          bool    `json:"in_progress"`
	Internal            bool    `json:"internal"`
	ActiveSegmentBase   int64   `json:"active_segment_base_offset"`
	SegmentMs           int64   `json:"segment_ms"`
	SegmentBytes        int64   `json:"segment_bytes"`
	MinCompactionLagMs  int64   `json:"min_compaction_lag_ms"`
	Rounds              int64   `json:"rounds"`
	TotalRecordsRemoved int64   `json:"total_records_removed"`
	TotalTombstones     int64   `json:"total_tombstones_removed"`
	LastCleanTime       *string `json:"last_clean_time"`
	Uncleanable         bool    `json:"uncleanable"`
	UncleanableReason   string  `json:"uncleanable_reason"`
	Failures            int     `json:"failures"`
	MaxCompactionLagDue bool    `json:"max_compaction_lag_due"`
}

// printStatus prints `compaction status`: a table that fits 80 columns
// (--all: every field the API returns), internal topics only with
// --internal or when named.
func (o *adminOpts) printStatus(cmd *cobra.Command, body []byte, named bool) error {
	var parts []partStatus
	if err := json.Unmarshal(body, &parts); err != nil {
		return fmt.Errorf("admin API returned invalid JSON: %w", err)
	}
	keep := func(p partStatus) bool { return named || o.internal || !p.Internal }
	if o.output == "json" {
		// Keep the API's field order: filter the raw elements.
		var raw []json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			return fmt.Errorf("admin API returned invalid JSON: %w", err)
		}
		kept := []json.RawMessage{}
		for i, r := range raw {
			if i < len(parts) && keep(parts[i]) {
				kept = append(kept, r)
			}
		}
		return writeJSON(cmd.OutOrStdout(), kept)
	}
	if o.all {
		rows, err := decodeRows(body)
		if err != nil {
			return err
		}
		var kept []map[string]any
		for i, r := range rows {
			if i < len(parts) && keep(parts[i]) {
				kept = append(kept, r)
			}
		}
		return printRows(cmd.OutOrStdout(), kept, nil)
	}
	var shown []partStatus
	hidden := 0
	for _, p := range parts {
		if keep(p) {
			shown = append(shown, p)
		} else {
			hidden++
		}
	}
	w := cmd.OutOrStdout()
	if len(shown) == 0 {
		fmt.Fprintln(w, "(no compacted partitions)")
	} else {
		err := writeTable(w, shown, func(p partStatus) []any {
			return []any{p.Topic, p.Partition, percent(p.DirtyRatio), percent(p.MinCleanableRatio), compactionState(p),
				p.Rounds, p.TotalRecordsRemoved, lastCleaned(p.LastCleanTime)}
		}, "TOPIC", "PART", "DIRTY", "MIN", "STATE", "ROUNDS", "REMOVED", "LAST-CLEANED")
		if err != nil {
			return err
		}
	}
	if hidden > 0 {
		fmt.Fprintf(w, "(%d partitions of internal topics not shown: --internal)\n", hidden)
	}
	return nil
}

// percent prints a ratio as a whole percentage.
func percent(r float64) string { return strconv.Itoa(int(r*100+0.5)) + "%" }

// compactionState is one word for a partition's state.
func compactionState(p partStatus) string {
	switch {
	case p.InProgress:
		return "cleaning"
	case p.Uncleanable:
		return fmt.Sprintf("failing(%d)", p.Failures)
	case p.Eligible:
		return "due"
	}
	return "idle"
}

// lastCleaned prints when the last round ran, as an age.
func lastCleaned(ts *string) string {
	if ts == nil {
		return "never"
	}
	t, err := time.Parse(time.RFC3339Nano, *ts)
	if err != nil {
		return *ts
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

// printVerdict says what `compaction run` did: records removed per
// partition outcome, or why there was nothing to clean.
func printVerdict(w io.Writer, topic string, beforeBody, afterBody []byte) error {
	var before, after []partStatus
	if err := json.Unmarshal(beforeBody, &before); err != nil {
		return fmt.Errorf("admin API returned invalid JSON: %w", err)
	}
	if err := json.Unmarshal(afterBody, &after); err != nil {
		return fmt.Errorf("admin API returned invalid JSON: %w", err)
	}
	prev := map[int32]partStatus{}
	for _, p := range before {
		prev[p.Partition] = p
	}
	var removedParts, cleanNothing, activeOnly, lagged, clean []partStatus
	var removed, tombs, activeRecords int64
	for _, p := range after {
		b := prev[p.Partition]
		r := p.TotalRecordsRemoved - b.TotalRecordsRemoved
		switch {
		case r > 0:
			removed += r
			tombs += p.TotalTombstones - b.TotalTombstones
			removedParts = append(removedParts, p)
		case p.Rounds > b.Rounds:
			cleanNothing = append(cleanNothing, p)
		case p.FirstDirtyOffset >= p.LogEndOffset:
			clean = append(clean, p)
		case p.FirstUncleanable >= p.ActiveSegmentBase:
			activeOnly = append(activeOnly, p)
			activeRecords += p.LogEndOffset - max(p.FirstDirtyOffset, p.ActiveSegmentBase)
		default:
			lagged = append(lagged, p)
		}
	}
	if len(removedParts) > 0 {
		fmt.Fprintf(w, "removed %d %s", removed, plural(removed, "record", "records"))
		if tombs > 0 {
			fmt.Fprintf(w, " (%d %s)", tombs, plural(tombs, "tombstone", "tombstones"))
		}
		fmt.Fprintf(w, " from %q in %s\n", topic, partitions(len(removedParts)))
	}
	if len(cleanNothing) > 0 {
		fmt.Fprintf(w, "cleaned %s of %q: no record was superseded (each key appears once)\n", partitions(len(cleanNothing)), topic)
	}
	if len(activeOnly) > 0 {
		p := activeOnly[0]
		fmt.Fprintf(w, "nothing cleanable in %s of %q: %s %d %s written since the last cleaning %s in the active segment, "+
			"which is never cleaned; it rolls after segment.ms=%d (%s) or at segment.bytes=%d\n",
			partitions(len(activeOnly)), topic, allOr(activeRecords), activeRecords, plural(activeRecords, "record", "records"),
			plural(activeRecords, "is", "are"), p.SegmentMs, time.Duration(p.SegmentMs)*time.Millisecond, p.SegmentBytes)
	}
	if len(lagged) > 0 {
		p := lagged[0]
		fmt.Fprintf(w, "nothing cleanable yet in %s of %q: the records written since the last cleaning are newer than min.compaction.lag.ms=%d or part of an open transaction\n",
			partitions(len(lagged)), topic, p.MinCompactionLagMs)
	}
	if len(clean) > 0 {
		fmt.Fprintf(w, "%s of %q already clean: nothing written since the last cleaning\n", capitalize(partitions(len(clean))), topic)
	}
	return nil
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// partitions is "1 partition" or "N partitions".
func partitions(n int) string {
	return fmt.Sprintf("%d %s", n, plural(int64(n), "partition", "partitions"))
}

// allOr is "all" for several records, "the" for one.
func allOr(n int64) string {
	if n == 1 {
		return "the"
	}
	return "all"
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// unwrapURLErr drops a url.Error's method and URL, which the message
// already names.
func unwrapURLErr(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// adminError turns an error response ({"error": "..."} or text) into one line.
func adminError(status string, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return fmt.Errorf("%s", e.Error)
	}
	msg := strings.TrimSpace(string(body))
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if msg == "" {
		return fmt.Errorf("admin API: %s", status)
	}
	return fmt.Errorf("admin API: %s: %s", status, msg)
}

// decodeRows accepts a JSON array of objects or a single object.
func decodeRows(body []byte) ([]map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("admin API returned invalid JSON: %w", err)
	}
	switch x := v.(type) {
	case []any:
		rows := make([]map[string]any, 0, len(x))
		for _, it := range x {
			m, ok := it.(map[string]any)
			if !ok {
				m = map[string]any{"value": it}
			}
			rows = append(rows, m)
		}
		return rows, nil
	case map[string]any:
		return []map[string]any{x}, nil
	case nil:
		return nil, nil
	}
	return []map[string]any{{"value": v}}, nil
}

// printRows prints the union of the rows' fields as a table, topic and
// partition first, the rest alphabetically. When only is non-nil and some
// of its fields are present, just those are shown, in that order.
func printRows(w io.Writer, rows []map[string]any, only []string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "(no compacted partitions)")
		return err
	}
	keys := map[string]bool{}
	for _, r := range rows {
		for k := range r {
			keys[k] = true
		}
	}
	var cols []string
	if only != nil {
		for _, k := range only {
			if keys[k] {
				cols = append(cols, k)
			}
		}
		if len(cols) > 2 || (len(cols) > 0 && len(cols) == len(keys)) {
			keys = map[string]bool{}
		} else {
			cols = nil
		}
	}
	for _, k := range []string{"topic", "partition"} {
		if keys[k] {
			cols = append(cols, k)
			delete(keys, k)
		}
	}
	var rest []string
	for k := range keys {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	cols = append(cols, rest...)
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = strings.ToUpper(c)
	}
	t := newTable(w, header...)
	for _, r := range rows {
		cells := make([]any, len(cols))
		for i, c := range cols {
			cells[i] = cellString(r[c], r[c] != nil || hasKey(r, c))
		}
		t.row(cells...)
	}
	return t.flush()
}

// hasKey reports whether m has k (even with a null value).
func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// cellString prints one JSON value as a table cell: "-" when absent,
// null, "" for an empty string, JSON for objects and arrays.
func cellString(v any, present bool) string {
	if !present {
		return "-"
	}
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if x == "" {
			return `""`
		}
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
