package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Message page bounds: a page shows at most maxPageSize records; one Fetch
// asks for at most fetchMaxBytes (partitionMaxBytes per partition); a page
// stops reading after pageMaxBytes (a key-filtered scan after
// scanMaxBytes) and offers to continue from there. A page never reads more
// than scanMaxBytes (plus one Fetch) of a topic.
const (
	defaultPageSize   = 50
	maxPageSize       = 500
	fetchMaxBytes     = 4 << 20
	partitionMaxBytes = 1 << 20
	pageMaxBytes      = 8 << 20
	scanMaxBytes      = 16 << 20
	maxFetchRounds    = 64
	// displayMax is how much of a key, value or header is shown.
	displayMax = 16 << 10
)

// cursor is the next offset to read per partition.
type cursor map[int32]int64

// String encodes a cursor as "p:o,p:o" (partition order).
func (c cursor) String() string {
	ps := make([]int32, 0, len(c))
	for p := range c {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(p)))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(c[p], 10))
	}
	return b.String()
}

// parseCursor reads a cursor; partitions must be in valid.
func parseCursor(s string, valid map[int32]bool) (cursor, error) {
	c := cursor{}
	if s == "" {
		return c, nil
	}
	for _, part := range strings.Split(s, ",") {
		ps, os, ok := strings.Cut(part, ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || o < 0 || !valid[int32(p)] {
			return nil, fmt.Errorf("bad position %q", part)
		}
		c[int32(p)] = o
	}
	return c, nil
}

// browse is one message page's request.
type browse struct {
	Topic      string
	Partitions []int32 // selected partitions
	Limit      int
	KeyFilter  *string // show only records with this key
	// MaxWait makes the Fetch wait for new records (the live tail).
	MaxWait time.Duration
}

// pageResult is what one page read.
type pageResult struct {
	Records []*kgo.Record
	Next    cursor
	// AtEnd is set when every selected partition was read to its end.
	AtEnd bool
	// Scanned counts the bytes fetched (a filtered scan stops at
	// scanMaxBytes).
	Scanned int64
	// ScanLimited is set when the page stopped at its byte bound.
	ScanLimited bool
	// Ends are the partitions' last stable offsets seen.
	Ends map[int32]int64
	Errs []string
}

// partitionBuf is one partition's fetched, not yet shown records.
type partitionBuf struct {
	recs []*kgo.Record
	// next is the offset after the last record consumed from recs (or
	// after everything processed when recs is drained).
	next, after int64
	end         int64
}

// readPage reads records from cur over the selected partitions: one or
// more Fetch requests of at most fetchMaxBytes, each partition read in
// order; records of all partitions are merged by timestamp, and the
// returned cursor moves past exactly the records consumed (shown or
// filtered out), so the next page neither skips nor repeats any.
func (k *kafka) readPage(ctx context.Context, md kadm.TopicDetail, b browse, cur cursor) (pageResult, error) {
	res := pageResult{Next: cursor{}, Ends: map[int32]int64{}}
	for p, o := range cur {
		res.Next[p] = o
	}
	bufs := map[int32]*partitionBuf{}
	for _, p := range b.Partitions {
		bufs[p] = &partitionBuf{next: cur[p], after: cur[p], end: -1}
	}
	limit := b.Limit
	rounds := 0
	for len(res.Records) < limit && rounds < maxFetchRounds {
		budget := int64(pageMaxBytes)
		if b.KeyFilter != nil {
			budget = scanMaxBytes
		}
		if res.Scanned >= budget {
			res.ScanLimited = true
			break
		}
		// Fetch for partitions whose buffer is drained and not at end.
		var want []int32
		for _, p := range b.Partitions {
			pb := bufs[p]
			if len(pb.recs) == 0 && (pb.end < 0 || pb.after < pb.end) {
				want = append(want, p)
			}
		}
		if len(want) == 0 {
			break
		}
		// Rotate so that the first partition (the one Kafka answers even
		// beyond its byte limit, KIP-74) differs from round to round.
		if n := len(want); n > 1 {
			r := rounds % n
			want = append(want[r:], want[:r]...)
		}
		rounds++
		wait := time.Duration(0)
		if b.MaxWait > 0 && rounds == 1 {
			wait = b.MaxWait
		}
		fetched, err := k.fetch(ctx, md, want, bufs, wait)
		if err != nil {
			return res, err
		}
		res.Scanned += fetched.bytes
		res.Errs = append(res.Errs, fetched.errs...)
		progress := fetched.bytes > 0
		for _, p := range want {
			if bufs[p].after > res.Next[p] {
				progress = true
			}
		}
		// Merge: repeatedly take the earliest head among the buffers.
		for len(res.Records) < limit {
			var best *partitionBuf
			for _, p := range b.Partitions {
				pb := bufs[p]
				if len(pb.recs) == 0 {
					continue
				}
				if best == nil || pb.recs[0].Timestamp.Before(best.recs[0].Timestamp) {
					best = pb
				}
			}
			if best == nil {
				break
			}
			r := best.recs[0]
			best.recs = best.recs[1:]
			best.next = r.Offset + 1
			if len(best.recs) == 0 && best.after > best.next {
				best.next = best.after // skip control records and aborted data
			}
			if b.KeyFilter == nil || (r.Key != nil && string(r.Key) == *b.KeyFilter) {
				res.Records = append(res.Records, r)
			}
		}
		for _, p := range b.Partitions {
			pb := bufs[p]
			if len(pb.recs) == 0 && pb.after > pb.next {
				pb.next = pb.after
			}
			res.Next[p] = pb.next
		}
		if !progress || b.MaxWait > 0 {
			break
		}
	}
	res.AtEnd = true
	for _, p := range b.Partitions {
		pb := bufs[p]
		res.Ends[p] = pb.end
		if len(pb.recs) > 0 || pb.end < 0 || pb.next < pb.end {
			res.AtEnd = false
		}
	}
	return res, nil
}

type fetchResult struct {
	bytes int64
	errs  []string
}

// fetch issues one Fetch for the given partitions from their buffers'
// positions (read_committed: aborted records and markers never show) and
// fills the buffers.
func (k *kafka) fetch(ctx context.Context, md kadm.TopicDetail, parts []int32, bufs map[int32]*partitionBuf, wait time.Duration) (fetchResult, error) {
	var out fetchResult
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = 0
	if wait > 0 {
		req.MinBytes = 1
	}
	req.MaxBytes = fetchMaxBytes
	req.IsolationLevel = 1
	req.SessionEpoch = -1 // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = md.Topic
	rt.TopicID = md.ID
	// One Fetch goes to one leader: the partitions led by the first one's
	// leader now, the others in the next rounds.
	leader := int32(-1)
	if pd, ok := md.Partitions[parts[0]]; ok {
		leader = pd.Leader
	}
	for _, p := range parts {
		if pd, ok := md.Partitions[p]; ok && pd.Leader != leader {
			continue
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.CurrentLeaderEpoch = -1
		rp.FetchOffset = bufs[p].after
		rp.LastFetchedEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = partitionMaxBytes
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	var (
		kresp kmsg.Response
		err   error
	)
	if leader >= 0 {
		kresp, err = k.cl.Broker(int(leader)).Request(ctx, req)
	} else {
		kresp, err = k.cl.Request(ctx, req)
	}
	if err != nil {
		return out, fmt.Errorf("fetch %s: %w", md.Topic, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return out, fmt.Errorf("fetch %s: %w", md.Topic, err)
	}
	dec := kgo.DefaultDecompressor()
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			pb := bufs[rp.Partition]
			if pb == nil {
				continue
			}
			out.bytes += int64(len(rp.RecordBatches))
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				if err == kerr.OffsetOutOfRange {
					// Compaction or retention moved the start: resume there.
					if rp.LogStartOffset > pb.after {
						pb.after, pb.next = rp.LogStartOffset, rp.LogStartOffset
						continue
					}
				}
				out.errs = append(out.errs, fmt.Sprintf("partition %d: %v", rp.Partition, err))
				pb.end = pb.after // do not ask again on this page
				continue
			}
			pb.end = rp.LastStableOffset
			if pb.end < 0 {
				pb.end = rp.HighWatermark
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: pb.after, IsolationLevel: kgo.ReadCommitted(), Topic: md.Topic, Partition: rp.Partition,
			}, rp, dec, nil)
			if fp.Err != nil {
				out.errs = append(out.errs, fmt.Sprintf("partition %d: %v", rp.Partition, fp.Err))
			}
			pb.recs = append(pb.recs, fp.Records...)
			if next > pb.after {
				pb.after = next
			}
		}
	}
	return out, nil
}

// startCursor turns a page's starting point into a cursor: from the start
// or the end (the last `per` records of each partition), an offset, or the
// first offset at or after a timestamp.
func (k *kafka) startCursor(ctx context.Context, topic string, parts []int32, from string, offset int64, ts time.Time, per int) (cursor, error) {
	start, end, err := k.offsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	c := cursor{}
	for _, p := range parts {
		so, ok1 := start.Lookup(topic, p)
		eo, ok2 := end.Lookup(topic, p)
		if !ok1 || !ok2 || so.Err != nil || eo.Err != nil {
			return nil, fmt.Errorf("offsets of %s/%d unavailable", topic, p)
		}
		switch from {
		case "end":
			c[p] = max(so.Offset, eo.Offset-int64(per))
		case "offset":
			c[p] = min(max(offset, so.Offset), eo.Offset)
		default:
			c[p] = so.Offset
		}
	}
	if from == "time" {
		after, err := k.adm.ListOffsetsAfterMilli(ctx, ts.UnixMilli(), topic)
		if err != nil {
			return nil, fmt.Errorf("offsets for time: %w", err)
		}
		for _, p := range parts {
			if o, ok := after.Lookup(topic, p); ok && o.Err == nil && o.Offset >= 0 {
				c[p] = o.Offset
			} else if eo, ok := end.Lookup(topic, p); ok {
				c[p] = eo.Offset
			}
		}
	}
	return c, nil
}

// produceRecord is what the produce form sends.
type produceRecord struct {
	Topic     string
	Partition int32 // -1: by key (Kafka's default partitioner), else round robin
	Key       []byte
	Value     []byte // nil: a tombstone
	Headers   []kgo.RecordHeader
}

// produce sends one record with acks=all and returns where it landed.
func (k *kafka) produce(ctx context.Context, md kadm.TopicDetail, pr produceRecord) (*kgo.Record, error) {
	n := len(md.Partitions)
	if n == 0 {
		return nil, fmt.Errorf("topic %q has no partitions", pr.Topic)
	}
	r := &kgo.Record{Topic: pr.Topic, Key: pr.Key, Value: pr.Value, Headers: pr.Headers}
	switch {
	case pr.Partition >= 0:
		if _, ok := md.Partitions[pr.Partition]; !ok {
			return nil, fmt.Errorf("topic %q has no partition %d", pr.Topic, pr.Partition)
		}
		r.Partition = pr.Partition
	default:
		// Kafka's default partitioner: murmur2 of the key; no key, any.
		r.Partition = int32(kgo.StickyKeyPartitioner(nil).ForTopic(pr.Topic).Partition(r, n))
	}
	res := k.cl.ProduceSync(ctx, r)
	if err := res.FirstErr(); err != nil {
		return nil, fmt.Errorf("produce to %s/%d: %w", pr.Topic, r.Partition, err)
	}
	return res[0].Record, nil
}

// shown is a key, value or header value prepared for display.
type shown struct {
	// Kind is "null", "json", "text" or "hex".
	Kind string
	Text string
	// Size is the full length; Truncated is set when Text shows less.
	Size      int
	Truncated bool
	// Note explains a format that could not be honoured.
	Note string
}

// render prepares b for display in format ("auto", "json", "text" or
// "hex"). Auto picks JSON when b parses as a JSON object or array, text
// when it is printable UTF-8, else hex. Text never hides a byte: invalid
// UTF-8 and control characters show as \xNN escapes.
func render(b []byte, format string) shown {
	if b == nil {
		return shown{Kind: "null"}
	}
	s := shown{Size: len(b)}
	if len(b) > displayMax {
		b, s.Truncated = b[:displayMax], true
	}
	switch format {
	case "hex":
		s.Kind, s.Text = "hex", hexDump(b)
		return s
	case "json":
		if !s.Truncated && validJSON(b) {
			s.Kind, s.Text = "json", prettyJSON(b)
			return s
		}
		s.Note = "not JSON"
		if s.Truncated {
			s.Note = "too long to parse as JSON"
		}
	case "text":
	default: // auto
		t := bytes.TrimSpace(b)
		if !s.Truncated && len(t) > 0 && (t[0] == '{' || t[0] == '[') && validJSON(b) {
			s.Kind, s.Text = "json", prettyJSON(b)
			return s
		}
		if !printable(b) {
			s.Kind, s.Text = "hex", hexDump(b)
			return s
		}
	}
	s.Kind, s.Text = "text", escapeText(b)
	return s
}

// validJSON reports whether b is JSON in valid UTF-8: json.Valid accepts
// invalid UTF-8 inside strings, which prettyJSON would then show as is
// (FuzzRender); such a value is shown as text (escaped) or hex instead.
func validJSON(b []byte) bool { return utf8.Valid(b) && json.Valid(b) }

func prettyJSON(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// printable reports whether b is UTF-8 text without control characters
// other than tab and newlines.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return false
		}
	}
	return true
}

// escapeText shows b as text, every byte accounted for: invalid UTF-8
// and control characters (but tab and newlines) as \xNN, a backslash as
// \\ so that escapes are unambiguous.
func escapeText(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r == '\\':
			sb.WriteString(`\\`)
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, r)
		default:
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}

// hexDump shows b as offset, 16 hex bytes and their printable ASCII.
func hexDump(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); i += 16 {
		line := b[i:min(i+16, len(b))]
		fmt.Fprintf(&sb, "%08x  ", i)
		for j := 0; j < 16; j++ {
			if j < len(line) {
				sb.WriteString(hex.EncodeToString(line[j : j+1]))
				sb.WriteByte(' ')
			} else {
				sb.WriteString("   ")
			}
			if j == 7 {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(" |")
		for _, c := range line {
			if c >= 0x20 && c < 0x7f {
				sb.WriteByte(c)
			} else {
				sb.WriteByte('.')
			}
		}
		sb.WriteString("|\n")
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

// decodeInput turns form text into bytes: as UTF-8 text, or hex digits
// (spaces allowed) when encoding is "hex".
func decodeInput(s, encoding string) ([]byte, error) {
	if encoding != "hex" {
		return []byte(s), nil
	}
	clean := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, s)
	b, err := hex.DecodeString(clean)
	if err != nil {
		return nil, fmt.Errorf("not hex: %w", err)
	}
	return b, nil
}

// parseHeaders reads "name: value" lines (a line without a colon is a
// header with an empty value).
func parseHeaders(s string) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		hs = append(hs, kgo.RecordHeader{Key: strings.TrimSpace(k), Value: []byte(strings.TrimSpace(v))})
	}
	return hs
}
