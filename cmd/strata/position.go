package main

// Start positions shared by `consume --from` and `group reset-offsets --to`.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// positionKind says what a position is relative to.
type positionKind int

const (
	atStart  positionKind = iota // log start offset
	atEnd                        // log end offset
	atMillis                     // first offset at or after a timestamp
	atOffset                     // a fixed offset
)

// position is a parsed --from or --to value.
type position struct {
	kind positionKind
	n    int64 // unix ms for atMillis, the offset for atOffset
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
		"use beginning, end, <offset>, offset:<n> or timestamp:<ms>"}
	toSyntax = positionSyntax{"--to", []string{"earliest"}, []string{"latest"},
		"use earliest, latest, offset:<n> or timestamp:<ms>"}
)

// parse reads s: a start or end word, timestamp:<ms>, offset:<n> or <n>.
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
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "offset:"), 10, 64)
	if err != nil || n < 0 {
		return position{}, fmt.Errorf("invalid %s %q: %s", ps.flag, s, ps.usage)
	}
	return position{kind: atOffset, n: n}, nil
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
	}
	return kgo.NewOffset().At(p.n)
}

// list resolves the position to an offset per partition of topic; a fixed
// offset is answered without asking the broker, for the partitions in parts.
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
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %q: %w", topic, err)
	}
	return listed, nil
}
