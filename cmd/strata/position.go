package main

// Start positions shared by `consume --from`, `group reset-offsets --to`
// and `topic trim --before`.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// positionKind says what a position is relative to.
type positionKind int

const (
	atStart    positionKind = iota // log start offset
	atEnd                          // log end offset
	atMillis                       // first offset at or after a timestamp
	atOffset                       // a fixed offset
	atEndMinus                     // n records before the end (not before the start)
)

// position is a parsed --from or --to value.
type position struct {
	kind positionKind
	n    int64 // unix ms for atMillis, the offset for atOffset, the count for atEndMinus
}

// positionSyntax is the flag name, the words accepted for the log start
// and end, and the hint given for a value that is none of the forms.
type positionSyntax struct {
	flag       string
	startWords []string
	endWords   []string
	usage      string
}

var (
	fromSyntax = positionSyntax{"--from", []string{"beginning", "earliest"}, []string{"end", "latest"},
		"use beginning, end, an offset (42), -N (the last N records of each partition), a time (2026-12-01T10:00:00Z, " +
			"timestamp:<unix ms>) or an age (-10m, -2h, -1d)"}
	toSyntax = positionSyntax{"--to", []string{"earliest"}, []string{"latest"},
		"use earliest, latest, an offset (offset:42), a time (2026-12-01T10:00:00Z, timestamp:<unix ms>) or an age (-10m, -2h, -1d)"}
	trimSyntax = positionSyntax{"--before", nil, []string{"end", "latest"},
		"use an offset (42), a time (2026-12-01T10:00:00Z, timestamp:<unix ms>), an age (-7d) or end"}
)

// parse reads s: a start or end word, timestamp:<ms>, an RFC 3339 time,
// -<duration> (that long ago), -<n> (n before the end; --from only),
// offset:<n> or <n>.
func (ps positionSyntax) parse(s string) (position, error) {
	switch {
	case slices.Contains(ps.startWords, s):
		return position{kind: atStart}, nil
	case slices.Contains(ps.endWords, s):
		return position{kind: atEnd}, nil
	case strings.HasPrefix(s, "timestamp:"):
		ms, err := strconv.ParseInt(strings.TrimPrefix(s, "timestamp:"), 10, 64)
		if err != nil {
			return position{}, fmt.Errorf("invalid %s %q: timestamp must be unix milliseconds", ps.flag, s)
		}
		return position{kind: atMillis, n: ms}, nil
	case strings.HasPrefix(s, "-") && len(s) > 1:
		if n, err := strconv.ParseInt(s[1:], 10, 64); err == nil {
			if ps.flag != "--from" {
				return position{}, fmt.Errorf("invalid %s %q: %s", ps.flag, s, ps.usage)
			}
			return position{kind: atEndMinus, n: n}, nil
		}
		if d, ok := parseAge(s[1:]); ok {
			return position{kind: atMillis, n: time.Now().Add(-d).UnixMilli()}, nil
		}
		return position{}, fmt.Errorf("invalid %s %q: %s", ps.flag, s, ps.usage)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return position{kind: atMillis, n: t.UnixMilli()}, nil
	}
	if len(s) >= 10 && s[4] == '-' && s[7] == '-' { // a date, without a zone or badly formed
		return position{}, fmt.Errorf("invalid %s %q: a time must be RFC 3339 with a zone, e.g. 2026-12-01T10:00:00Z or 2026-12-01T11:00:00+01:00", ps.flag, s)
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "offset:"), 10, 64)
	if err != nil || n < 0 {
		return position{}, fmt.Errorf("invalid %s %q: %s", ps.flag, s, ps.usage)
	}
	return position{kind: atOffset, n: n}, nil
}

// ageRE is a duration with an optional leading number of days ("1d12h").
var ageRE = regexp.MustCompile(`^(?:(\d+)d)?(.*)$`)

// parseAge parses a Go duration that may start with days ("10m", "2h30m",
// "1d", "1d12h").
func parseAge(s string) (time.Duration, bool) {
	m := ageRE.FindStringSubmatch(s)
	var d time.Duration
	if m[1] != "" {
		days, err := strconv.Atoi(m[1])
		if err != nil {
			return 0, false
		}
		d = time.Duration(days) * 24 * time.Hour
	}
	if m[2] != "" {
		rest, err := time.ParseDuration(m[2])
		if err != nil || rest < 0 {
			return 0, false
		}
		d += rest
	}
	return d, s != "" && d > 0
}

// kgoOffset is the position as a consumer start offset.
func (p position) kgoOffset() kgo.Offset {
	switch p.kind {
	case atStart:
		return kgo.NewOffset().AtStart()
	case atEnd:
		return kgo.NewOffset().AtEnd()
	case atMillis:
		return kgo.NewOffset().AfterMilli(p.n)
	case atEndMinus:
		return kgo.NewOffset().AtEnd().Relative(-p.n)
	}
	return kgo.NewOffset().At(p.n)
}

// list resolves the position to an offset per partition of topic; a fixed
// offset is answered without asking the broker, for the partitions in parts.
// N before the end stops at the log start.
func (p position) list(ctx context.Context, adm *kadm.Client, topic string, parts map[int32]bool) (kadm.ListedOffsets, error) {
	var listed kadm.ListedOffsets
	var err error
	switch p.kind {
	case atStart:
		listed, err = adm.ListStartOffsets(ctx, topic)
	case atEnd:
		listed, err = adm.ListEndOffsets(ctx, topic)
	case atMillis:
		listed, err = adm.ListOffsetsAfterMilli(ctx, p.n, topic)
	case atOffset:
		listed = kadm.ListedOffsets{topic: {}}
		for part := range parts {
			listed[topic][part] = kadm.ListedOffset{Topic: topic, Partition: part, Offset: p.n}
		}
	case atEndMinus:
		var starts kadm.ListedOffsets
		if starts, err = adm.ListStartOffsets(ctx, topic); err == nil {
			listed, err = adm.ListEndOffsets(ctx, topic)
		}
		if err == nil {
			for part, lo := range listed[topic] {
				if s, ok := starts.Lookup(topic, part); ok && lo.Err == nil {
					lo.Offset = max(lo.Offset-p.n, s.Offset)
					listed[topic][part] = lo
				}
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %q: %w", topic, err)
	}
	return listed, nil
}
