package console

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/internal/parallel"
	"github.com/twmb/franz-go/pkg/kadm"
)

// topicsPerPage is the topic list's page size: the list pages through
// thousands of topics instead of drawing them all (search finds any).
const topicsPerPage = 100

type topicsData struct {
	Query        string
	ShowInternal bool
	Topics       []topicInfo
	Total        int
	Hidden       int // internal topics not shown
	// Matches counts the topics the search matched; First and Last number
	// the ones on this page (from 1).
	Matches, First, Last int
	PrevURL, NextURL     string
}

func (c *Console) topics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	showInternal := r.URL.Query().Get("internal") == "1"
	md, err := c.kafkaFor(ctx).metadata(ctx)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	d := topicsData{Query: q, ShowInternal: showInternal, Total: len(md.Topics)}
	var names []string
	for name, t := range md.Topics {
		if t.IsInternal && !showInternal {
			d.Hidden++
			continue
		}
		if q != "" && !strings.Contains(strings.ToLower(name), strings.ToLower(q)) {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	d.Matches = len(names)
	page := 1
	if n, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && n > 1 {
		page = n
	}
	pages := max(1, (len(names)+topicsPerPage-1)/topicsPerPage)
	page = min(page, pages)
	start, end := (page-1)*topicsPerPage, min(page*topicsPerPage, len(names))
	names = names[start:end]
	d.First, d.Last = start+1, end
	pageURL := func(n int) string {
		v := url.Values{}
		if q != "" {
			v.Set("q", q)
		}
		if showInternal {
			v.Set("internal", "1")
		}
		v.Set("page", strconv.Itoa(n))
		return "/topics?" + v.Encode()
	}
	if page > 1 {
		d.PrevURL = pageURL(page - 1)
	}
	if page < pages {
		d.NextURL = pageURL(page + 1)
	}
	set := kadm.TopicsSet{}
	for _, name := range names {
		for p := range md.Topics[name].Partitions {
			set.Add(name, p)
		}
	}
	var (
		sizes replicaSizes
		cfgs  map[string]map[string]string
	)
	if len(set) > 0 {
		parallel.Do(
			func() { sizes, _, _ = c.kafkaFor(ctx).sizes(ctx, set) },
			func() { cfgs, _ = c.kafkaFor(ctx).topicConfigs(ctx, names, listConfigNames) },
		)
	}
	rt := c.hist.lastRates()
	for _, name := range names {
		t := md.Topics[name]
		ti := topicInfo{Name: name, Internal: t.IsInternal, Partitions: len(t.Partitions), Size: -1, MsgRate: -1}
		if t.Err != nil {
			ti.Err = t.Err.Error()
		}
		minISR, _ := strconv.Atoi(cfgs[name]["min.insync.replicas"])
		for _, p := range t.Partitions {
			ti.Replication = max(ti.Replication, len(p.Replicas))
			if p.Leader < 0 {
				ti.Offline++
			} else if len(p.ISR) < minISR {
				ti.UnderMinISR++
			}
			if len(p.ISR) < len(p.Replicas) {
				ti.URP++
			}
		}
		if sizes != nil {
			ti.Size = 0
			for _, p := range t.Partitions {
				b := sizes.of(name, p.Partition, p.Leader)
				if b < 0 {
					ti.Size = -1 // a partition's size unknown: the topic's too
					break
				}
				ti.Size += b
			}
		}
		if cf, ok := cfgs[name]; ok {
			ti.Policy = cf["cleanup.policy"]
			ti.Retention = retentionText(cf["retention.ms"], cf["retention.bytes"])
		}
		if rt.Valid && rt.TopicParts[name] == len(t.Partitions) {
			// Every partition has a replica here: the rate is the topic's.
			ti.MsgRate = rt.TopicMsgs[name]
		}
		d.Topics = append(d.Topics, ti)
	}
	c.render(w, r, http.StatusOK, "topics", "Topics", "topics", d)
}

// retentionText shows retention.ms and retention.bytes briefly.
func retentionText(ms, bytes string) string {
	var parts []string
	switch ms {
	case "", "-1":
		parts = append(parts, "forever")
	default:
		parts = append(parts, msText(ms))
	}
	if bytes != "" && bytes != "-1" {
		var n int64
		if _, err := fmt.Sscan(bytes, &n); err == nil {
			parts = append(parts, fmtBytes(n))
		}
	}
	return strings.Join(parts, ", ")
}

// msText shows a millisecond count in the largest whole unit.
func msText(ms string) string {
	var n int64
	if _, err := fmt.Sscan(ms, &n); err != nil {
		return ms
	}
	for _, u := range []struct {
		ms   int64
		name string
	}{{86400000, "d"}, {3600000, "h"}, {60000, "min"}, {1000, "s"}} {
		if n >= u.ms && n%u.ms == 0 {
			return fmt.Sprintf("%d %s", n/u.ms, u.name)
		}
	}
	return fmt.Sprintf("%d ms", n)
}

type topicData struct {
	Name       string
	Internal   bool
	ID         string
	Partitions []partitionInfo
	Configs    []configEntry
	// ConfigsErr says why the configs could not be read (say, no
	// DESCRIBE_CONFIGS for this user): the rest of the page still shows.
	ConfigsErr string
	// OffsetsErr says why some partitions' offsets are unknown.
	OffsetsErr string
	Groups     []topicGroup
	Size       int64
	Records    int64
	Compacted  bool
	// URP, UnderMinISR and Offline count the partitions in each state.
	URP, UnderMinISR, Offline int
	// MinISR is min.insync.replicas (0: unknown).
	MinISR int
}

// topicGroup is a group with committed offsets on the topic.
type topicGroup struct {
	Group      string
	Partitions int
	Lag        int64
}

func (c *Console) topic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	ctx, cancel := reqCtx(r)
	defer cancel()
	md, err := c.kafkaFor(ctx).metadata(ctx, name)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	t, ok := md.Topics[name]
	if !ok || t.Err != nil {
		c.fail(w, r, http.StatusNotFound, fmt.Errorf("no topic %q", name))
		return
	}
	d := topicData{Name: name, Internal: t.IsInternal, ID: base64.RawURLEncoding.EncodeToString(t.ID[:])} // Kafka's Uuid.toString
	set := kadm.TopicsSet{}
	for p := range t.Partitions {
		set.Add(name, p)
	}
	// The page's four questions are independent: ask them at once.
	var (
		start, end     kadm.ListedOffsets
		offErr, cfgErr error
		sizes          replicaSizes
		lags           map[string][]groupLag
	)
	parallel.Do(
		func() { start, end, offErr = c.kafkaFor(ctx).offsets(ctx, name) },
		func() { sizes, _, _ = c.kafkaFor(ctx).sizes(ctx, set) },
		func() { d.Configs, cfgErr = c.kafkaFor(ctx).describeTopicConfigs(ctx, name) },
		func() {
			if groups, err := c.kafkaFor(ctx).adm.ListGroups(ctx); err == nil {
				names := groups.Groups()
				if len(names) > maxLagGroups {
					names = names[:maxLagGroups]
				}
				lags, _ = c.kafkaFor(ctx).lags(ctx, names...)
			}
		},
	)
	if offErr != nil && !partial(offErr) {
		c.fail(w, r, http.StatusBadGateway, offErr)
		return
	}
	if offErr != nil {
		// Some partitions have no leader to ask: their offsets are
		// unknown, the rest of the page stands.
		d.OffsetsErr = offErr.Error()
	}
	if cfgErr != nil {
		d.ConfigsErr = cfgErr.Error()
	}
	for _, e := range d.Configs {
		if e.Name == "min.insync.replicas" {
			d.MinISR, _ = strconv.Atoi(e.Value)
		}
	}
	for _, p := range t.Partitions.Sorted() {
		pi := partitionInfo{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
			Offline: p.OfflineReplicas, Start: -1, End: -1, Size: -1, UnderReplicat: len(p.ISR) < len(p.Replicas)}
		pi.UnderMinISR = p.Leader >= 0 && len(p.ISR) < d.MinISR
		switch {
		case p.Leader < 0:
			d.Offline++
		case pi.UnderMinISR:
			d.UnderMinISR++
		}
		if pi.UnderReplicat {
			d.URP++
		}
		if p.Err != nil {
			pi.Err = p.Err.Error()
		}
		if o, ok := start.Lookup(name, p.Partition); ok && o.Err == nil {
			pi.Start = o.Offset
		}
		if o, ok := end.Lookup(name, p.Partition); ok && o.Err == nil {
			pi.End = o.Offset
		}
		if pi.Start >= 0 && pi.End >= 0 {
			d.Records += pi.End - pi.Start
		}
		if s := sizes.of(name, p.Partition, p.Leader); s >= 0 {
			pi.Size = s
			if d.Size >= 0 {
				d.Size += s
			}
		} else {
			d.Size = -1 // a partition's size unknown: the topic's too
		}
		d.Partitions = append(d.Partitions, pi)
	}
	for _, e := range d.Configs {
		if e.Name == "cleanup.policy" && strings.Contains(e.Value, "compact") {
			d.Compacted = true
		}
	}
	for g, rows := range lags {
		tg := topicGroup{Group: g}
		var mine []groupLag
		for _, row := range rows {
			if row.Topic == name {
				mine = append(mine, row)
			}
		}
		if len(mine) == 0 {
			continue
		}
		tg.Partitions, tg.Lag = len(mine), totalLag(mine)
		d.Groups = append(d.Groups, tg)
	}
	sort.Slice(d.Groups, func(i, j int) bool { return d.Groups[i].Group < d.Groups[j].Group })
	c.render(w, r, http.StatusOK, "topic", name, "topics", d)
}

// alterConfig sets or reverts one topic config through
// IncrementalAlterConfigs (the broker validates it as for any client).
func (c *Console) alterConfig(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	back := "/topics/" + url.PathEscape(topic) + "#configs"
	name := strings.TrimSpace(r.PostFormValue("name"))
	if name == "" {
		c.redirect(w, r, back, flash{Error: true, Text: "no config named"})
		return
	}
	var value *string
	switch r.PostFormValue("op") {
	case "set":
		v := r.PostFormValue("value")
		value = &v
	case "delete":
	default:
		c.redirect(w, r, back, flash{Error: true, Text: "unknown operation"})
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	if err := c.kafkaFor(ctx).alterTopicConfig(ctx, topic, name, value); err != nil {
		c.redirect(w, r, back, flash{Error: true, Text: fmt.Sprintf("%s not changed: %v", name, err)})
		return
	}
	msg := name + " reverted to its default"
	if value != nil {
		msg = fmt.Sprintf("%s set to %q", name, *value)
	}
	c.logger.Info("topic config changed", "topic", topic, "config", name, "user", sessionFrom(r.Context()).user)
	c.redirect(w, r, back, flash{Text: msg})
}
