// Package transcript runs data-driven transcript tests in the style of
// etcd raft's interaction tests: a testdata file is a sequence of blocks
//
//	# comments explaining the scenario
//	command arg key=value ...
//	----
//	expected output (no blank lines)
//
// separated by blank lines. A test hands each command to its handler and
// compares what it prints with the expected text; `go test -rewrite`
// writes what the code prints back into the files, so a change of
// behaviour shows up as a diff a reviewer reads against Kafka's documents.
package transcript

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the transcript tests (testdata/*.txt) with what the code prints")

// Command is one command of a transcript.
type Command struct {
	t    testing.TB
	Pos  string            // file:line, for messages
	Line string            // the whole command line
	Name string            // the first word
	Args []string          // the other words without '='
	Opts map[string]string // the key=value words
}

// Arg returns positional argument i, failing the test when it is missing.
func (c Command) Arg(i int) string {
	c.t.Helper()
	if i >= len(c.Args) {
		c.t.Fatalf("%s: %q needs at least %d arguments", c.Pos, c.Line, i+1)
	}
	return c.Args[i]
}

// Str returns option key, or def when absent.
func (c Command) Str(key, def string) string {
	if v, ok := c.Opts[key]; ok {
		return v
	}
	return def
}

// Int returns option key as an integer, or def when absent.
func (c Command) Int(key string, def int64) int64 {
	c.t.Helper()
	v, ok := c.Opts[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		c.t.Fatalf("%s: %s=%q: %v", c.Pos, key, v, err)
	}
	return n
}

// Duration returns option key (Go syntax: 500ms, 10s), or def when absent.
func (c Command) Duration(key string, def time.Duration) time.Duration {
	c.t.Helper()
	v, ok := c.Opts[key]
	if !ok {
		return def
	}
	return c.ParseDuration(v)
}

// ParseDuration parses s (Go syntax), failing the test on a bad value.
func (c Command) ParseDuration(s string) time.Duration {
	c.t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		c.t.Fatalf("%s: duration %q: %v", c.Pos, s, err)
	}
	return d
}

// Fatalf fails the test with the command's position.
func (c Command) Fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("%s: %s: %s", c.Pos, c.Line, fmt.Sprintf(format, args...))
}

// ErrorName is Kafka's name of an error code (UNKNOWN_MEMBER_ID, ...), "ok"
// for none, for printing responses.
func ErrorName(code int16) string {
	if code == 0 {
		return "ok"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return fmt.Sprintf("error %d", code)
}

// Run runs every file matching glob as a subtest: newHandler is called once
// per file for a fresh handler, which gets each command and returns its
// output (trailing newlines are ignored; "" prints nothing).
func Run(t *testing.T, glob string, newHandler func(t *testing.T) func(Command) string) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no transcripts match %s", glob)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runFile(t, f, newHandler(t)) })
	}
}

func runFile(t *testing.T, path string, handle func(Command) string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Comments and blank lines are kept as they are; each command's
	// expected output is compared and, with -rewrite, replaced.
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			out.WriteString(l + "\n")
			continue
		}
		pos := fmt.Sprintf("%s:%d", path, i+1)
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s: command %q is not followed by ----", pos, l)
		}
		var want []string
		for i += 2; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		i-- // the blank line (or the end) is the loop's
		c := Command{t: t, Pos: pos, Line: l, Opts: map[string]string{}}
		for j, w := range strings.Fields(l) {
			if j == 0 {
				c.Name = w
			} else if k, v, ok := strings.Cut(w, "="); ok {
				c.Opts[k] = v
			} else {
				c.Args = append(c.Args, w)
			}
		}
		got := strings.TrimRight(handle(c), "\n")
		if strings.Contains(got, "\n\n") {
			t.Fatalf("%s: output has a blank line:\n%s", pos, got)
		}
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s\n--- want\n%s\n--- got\n%s", pos, l, strings.Join(want, "\n"), got)
		}
		out.WriteString(l + "\n----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
