package main

// Output of the admin commands: -o table|json, tab-aligned tables and
// indented JSON.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// checkOutput validates an -o/--output value.
func checkOutput(output string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("invalid output format %q: use table or json", output)
	}
	return nil
}

// emit prints v as JSON to stdout with -o json; otherwise it calls text
// with stdout to print the human-readable form.
func (o *clientOpts) emit(cmd *cobra.Command, v any, text func(w io.Writer) error) error {
	if o.output == "json" {
		return writeJSON(cmd.OutOrStdout(), v)
	}
	return text(cmd.OutOrStdout())
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table is a tab-aligned text table.
type table struct{ tw *tabwriter.Writer }

// newTable starts a table on w with one header row.
func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(anySlice(header)...)
	return t
}

// row adds one row, each cell printed with fmt.Sprint.
func (t *table) row(cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(t.tw, strings.Join(parts, "\t"))
}

// flush aligns and writes the rows.
func (t *table) flush() error { return t.tw.Flush() }

// writeTable prints one row per item under header.
func writeTable[T any](w io.Writer, items []T, cells func(T) []any, header ...string) error {
	t := newTable(w, header...)
	for _, it := range items {
		t.row(cells(it)...)
	}
	return t.flush()
}

// anySlice converts strings to cells.
func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// printEach prints format once per name (write errors ignored, as with
// the other one-line confirmations).
func printEach(w io.Writer, format string, names []string) error {
	for _, n := range names {
		fmt.Fprintf(w, format, n)
	}
	return nil
}

// topicID prints a topic id as Kafka does (Uuid.toString: URL-safe base64
// without padding, 22 characters), as kafka-topics and the broker's logs
// show it; kadm's TopicID.String uses standard base64 with padding.
func topicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
