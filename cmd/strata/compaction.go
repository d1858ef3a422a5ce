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
	admin   string
	output  string
	timeout time.Duration
	all     bool
}

// summaryColumns are shown by default when present; --all shows every field.
var summaryColumns = []string{
	"topic", "partition", "log_start_offset", "first_dirty_offset", "log_end_offset", "dirty_ratio",
	"min_cleanable_dirty_ratio", "eligible", "in_progress", "rounds", "total_records_removed",
	"last_clean_duration_ms", "failures", "error",
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
	f.BoolVar(&o.all, "all", false, "show every status field, not only the summary columns")

	status := &cobra.Command{
		Use:   "status [topic]",
		Short: "Per-partition compaction status of compacted topics",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if len(args) == 1 {
				q.Set("topic", args[0])
			}
			return o.call(cmd, http.MethodGet, "/v1/compaction", q)
		},
	}
	var partition int32
	runCmd := &cobra.Command{
		Use:   "run <topic>",
		Short: "Clean a topic's partitions now and wait until done",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"topic": {args[0]}}
			if partition >= 0 {
				q.Set("partition", strconv.Itoa(int(partition)))
			}
			return o.call(cmd, http.MethodPost, "/v1/compaction/run", q)
		},
	}
	runCmd.Flags().Int32Var(&partition, "partition", -1, "only this partition (default all)")
	cmd.AddCommand(status, runCmd)
	return cmd
}

// call performs one admin API request and prints the JSON result.
func (o *adminOpts) call(cmd *cobra.Command, method, path string, q url.Values) error {
	if err := checkOutput(o.output); err != nil {
		return err
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
		return fmt.Errorf("admin API request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach admin API at %s: %w", base, unwrapURLErr(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read admin API response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return adminError(resp.Status, body)
	}
	if o.output == "json" {
		var buf bytes.Buffer
		if err := json.Indent(&buf, body, "", "  "); err != nil {
			return fmt.Errorf("admin API returned invalid JSON: %w", err)
		}
		buf.WriteByte('\n')
		_, err := cmd.OutOrStdout().Write(buf.Bytes())
		return err
	}
	rows, err := decodeRows(body)
	if err != nil {
		return err
	}
	var only []string
	if !o.all {
		only = summaryColumns
	}
	return printRows(cmd.OutOrStdout(), rows, only)
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
