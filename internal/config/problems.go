package config

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong in a broker configuration.
type Problem struct {
	// Where locates it: "server.properties:24", "environment variable
	// STRATA_NODE_ID", or "" for a command-line flag or a rule between
	// settings.
	Where string
	// Err says what is wrong and what to do; it wraps ErrInvalid.
	Err error
}

// String is "where: message", or the message alone.
func (p Problem) String() string {
	if p.Where == "" {
		return p.Err.Error()
	}
	return p.Where + ": " + p.Err.Error()
}

// Problems is every problem found in a broker configuration, so that one
// run reports them all (LoadBroker). It wraps ErrInvalid.
type Problems []Problem

// Error is the one problem on one line, or a count followed by one
// indented line per problem.
func (ps Problems) Error() string {
	if len(ps) == 1 {
		return ps[0].String()
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d problems in the broker configuration:", len(ps))
	for _, p := range ps {
		sb.WriteString("\n  ")
		sb.WriteString(p.String())
	}
	return sb.String()
}

// Unwrap exposes ErrInvalid to errors.Is.
func (ps Problems) Unwrap() error { return ErrInvalid }
