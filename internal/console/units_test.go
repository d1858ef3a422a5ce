package console

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		in     []byte
		format string
		kind   string
		text   string
	}{
		{nil, "auto", "null", ""},
		{[]byte(`{"a":1}`), "auto", "json", "{\n  \"a\": 1\n}"},
		{[]byte(`{"a":1}`), "text", "text", `{"a":1}`},
		{[]byte(`42`), "auto", "text", "42"}, // a JSON scalar stays text
		{[]byte(`42`), "json", "json", "42"},
		{[]byte("héllo\tworld\n"), "auto", "text", "héllo\tworld\n"},
		{[]byte{'a', 0, 0xff, '\\'}, "text", "text", `a\x00\xff\\`},
		{[]byte{'a', 0, 0xff}, "auto", "hex", "00000000  61 00 ff                                          |a..|"},
		{[]byte("<script>"), "auto", "text", "<script>"}, // escaped by html/template, not here
		{[]byte("not json"), "json", "text", "not json"},
	} {
		got := render(tc.in, tc.format)
		if got.Kind != tc.kind || got.Text != tc.text {
			t.Errorf("render(%q, %s) = %s %q, want %s %q", tc.in, tc.format, got.Kind, got.Text, tc.kind, tc.text)
		}
	}
	big := []byte(strings.Repeat("x", displayMax+10))
	if s := render(big, "auto"); !s.Truncated || len(s.Text) != displayMax || s.Size != displayMax+10 {
		t.Errorf("long value: truncated %v, %d shown of %d", s.Truncated, len(s.Text), s.Size)
	}
	if s := render(append([]byte("{"), big...), "json"); s.Kind != "text" || s.Note == "" {
		t.Errorf("truncated JSON: %s note %q", s.Kind, s.Note)
	}
}

func TestHexDumpLines(t *testing.T) {
	b := make([]byte, 20)
	for i := range b {
		b[i] = byte('A' + i)
	}
	want := "00000000  41 42 43 44 45 46 47 48  49 4a 4b 4c 4d 4e 4f 50  |ABCDEFGHIJKLMNOP|\n" +
		"00000010  51 52 53 54                                       |QRST|"
	if got := hexDump(b); got != want {
		t.Errorf("hexDump:\n%s\nwant\n%s", got, want)
	}
}

func TestCursor(t *testing.T) {
	valid := map[int32]bool{0: true, 1: true, 2: true}
	c, err := parseCursor("2:10,0:5", valid)
	if err != nil || c[0] != 5 || c[2] != 10 || c.String() != "0:5,2:10" {
		t.Fatalf("parse: %v %v %s", c, err, c.String())
	}
	for _, bad := range []string{"3:1", "0:-1", "0", "x:1", "0:1,", "1:9999999999999999999999"} {
		if _, err := parseCursor(bad, valid); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFormInputs(t *testing.T) {
	if b, err := decodeInput("de ad\nBE ef", "hex"); err != nil || string(b) != "\xde\xad\xbe\xef" {
		t.Errorf("hex: %x %v", b, err)
	}
	if _, err := decodeInput("abc", "hex"); err == nil {
		t.Error("odd hex accepted")
	}
	hs := parseHeaders("a: 1\r\n\nb:two:three\nflag\n")
	if len(hs) != 3 || hs[0].Key != "a" || string(hs[0].Value) != "1" || string(hs[1].Value) != "two:three" || hs[2].Key != "flag" || len(hs[2].Value) != 0 {
		t.Errorf("headers: %+v", hs)
	}
	for in, want := range map[string]string{"/topics": "/topics", "//evil": "/", "/\\evil": "/", "https://x": "/", "": "/"} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q", in, got)
		}
	}
	for ms, want := range map[string]string{"604800000": "7 d", "3600000": "1 h", "90000": "90 s", "1500": "1500 ms", "-1": "forever"} {
		if got := retentionText(ms, "-1"); got != want {
			t.Errorf("retention %s: %q", ms, got)
		}
	}
	if got := retentionText("-1", "1073741824"); got != "forever, 1.0 GiB" {
		t.Errorf("retention bytes: %q", got)
	}
	if ts, err := parseTime("2026-01-02T03:04:05"); err != nil || ts.UnixMilli() != time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli() {
		t.Errorf("parseTime: %v %v", ts, err)
	}
	if ts, err := parseTime("1700000000000"); err != nil || ts.UnixMilli() != 1700000000000 {
		t.Errorf("parseTime ms: %v %v", ts, err)
	}
}

// TestHistoryBounds: a ring keeps its last historyLen samples in order;
// the history keeps at most maxSeries series and drops the ones a sample
// no longer has.
func TestHistoryBounds(t *testing.T) {
	h := newHistory()
	t0 := time.Unix(1000, 0)
	for i := 0; i < historyLen+25; i++ {
		h.gen++
		h.recordLocked(t0.Add(time.Duration(i)*time.Second), map[string]float64{"a": float64(i), "b": 1})
		h.sweepLocked()
	}
	pts := h.get("a")
	if len(pts) != historyLen || pts[0].V != 25 || pts[len(pts)-1].V != float64(historyLen+24) {
		t.Fatalf("ring: %d points from %v to %v", len(pts), pts[0].V, pts[len(pts)-1].V)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Ms <= pts[i-1].Ms {
			t.Fatal("ring out of order")
		}
	}
	h.gen++
	h.recordLocked(t0, map[string]float64{"a": 1}) // b is gone
	h.sweepLocked()
	if h.get("b") != nil || h.get("a") == nil {
		t.Error("sweep: gone series kept or live one dropped")
	}
	many := map[string]float64{}
	for i := 0; i < maxSeries+100; i++ {
		many[fmt.Sprint("s", i)] = 1
	}
	h.gen++
	h.recordLocked(t0, many)
	if len(h.series) != maxSeries {
		t.Errorf("%d series, bound %d", len(h.series), maxSeries)
	}
}

func TestPlot(t *testing.T) {
	t0 := time.Unix(0, 0)
	var pts []point
	for i := 0; i < 5; i++ {
		pts = append(pts, point{Ms: t0.Add(time.Duration(i) * time.Second).UnixMilli(), V: float64(i) / 10})
	}
	p := newPlot("dirty", pts, 100, 40, func(f float64) string { return fmt.Sprintf("%.2f", f) }, 0.5, 1)
	if p.Empty || !p.HasThreshold || p.Top != "1.00" || p.Last != "0.40" {
		t.Fatalf("plot %+v", p)
	}
	// The threshold 0.5 of [0, 1] sits in the middle of the inner height.
	mid := float64(plotPadTop) + float64(40-plotPadTop-plotPadBottom)/2
	if math.Abs(p.ThresholdY-mid) > 0.1 {
		t.Errorf("threshold at y %v, want %v", p.ThresholdY, mid)
	}
	for _, xy := range strings.Fields(p.Line) {
		var x, y float64
		if _, err := fmt.Sscanf(xy, "%f,%f", &x, &y); err != nil || x < 0 || x > 100 || y < 0 || y > 40 {
			t.Errorf("point %q outside the view box", xy)
		}
	}
	if e := newPlot("lag", nil, 100, 40, fmtRate, -1, 0); !e.Empty || !strings.Contains(e.Title, "no samples") {
		t.Errorf("empty plot %+v", e)
	}
}

// FuzzRender: any record bytes in any format render without a panic, and
// shown text is valid UTF-8 without control characters (but tab and
// newlines), so nothing a record holds can garble the page.
func FuzzRender(f *testing.F) {
	f.Add([]byte(`{"a":[1,2]}`), "auto")
	f.Add([]byte{0, 0xff, '<', 0x7f, 0xc3}, "text")
	f.Add([]byte("plain"), "hex")
	f.Fuzz(func(t *testing.T, b []byte, format string) {
		s := render(b, format)
		if !utf8Valid(s.Text) {
			t.Fatalf("%s text is not UTF-8: %q", s.Kind, s.Text)
		}
		if s.Kind == "text" || s.Kind == "hex" {
			for _, r := range s.Text {
				if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
					t.Fatalf("%s text holds control character %U", s.Kind, r)
				}
			}
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// FuzzParseCursor: a cursor that parses prints back to one that parses to
// the same positions.
func FuzzParseCursor(f *testing.F) {
	f.Add("0:5,2:10")
	f.Add("1:0")
	f.Fuzz(func(t *testing.T, s string) {
		valid := map[int32]bool{0: true, 1: true, 2: true}
		c, err := parseCursor(s, valid)
		if err != nil {
			return
		}
		c2, err := parseCursor(c.String(), valid)
		if err != nil || len(c2) != len(c) {
			t.Fatalf("%q -> %q: %v", s, c.String(), err)
		}
		for p, o := range c {
			if c2[p] != o {
				t.Fatalf("%q: partition %d %d != %d", s, p, o, c2[p])
			}
		}
	})
}
