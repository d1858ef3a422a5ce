package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/internal/parallel"
	"github.com/twmb/franz-go/pkg/kadm"
)

type groupRow struct {
	Group        string
	Type         string // classic or consumer
	ProtocolType string
	State        string
	Members      int
	Lag          int64
	Partitions   int
}

func (c *Console) groups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	listed, err := c.kafkaFor(ctx).adm.ListGroups(ctx)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("list groups: %w", err))
		return
	}
	names := listed.Groups()
	sort.Strings(names)
	members := c.kafkaFor(ctx).memberCounts(ctx, listed)
	lags, err := c.kafkaFor(ctx).lags(ctx, names...)
	if err != nil {
		lags = nil
	}
	var rowsOut []groupRow
	for _, g := range names {
		lg := listed[g]
		row := groupRow{Group: g, Type: groupType(lg), ProtocolType: lg.ProtocolType, State: lg.State, Members: members[g], Lag: -1}
		if rows, ok := lags[g]; ok {
			row.Lag, row.Partitions = totalLag(rows), len(rows)
		}
		rowsOut = append(rowsOut, row)
	}
	c.render(w, r, http.StatusOK, "groups", "Consumer groups", "groups", rowsOut)
}

// groupType is "classic" or "consumer" (KIP-848), from ListGroups v5.
func groupType(lg kadm.ListedGroup) string {
	if lg.GroupType != "" {
		return lg.GroupType
	}
	return "classic"
}

// memberCounts describes the listed groups (each by its protocol's
// describe API) and counts their members.
func (k *kafka) memberCounts(ctx context.Context, listed kadm.ListedGroups) map[string]int {
	out := map[string]int{}
	var classic, consumer []string
	for g, lg := range listed {
		if groupType(lg) == "consumer" {
			consumer = append(consumer, g)
		} else {
			classic = append(classic, g)
		}
	}
	if len(classic) > 0 {
		if dg, err := k.adm.DescribeGroups(ctx, classic...); err == nil {
			for g, d := range dg {
				out[g] = len(d.Members)
			}
		}
	}
	if len(consumer) > 0 {
		if dg, err := k.adm.DescribeConsumerGroups(ctx, consumer...); err == nil {
			for g, d := range dg {
				out[g] = len(d.Members)
			}
		}
	}
	return out
}

type memberRow struct {
	ID         string
	InstanceID string
	ClientID   string
	Host       string
	Epoch      string
	Assigned   []string // "topic: 0, 1, 2"
	Subscribed string
}

type groupData struct {
	Group        string
	Type         string
	ProtocolType string
	Protocol     string
	State        string
	Epoch        string
	Members      []memberRow
	Offsets      []groupLag
	TotalLag     int64
	LagPlot      plot
	Topics       []string // topics to reset: with commits first, then all
	Stopped      bool     // Empty or Dead: offsets may be reset, the group deleted
}

// describeGroup describes one group by its protocol.
func (k *kafka) describeGroup(ctx context.Context, group string) (groupData, error) {
	d := groupData{Group: group}
	listed, err := k.adm.ListGroups(ctx)
	if err != nil {
		return d, fmt.Errorf("list groups: %w", err)
	}
	lg, ok := listed[group]
	if !ok {
		return d, errNoGroup
	}
	d.Type, d.ProtocolType, d.State = groupType(lg), lg.ProtocolType, lg.State
	if d.Type == "consumer" {
		dg, err := k.adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return d, fmt.Errorf("describe group %q: %w", group, err)
		}
		g := dg[group]
		if g.Err != nil {
			return d, fmt.Errorf("describe group %q: %w", group, g.Err)
		}
		d.State, d.Protocol, d.Epoch = g.State, g.AssignorName, strconv.Itoa(int(g.Epoch))
		for _, m := range g.Members {
			row := memberRow{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Epoch: strconv.Itoa(int(m.MemberEpoch)),
				Assigned: setText(m.Assignment), Subscribed: strings.Join(m.SubscribedTopics, ", ")}
			if m.InstanceID != nil {
				row.InstanceID = *m.InstanceID
			}
			d.Members = append(d.Members, row)
		}
	} else {
		dg, err := k.adm.DescribeGroups(ctx, group)
		if err != nil {
			return d, fmt.Errorf("describe group %q: %w", group, err)
		}
		g := dg[group]
		if g.Err != nil {
			return d, fmt.Errorf("describe group %q: %w", group, g.Err)
		}
		d.State, d.Protocol, d.ProtocolType = g.State, g.Protocol, g.ProtocolType
		for _, m := range g.Members {
			row := memberRow{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
			if m.InstanceID != nil {
				row.InstanceID = *m.InstanceID
			}
			if ca, ok := m.Assigned.AsConsumer(); ok {
				set := kadm.TopicsSet{}
				for _, t := range ca.Topics {
					set.Add(t.Topic, t.Partitions...)
				}
				row.Assigned = setText(set)
			}
			if cm, ok := m.Join.AsConsumer(); ok {
				row.Subscribed = strings.Join(cm.Topics, ", ")
			}
			d.Members = append(d.Members, row)
		}
	}
	d.Stopped = d.State == "Empty" || d.State == "Dead"
	return d, nil
}

var errNoGroup = errors.New("no such group")

// setText shows a topic set as "topic: 0, 1, 2" lines.
func setText(s kadm.TopicsSet) []string {
	var out []string
	s.EachPartitions(func(t string, ps []int32) {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, t+": "+fmtIDs(ps))
	})
	sort.Strings(out)
	return out
}

func (c *Console) group(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	ctx, cancel := reqCtx(r)
	defer cancel()
	// The page's three questions are independent: ask them at once.
	var (
		d                  groupData
		lags               map[string][]groupLag
		md                 kadm.Metadata
		err, lagErr, mdErr error
	)
	parallel.Do(
		func() { d, err = c.kafkaFor(ctx).describeGroup(ctx, group) },
		func() { lags, lagErr = c.kafkaFor(ctx).lags(ctx, group) },
		func() { md, mdErr = c.kafkaFor(ctx).metadata(ctx) },
	)
	if errors.Is(err, errNoGroup) {
		c.fail(w, r, http.StatusNotFound, fmt.Errorf("no group %q", group))
		return
	}
	if err == nil {
		err = lagErr
	}
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	d.Offsets = lags[group]
	d.TotalLag = totalLag(d.Offsets)
	// The history was sampled by the broker itself: its plot is shown
	// only when this user's own OffsetFetch saw every topic it sums.
	seen := map[string]bool{}
	for _, o := range d.Offsets {
		seen[o.Topic] = true
	}
	var lagHist []point
	if c.hist.lagCovered(group, seen) {
		lagHist = c.hist.get(lagKey(group))
	}
	d.LagPlot = newPlot("Total lag of "+group, lagHist, 480, 100, func(f float64) string { return fmtNum(int64(f)) }, -1, 0)
	if mdErr != nil {
		md = kadm.Metadata{}
	}
	d.Topics = resetTopics(md, d.Offsets)
	c.render(w, r, http.StatusOK, "group", group, "groups", d)
}

// maxResetTopics bounds the topics a reset form suggests: those with
// commits, then others up to this many (any name can be typed).
const maxResetTopics = 200

// resetTopics lists the topics a reset form suggests: those with commits
// first, then other topics, up to maxResetTopics.
func resetTopics(md kadm.Metadata, offs []groupLag) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range offs {
		if !seen[o.Topic] {
			seen[o.Topic] = true
			out = append(out, o.Topic)
		}
	}
	var rest []string
	for name, t := range md.Topics {
		if !seen[name] && !t.IsInternal {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	if n := maxResetTopics - len(out); len(rest) > n {
		rest = rest[:max(0, n)]
	}
	return append(out, rest...)
}

// resetRequest is a reset's parameters, as the CLI's reset-offsets takes
// them: a topic, optional partitions, and a target.
type resetRequest struct {
	Topic      string
	Partitions []int32 // nil: all
	To         string  // earliest, latest, offset, timestamp, shift
	Value      string
}

func parseReset(get func(string) string) (resetRequest, error) {
	rr := resetRequest{Topic: strings.TrimSpace(get("topic")), To: get("to"), Value: strings.TrimSpace(get("value"))}
	if rr.Topic == "" {
		return rr, errors.New("choose a topic")
	}
	switch rr.To {
	case "earliest", "latest", "offset", "timestamp", "shift":
	default:
		return rr, fmt.Errorf("unknown target %q", rr.To)
	}
	if s := strings.TrimSpace(get("partitions")); s != "" && s != "all" {
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
			p, err := strconv.ParseInt(f, 10, 32)
			if err != nil || p < 0 {
				return rr, fmt.Errorf("bad partition %q", f)
			}
			rr.Partitions = append(rr.Partitions, int32(p))
		}
	}
	return rr, nil
}

func (rr resetRequest) query() url.Values {
	v := url.Values{}
	v.Set("topic", rr.Topic)
	v.Set("to", rr.To)
	if rr.Value != "" {
		v.Set("value", rr.Value)
	}
	if len(rr.Partitions) > 0 {
		v.Set("partitions", fmtIDs(rr.Partitions))
	}
	return v
}

// resetRow is one partition of a reset plan.
type resetRow struct {
	Partition  int32
	Current    int64 // -1: no committed offset
	New        int64 // -1: left alone (Note says why)
	Start, End int64
	Note       string
}

// resetPlan is what a reset will commit.
type resetPlan struct {
	Request resetRequest
	Rows    []resetRow
	// Digest identifies the plan: execute commits only when it recomputes
	// the same plan the preview showed.
	Digest string
}

// planReset computes the offsets a reset commits, as Kafka's
// kafka-consumer-groups.sh --reset-offsets does: targets outside
// [log start, end] are clamped to it. Preview and execute both call it.
func (k *kafka) planReset(ctx context.Context, group string, rr resetRequest) (resetPlan, error) {
	plan := resetPlan{Request: rr}
	md, err := k.metadata(ctx, rr.Topic)
	if err != nil {
		return plan, err
	}
	t, ok := md.Topics[rr.Topic]
	if !ok || t.Err != nil {
		return plan, fmt.Errorf("no topic %q", rr.Topic)
	}
	parts := rr.Partitions
	if len(parts) == 0 {
		for p := range t.Partitions {
			parts = append(parts, p)
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		if _, ok := t.Partitions[p]; !ok {
			return plan, fmt.Errorf("topic %q has no partition %d", rr.Topic, p)
		}
	}
	start, end, err := k.offsets(ctx, rr.Topic)
	if err != nil {
		return plan, err
	}
	committed, err := k.adm.FetchOffsetsForTopics(ctx, group, rr.Topic)
	if err != nil {
		return plan, fmt.Errorf("fetch offsets of %q: %w", group, err)
	}
	var n int64
	var at kadm.ListedOffsets
	switch rr.To {
	case "offset", "shift":
		if n, err = strconv.ParseInt(rr.Value, 10, 64); err != nil || (rr.To == "offset" && n < 0) {
			return plan, fmt.Errorf("%s needs a whole number, not %q", rr.To, rr.Value)
		}
	case "timestamp":
		ts, err := parseTime(rr.Value)
		if err != nil {
			return plan, err
		}
		if at, err = k.adm.ListOffsetsAfterMilli(ctx, ts.UnixMilli(), rr.Topic); err != nil {
			return plan, fmt.Errorf("offsets for time: %w", err)
		}
	}
	for _, p := range parts {
		row := resetRow{Partition: p, Current: -1, New: -1, Start: -1, End: -1}
		so, ok1 := start.Lookup(rr.Topic, p)
		eo, ok2 := end.Lookup(rr.Topic, p)
		if !ok1 || !ok2 || so.Err != nil || eo.Err != nil {
			row.Note = "offsets unavailable: left alone"
			plan.Rows = append(plan.Rows, row)
			continue
		}
		row.Start, row.End = so.Offset, eo.Offset
		if o, ok := committed.Lookup(rr.Topic, p); ok && o.Err == nil && o.At >= 0 {
			row.Current = o.At
		}
		target := int64(-1)
		switch rr.To {
		case "earliest":
			target = row.Start
		case "latest":
			target = row.End
		case "offset":
			target = n
		case "timestamp":
			target = row.End // no record at or after the time: the end
			if o, ok := at.Lookup(rr.Topic, p); ok && o.Err == nil && o.Offset >= 0 {
				target = o.Offset
			}
		case "shift":
			if row.Current < 0 {
				row.Note = "no committed offset to shift: left alone"
				plan.Rows = append(plan.Rows, row)
				continue
			}
			target = row.Current + n
		}
		switch {
		case target < row.Start:
			row.New, row.Note = row.Start, fmt.Sprintf("%d is before the log start: clamped", target)
		case target > row.End:
			row.New, row.Note = row.End, fmt.Sprintf("%d is past the end: clamped", target)
		default:
			row.New = target
		}
		plan.Rows = append(plan.Rows, row)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", group, rr.Topic)
	for _, row := range plan.Rows {
		fmt.Fprintf(h, "%d=%d;", row.Partition, row.New)
	}
	plan.Digest = hex.EncodeToString(h.Sum(nil))[:16]
	return plan, nil
}

type resetData struct {
	Group   string
	State   string
	Stopped bool
	Plan    resetPlan
	Changes int
	Query   string
}

func (c *Console) resetPreview(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	back := "/groups/" + url.PathEscape(group)
	rr, err := parseReset(r.URL.Query().Get)
	if err != nil {
		c.redirect(w, r, back+"#reset", flash{Error: true, Text: err.Error()})
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	gd, err := c.kafkaFor(ctx).describeGroup(ctx, group)
	if err != nil && !errors.Is(err, errNoGroup) {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	if errors.Is(err, errNoGroup) {
		gd.State, gd.Stopped = "Dead", true // committing creates the group, as the CLI does
	}
	plan, err := c.kafkaFor(ctx).planReset(ctx, group, rr)
	if err != nil {
		c.redirect(w, r, back+"#reset", flash{Error: true, Text: err.Error()})
		return
	}
	d := resetData{Group: group, State: gd.State, Stopped: gd.Stopped, Plan: plan, Query: rr.query().Encode()}
	for _, row := range plan.Rows {
		if row.New >= 0 && row.New != row.Current {
			d.Changes++
		}
	}
	c.render(w, r, http.StatusOK, "reset", group+" · reset offsets", "groups", d)
}

// resetExecute commits the plan the preview showed: it recomputes the
// plan and commits only if it is the same (new records or commits since
// the preview send the user back to a new preview), and only while the
// group has no members, as the CLI requires.
func (c *Console) resetExecute(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	back := "/groups/" + url.PathEscape(group)
	rr, err := parseReset(r.PostFormValue)
	if err != nil {
		c.redirect(w, r, back+"#reset", flash{Error: true, Text: err.Error()})
		return
	}
	preview := back + "/reset?" + rr.query().Encode()
	ctx, cancel := reqCtx(r)
	defer cancel()
	gd, err := c.kafkaFor(ctx).describeGroup(ctx, group)
	if err != nil && !errors.Is(err, errNoGroup) {
		c.redirect(w, r, preview, flash{Error: true, Text: err.Error()})
		return
	}
	if err == nil && !gd.Stopped {
		c.redirect(w, r, preview, flash{Error: true, Text: fmt.Sprintf("group %q has active members (state %s): stop its consumers first", group, gd.State)})
		return
	}
	plan, err := c.kafkaFor(ctx).planReset(ctx, group, rr)
	if err != nil {
		c.redirect(w, r, preview, flash{Error: true, Text: err.Error()})
		return
	}
	if plan.Digest != r.PostFormValue("digest") {
		c.redirect(w, r, preview, flash{Error: true, Text: "the offsets changed since the preview (new records or commits): nothing was reset; review this new preview"})
		return
	}
	os := kadm.Offsets{}
	n := 0
	for _, row := range plan.Rows {
		if row.New >= 0 {
			os.Add(kadm.Offset{Topic: rr.Topic, Partition: row.Partition, At: row.New, LeaderEpoch: -1})
			n++
		}
	}
	if n == 0 {
		c.redirect(w, r, preview, flash{Error: true, Text: "nothing to reset"})
		return
	}
	resps, err := c.kafkaFor(ctx).adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		c.redirect(w, r, preview, flash{Error: true, Text: fmt.Sprintf("reset offsets of %q: %v", group, err)})
		return
	}
	c.logger.Info("group offsets reset from the console", "group", group, "topic", rr.Topic, "to", rr.To, "value", rr.Value, "partitions", n, "user", sessionFrom(r.Context()).user)
	c.redirect(w, r, back, flash{Text: fmt.Sprintf("Reset %d partition(s) of %s for group %s.", n, rr.Topic, group)})
}

func (c *Console) deleteGroup(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	ctx, cancel := reqCtx(r)
	defer cancel()
	resp, err := c.kafkaFor(ctx).adm.DeleteGroup(ctx, group)
	if err == nil {
		err = resp.Err
		if err != nil {
			err = kafkaError(err, resp.ErrMessage)
		}
	}
	if err != nil {
		c.redirect(w, r, "/groups/"+url.PathEscape(group), flash{Error: true, Text: fmt.Sprintf("group %q not deleted: %v", group, err)})
		return
	}
	c.logger.Info("group deleted from the console", "group", group, "user", sessionFrom(r.Context()).user)
	c.redirect(w, r, "/groups", flash{Text: fmt.Sprintf("Group %s deleted.", group)})
}
