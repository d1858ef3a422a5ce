package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/internal/cleaner"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxCompactionRows bounds the partitions the compaction page draws.
const maxCompactionRows = 500

type compactionRow struct {
	cleaner.PartitionStatus
	CleanableFrom, CleanableTo int64
	SizePlot, DirtyPlot        plot
}

type compactionData struct {
	NodeID  int32 // this broker: the cleaner shown is its own
	Enabled bool
	Topic   string
	Rows    []compactionRow
	Total   int
	// MapUse is the highest dedupe buffer use of the shown last rounds.
	MapUse float64
}

func (c *Console) compaction(w http.ResponseWriter, r *http.Request) {
	d := compactionData{NodeID: c.cfg.NodeID, Enabled: c.cfg.Compaction != nil, Topic: strings.TrimSpace(r.URL.Query().Get("topic"))}
	if !d.Enabled {
		c.render(w, r, http.StatusOK, "compaction", "Compaction", "compaction", d)
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	// Only the topics the user may describe (with an authorizer, what its
	// Metadata shows it).
	visible, err := c.kafkaFor(ctx).topicOps(ctx, nil)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	var sts []cleaner.PartitionStatus
	for _, st := range c.cfg.Compaction.Status(d.Topic) {
		if _, ok := visible[st.Topic]; ok {
			sts = append(sts, st)
		}
	}
	// Users' topics first, the internal ones (__consumer_offsets, ...)
	// after them; each in the cleaner's topic/partition order.
	sort.SliceStable(sts, func(i, j int) bool {
		return !strings.HasPrefix(sts[i].Topic, "__") && strings.HasPrefix(sts[j].Topic, "__")
	})
	d.Total = len(sts)
	if len(sts) > maxCompactionRows {
		sts = sts[:maxCompactionRows]
	}
	for _, st := range sts {
		row := compactionRow{PartitionStatus: st, CleanableFrom: st.FirstDirtyOffset, CleanableTo: st.FirstUncleanable}
		row.SizePlot = newPlot(fmt.Sprintf("Log size of %s/%d", st.Topic, st.Partition), c.hist.get(sizeKey(st.Topic, st.Partition)), 160, 40, func(f float64) string { return fmtBytes(int64(f)) }, -1, 0)
		row.DirtyPlot = newPlot(fmt.Sprintf("Dirty ratio of %s/%d against min.cleanable.dirty.ratio", st.Topic, st.Partition), c.hist.get(dirtyKey(st.Topic, st.Partition)), 160, 40,
			func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }, st.MinCleanableRatio, 1)
		d.MapUse = max(d.MapUse, st.LastMapUtilization)
		d.Rows = append(d.Rows, row)
	}
	c.render(w, r, http.StatusOK, "compaction", "Compaction", "compaction", d)
}

// cleanNowTimeout bounds a "clean now" round run from the page.
const cleanNowTimeout = 2 * time.Minute

// cleanNow runs a cleaning round of one partition (or a whole topic) now,
// the same call as POST /v1/compaction/run.
func (c *Console) cleanNow(w http.ResponseWriter, r *http.Request) {
	topic := r.PostFormValue("topic")
	back := "/compaction"
	if r.PostFormValue("back") == "topic" {
		back += "?topic=" + url.QueryEscape(topic)
	}
	if c.cfg.Compaction == nil {
		c.redirect(w, r, back, flash{Error: true, Text: "no cleaner in this broker"})
		return
	}
	part := int64(-1)
	if s := r.PostFormValue("partition"); s != "" {
		var err error
		if part, err = strconv.ParseInt(s, 10, 32); err != nil || part < -1 {
			c.redirect(w, r, back, flash{Error: true, Text: "bad partition " + strconv.Quote(s)})
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), cleanNowTimeout)
	defer cancel()
	what := topic
	if part >= 0 {
		what = fmt.Sprintf("%s/%d", topic, part)
	}
	// Kafka has no API for a cleaning round; the console asks for ALTER
	// on the topic (what changing a topic, as CreatePartitions, needs),
	// checked by the broker's authorizer for this user.
	ops, err := c.kafkaFor(ctx).topicOps(ctx, []string{topic})
	if err != nil {
		c.redirect(w, r, back, flash{Error: true, Text: fmt.Sprintf("cleaning %s: %v", what, err)})
		return
	}
	if o, ok := ops[topic]; ok && !allows(o, kmsg.ACLOperationAlter) {
		c.redirect(w, r, back, flash{Error: true, Text: fmt.Sprintf("cleaning %s: TOPIC_AUTHORIZATION_FAILED: user %s may not alter topic %s", what, userOf(ctx), topic)})
		return
	} else if !ok {
		err = cleaner.ErrNotFound // unknown, or not visible to this user
	} else {
		err = c.cfg.Compaction.CleanNow(ctx, topic, int32(part))
	}
	switch {
	case errors.Is(err, cleaner.ErrNotFound):
		c.redirect(w, r, back, flash{Error: true, Text: fmt.Sprintf("%s is not a compacted partition", what)})
	case err != nil:
		c.redirect(w, r, back, flash{Error: true, Text: fmt.Sprintf("cleaning %s failed: %v", what, err)})
	default:
		c.logger.Info("cleaning run from the console", "topic", topic, "partition", part, "user", sessionFrom(r.Context()).user)
		c.redirect(w, r, back, flash{Text: fmt.Sprintf("Cleaned %s.", what)})
	}
}
