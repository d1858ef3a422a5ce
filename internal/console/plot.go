package console

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// plot is a small line chart drawn as inline SVG by the "plot" template:
// only numbers reach the SVG attributes, the labels go through escaping.
type plot struct {
	Title string // the accessible name (an SVG <title>)
	W, H  int
	// Line is the polyline's points ("x,y x,y ...") in the viewBox.
	Line string
	// Dots are the points when there are few (a single sample shows).
	Dots []dot
	// HasThreshold draws a dashed line at ThresholdY (ThresholdLabel).
	HasThreshold   bool
	ThresholdY     float64
	ThresholdLabel string
	// Axis labels.
	Top, Bottom string
	From, To    string
	Last        string
	Empty       bool
}

type dot struct{ X, Y float64 }

// plot margins inside the viewBox.
const (
	plotPadLeft   = 2
	plotPadRight  = 2
	plotPadTop    = 6
	plotPadBottom = 6
)

// newPlot draws pts (oldest first). The y axis starts at 0 and ends at
// the larger of the highest value and the threshold (fixedMax > 0 fixes
// it); threshold < 0 draws none.
func newPlot(title string, pts []point, w, h int, fmtV func(float64) string, threshold, fixedMax float64) plot {
	p := plot{Title: title, W: w, H: h}
	if len(pts) == 0 {
		p.Empty = true
		p.Title = title + ": no samples yet"
		return p
	}
	top := fixedMax
	if top <= 0 {
		for _, pt := range pts {
			top = math.Max(top, pt.V)
		}
		if threshold > 0 {
			top = math.Max(top, threshold)
		}
		if top <= 0 {
			top = 1
		}
		top *= 1.1
	}
	t0, t1 := pts[0].at(), pts[len(pts)-1].at()
	span := t1.Sub(t0).Seconds()
	innerW := float64(w - plotPadLeft - plotPadRight)
	innerH := float64(h - plotPadTop - plotPadBottom)
	xOf := func(t time.Time) float64 {
		if span <= 0 {
			return plotPadLeft + innerW
		}
		return plotPadLeft + innerW*t.Sub(t0).Seconds()/span
	}
	yOf := func(v float64) float64 {
		v = math.Max(0, math.Min(v, top))
		return plotPadTop + innerH*(1-v/top)
	}
	var sb strings.Builder
	for i, pt := range pts {
		if i > 0 {
			sb.WriteByte(' ')
		}
		x, y := xOf(pt.at()), yOf(pt.V)
		sb.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
		sb.WriteByte(',')
		sb.WriteString(strconv.FormatFloat(y, 'f', 1, 64))
		if len(pts) <= 3 {
			p.Dots = append(p.Dots, dot{X: math.Round(x*10) / 10, Y: math.Round(y*10) / 10})
		}
	}
	p.Line = sb.String()
	if threshold >= 0 {
		p.HasThreshold = true
		p.ThresholdY = math.Round(yOf(threshold)*10) / 10
		p.ThresholdLabel = "threshold " + fmtV(threshold)
	}
	p.Top, p.Bottom = fmtV(top), fmtV(0)
	p.From, p.To = t0.UTC().Format("15:04:05"), t1.UTC().Format("15:04:05")
	p.Last = fmtV(pts[len(pts)-1].V)
	p.Title = title + " (last " + p.Last + ", " + strconv.Itoa(len(pts)) + " samples from " + p.From + " to " + p.To + " UTC)"
	return p
}
