package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type messagesData struct {
	Topic      string
	Partitions []int32
	// The form's values.
	Partition string // "all" or a number
	From      string // start, end, offset, time
	Offset    string
	Time      string
	Limit     int
	Key       string
	Format    string
	// The page read.
	Rows        []recordRow
	NextURL     string
	AtEnd       bool
	Scanned     int64
	ScanLimited bool
	Errs        []string
	// TailQuery is the query the live tail starts from.
	TailQuery string
}

type recordRow struct {
	Partition int32
	Offset    int64
	Timestamp string
	Key       shown
	Value     shown
	Headers   []headerRow
}

type headerRow struct {
	Key   string
	Value shown
}

// messageQuery is the parsed query of a message page.
type messageQuery struct {
	md        kadm.TopicDetail
	parts     []int32
	partition string
	from      string
	offset    int64
	ts        time.Time
	limit     int
	key       *string
	format    string
	cur       cursor
	curSet    bool
}

// parseMessageQuery reads a message page's query against the topic's
// metadata.
func (c *Console) parseMessageQuery(r *http.Request, md kadm.TopicDetail) (messageQuery, error) {
	q := r.URL.Query()
	mq := messageQuery{md: md, partition: q.Get("partition"), from: q.Get("from"), limit: defaultPageSize, format: q.Get("format")}
	valid := map[int32]bool{}
	all := make([]int32, 0, len(md.Partitions))
	for p := range md.Partitions {
		valid[p] = true
		all = append(all, p)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	switch mq.partition {
	case "", "all":
		mq.partition, mq.parts = "all", all
	default:
		p, err := strconv.ParseInt(mq.partition, 10, 32)
		if err != nil || !valid[int32(p)] {
			return mq, fmt.Errorf("topic %q has no partition %q", md.Topic, mq.partition)
		}
		mq.parts = []int32{int32(p)}
	}
	switch mq.format {
	case "auto", "json", "text", "hex":
	default:
		mq.format = "auto"
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPageSize {
			return mq, fmt.Errorf("limit must be 1 to %d", maxPageSize)
		}
		mq.limit = n
	}
	if k := q.Get("key"); k != "" {
		mq.key = &k
	}
	switch mq.from {
	case "start", "end":
	case "offset":
		n, err := strconv.ParseInt(strings.TrimSpace(q.Get("offset")), 10, 64)
		if err != nil || n < 0 {
			return mq, fmt.Errorf("offset must be a number ≥ 0")
		}
		mq.offset = n
	case "time":
		t, err := parseTime(q.Get("time"))
		if err != nil {
			return mq, err
		}
		mq.ts = t
	case "":
		mq.from = "end"
	default:
		return mq, fmt.Errorf("from must be start, end, offset or time")
	}
	if s := q.Get("cursor"); s != "" {
		cur, err := parseCursor(s, valid)
		if err != nil {
			return mq, err
		}
		mq.cur, mq.curSet = cur, true
	}
	return mq, nil
}

// parseTime reads a timestamp: milliseconds since the epoch, RFC 3339, or
// the form's "2006-01-02T15:04[:05]" taken as UTC.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(n), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: use 2006-01-02T15:04:05 (UTC), RFC 3339 or epoch milliseconds", s)
}

// values returns the query without the cursor (the form's state).
func (mq messageQuery) values() url.Values {
	v := url.Values{}
	v.Set("partition", mq.partition)
	v.Set("from", mq.from)
	switch mq.from {
	case "offset":
		v.Set("offset", strconv.FormatInt(mq.offset, 10))
	case "time":
		v.Set("time", mq.ts.UTC().Format("2006-01-02T15:04:05"))
	}
	v.Set("limit", strconv.Itoa(mq.limit))
	if mq.key != nil {
		v.Set("key", *mq.key)
	}
	v.Set("format", mq.format)
	return v
}

// topicMeta returns a topic's metadata or an HTTP status and error.
func (c *Console) topicMeta(r *http.Request, name string) (kadm.TopicDetail, int, error) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	md, err := c.kafkaFor(ctx).metadata(ctx, name)
	if err != nil {
		return kadm.TopicDetail{}, http.StatusBadGateway, err
	}
	t, ok := md.Topics[name]
	if !ok || t.Err != nil {
		return kadm.TopicDetail{}, http.StatusNotFound, fmt.Errorf("no topic %q", name)
	}
	return t, 0, nil
}

func (c *Console) messages(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	md, status, err := c.topicMeta(r, name)
	if err != nil {
		c.fail(w, r, status, err)
		return
	}
	mq, err := c.parseMessageQuery(r, md)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	cur := mq.cur
	if !mq.curSet {
		per := mq.limit
		if len(mq.parts) > 1 {
			per = (mq.limit + len(mq.parts) - 1) / len(mq.parts)
		}
		if cur, err = c.kafkaFor(ctx).startCursor(ctx, name, mq.parts, mq.from, mq.offset, mq.ts, per); err != nil {
			c.fail(w, r, http.StatusBadGateway, err)
			return
		}
	}
	res, err := c.kafkaFor(ctx).readPage(ctx, md, browse{Topic: name, Partitions: mq.parts, Limit: mq.limit, KeyFilter: mq.key}, cur)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	d := messagesData{
		Topic: name, Partition: mq.partition, From: mq.from, Limit: mq.limit, Format: mq.format,
		Rows: rows(res.Records, mq.format), AtEnd: res.AtEnd, Scanned: res.Scanned, ScanLimited: res.ScanLimited, Errs: res.Errs,
	}
	d.Partitions = make([]int32, 0, len(md.Partitions))
	for p := range md.Partitions {
		d.Partitions = append(d.Partitions, p)
	}
	sort.Slice(d.Partitions, func(i, j int) bool { return d.Partitions[i] < d.Partitions[j] })
	switch mq.from {
	case "offset":
		d.Offset = strconv.FormatInt(mq.offset, 10)
	case "time":
		d.Time = mq.ts.UTC().Format("2006-01-02T15:04:05")
	}
	if mq.key != nil {
		d.Key = *mq.key
	}
	v := mq.values()
	if !res.AtEnd || res.ScanLimited {
		v.Set("cursor", res.Next.String())
		d.NextURL = "/topics/" + url.PathEscape(name) + "/messages?" + v.Encode()
	}
	tv := mq.values()
	tv.Del("from")
	tv.Del("offset")
	tv.Del("time")
	d.TailQuery = tv.Encode()
	c.render(w, r, http.StatusOK, "messages", name+" · messages", "topics", d)
}

func rows(recs []*kgo.Record, format string) []recordRow {
	out := make([]recordRow, 0, len(recs))
	for _, rec := range recs {
		row := recordRow{Partition: rec.Partition, Offset: rec.Offset, Timestamp: fmtTime(rec.Timestamp),
			Key: render(rec.Key, autoText(format)), Value: render(rec.Value, format)}
		for _, h := range rec.Headers {
			row.Headers = append(row.Headers, headerRow{Key: escapeText([]byte(h.Key)), Value: render(h.Value, autoText(format))})
		}
		out = append(out, row)
	}
	return out
}

// autoText is the format keys and headers use: as chosen, but JSON only
// for values.
func autoText(format string) string {
	if format == "json" {
		return "auto"
	}
	return format
}

// tailResponse is the live tail's answer: rendered rows to append and the
// cursor to ask from next.
type tailResponse struct {
	HTML   string `json:"html"`
	Cursor string `json:"cursor"`
	Count  int    `json:"count"`
	Error  string `json:"error,omitempty"`
}

// tail answers the live tail: records after the cursor (from the end when
// there is none), waiting up to a second for new ones.
func (c *Console) tail(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	writeJSON := func(status int, tr tailResponse) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(tr)
	}
	md, status, err := c.topicMeta(r, name)
	if err != nil {
		writeJSON(status, tailResponse{Error: err.Error()})
		return
	}
	mq, err := c.parseMessageQuery(r, md)
	if err != nil {
		writeJSON(http.StatusBadRequest, tailResponse{Error: err.Error()})
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	cur := mq.cur
	if !mq.curSet {
		if cur, err = c.kafkaFor(ctx).startCursor(ctx, name, mq.parts, "end", 0, time.Time{}, 0); err != nil {
			writeJSON(http.StatusBadGateway, tailResponse{Error: err.Error()})
			return
		}
	}
	res, err := c.kafkaFor(ctx).readPage(ctx, md, browse{Topic: name, Partitions: mq.parts, Limit: mq.limit, KeyFilter: mq.key, MaxWait: time.Second}, cur)
	if err != nil {
		writeJSON(http.StatusBadGateway, tailResponse{Error: err.Error()})
		return
	}
	var buf bytes.Buffer
	if err := c.pages.t["messages"].ExecuteTemplate(&buf, "rows", rows(res.Records, mq.format)); err != nil {
		writeJSON(http.StatusInternalServerError, tailResponse{Error: err.Error()})
		return
	}
	writeJSON(http.StatusOK, tailResponse{HTML: buf.String(), Cursor: res.Next.String(), Count: len(res.Records)})
}

// maxProduceBytes bounds a produced record's key, value and headers.
const maxProduceBytes = 1 << 20

// produce sends one record from the form (a Produce request, acks=all)
// and shows it.
func (c *Console) produce(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	back := "/topics/" + url.PathEscape(name) + "/messages"
	md, status, err := c.topicMeta(r, name)
	if err != nil {
		c.fail(w, r, status, err)
		return
	}
	pr := produceRecord{Topic: name, Partition: -1}
	if s := r.PostFormValue("partition"); s != "" && s != "auto" {
		p, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			c.redirect(w, r, back, flash{Error: true, Text: "bad partition " + strconv.Quote(s)})
			return
		}
		pr.Partition = int32(p)
	}
	enc := r.PostFormValue("encoding")
	if r.PostFormValue("key_null") == "" {
		if pr.Key, err = decodeInput(r.PostFormValue("key"), enc); err != nil {
			c.redirect(w, r, back, flash{Error: true, Text: "key " + err.Error()})
			return
		}
	}
	if r.PostFormValue("value_null") == "" {
		if pr.Value, err = decodeInput(r.PostFormValue("value"), enc); err != nil {
			c.redirect(w, r, back, flash{Error: true, Text: "value " + err.Error()})
			return
		}
		if pr.Value == nil {
			pr.Value = []byte{}
		}
	}
	pr.Headers = parseHeaders(r.PostFormValue("headers"))
	if len(pr.Key)+len(pr.Value) > maxProduceBytes {
		c.redirect(w, r, back, flash{Error: true, Text: fmt.Sprintf("the console produces records up to %d bytes", maxProduceBytes)})
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	rec, err := c.kafkaFor(ctx).produce(ctx, md, pr)
	if err != nil {
		c.redirect(w, r, back, flash{Error: true, Text: err.Error()})
		return
	}
	c.logger.Info("record produced from the console", "topic", name, "partition", rec.Partition, "offset", rec.Offset, "user", sessionFrom(r.Context()).user)
	v := url.Values{}
	v.Set("partition", strconv.Itoa(int(rec.Partition)))
	v.Set("from", "offset")
	v.Set("offset", strconv.FormatInt(rec.Offset, 10))
	c.redirect(w, r, back+"?"+v.Encode(), flash{Text: fmt.Sprintf("Produced to partition %d at offset %d.", rec.Partition, rec.Offset)})
}
