package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// SVG layout, in pixels.
const (
	svgWidth    = 960
	svgLabelW   = 190
	svgBarW     = 620
	svgRowH     = 22
	svgPanelGap = 34
)

type svgBar struct {
	label string
	value float64
	text  string
	color string
}

type svgPanel struct {
	title string
	log   bool
	unit  func(float64) string // tick labels
	bars  []svgBar
}

// Bar colours: relock, peers, the raw floor.
const (
	colorRelock = "#2b6cb0"
	colorPeer   = "#c05621"
	colorFloor  = "#718096"
)

// WriteSVG writes a bar chart of the report: uncontended cycle and
// hand-off medians (log scale), the hand-off under sustained contention,
// acquisitions per second under contention (16 contenders, or the most
// measured), and cycles per second on many locks.
func (r *Report) WriteSVG(w io.Writer) error {
	var panels []svgPanel
	durUnit := func(v float64) string { return fmtDur(time.Duration(v)) }
	color := func(res *Result) string {
		if res.Peer {
			return colorPeer
		}
		return colorRelock
	}

	un := svgPanel{title: "Uncontended Lock+Unlock, median (log scale)", log: true, unit: durUnit}
	hand := svgPanel{title: "Hand-off: release call to waiter's return, median (log scale)", log: true, unit: durUnit}
	cont := 0
	for _, res := range r.Results {
		if res.Scenario == ScenarioContention && usable(&res) && (res.Contenders == 16 || (cont != 16 && res.Contenders > cont)) {
			cont = res.Contenders
		}
	}
	contP := svgPanel{title: fmt.Sprintf("Contention, %d contenders: acquisitions per second", cont), unit: func(v float64) string { return fmtNum(v) }}
	busy := svgPanel{title: "Hand-off under sustained contention: release call to next holder, median (log scale)", log: true, unit: durUnit}
	many := svgPanel{title: "Many locks (random names, one process): cycles per second", unit: func(v float64) string { return fmtNum(v) }}
	floorDone, handFloorDone, manyFloorDone := false, false, false
	for i := range r.Results {
		res := &r.Results[i]
		if !usable(res) || res.Latency.N == 0 {
			continue
		}
		switch {
		case res.Scenario == ScenarioUncontended:
			un.bars = append(un.bars, svgBar{res.Kind, float64(res.Latency.P50), fmtDur(res.Latency.P50), color(res)})
			if u := res.Uncontended; u != nil && !floorDone && !res.Peer {
				floorDone = true
				un.bars = append(un.bars, svgBar{"raw SET NX + DEL", float64(u.Floor.P50), fmtDur(u.Floor.P50), colorFloor})
			}
		case res.Scenario == ScenarioHandoff:
			hand.bars = append(hand.bars, svgBar{res.Kind, float64(res.Latency.P50), fmtDur(res.Latency.P50), color(res)})
			if h := res.Handoff; h != nil && h.Floor.N > 0 && !handFloorDone && !res.Peer {
				handFloorDone = true
				hand.bars = append(hand.bars, svgBar{"raw PUBLISH→SET NX", float64(h.Floor.P50), fmtDur(h.Floor.P50), colorFloor})
			}
		case res.Scenario == ScenarioHandoffContended:
			busy.bars = append(busy.bars, svgBar{res.Kind, float64(res.Latency.P50), fmtDur(res.Latency.P50), color(res)})
		case res.Scenario == ScenarioContention && res.Contenders == cont:
			contP.bars = append(contP.bars, svgBar{res.Kind, res.OpsPerSec, fmtNum(res.OpsPerSec) + "/s", color(res)})
		case res.Scenario == ScenarioManyLocks:
			many.bars = append(many.bars, svgBar{res.Kind, res.OpsPerSec, fmtNum(res.OpsPerSec) + "/s", color(res)})
			if m := res.ManyLocks; m != nil && !manyFloorDone && !res.Peer {
				manyFloorDone = true
				many.bars = append(many.bars, svgBar{"raw SET NX + DEL", m.FloorPerSec, fmtNum(m.FloorPerSec) + "/s", colorFloor})
			}
		}
	}
	for _, p := range []svgPanel{un, hand, busy, contP, many} {
		if len(p.bars) > 0 {
			panels = append(panels, p)
		}
	}

	var b strings.Builder
	height := 70
	for _, p := range panels {
		height += svgPanelGap + 40 + len(p.bars)*svgRowH
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := "relockbench: " + r.Meta.Server
	if !r.Meta.RealRedis {
		title += " (miniredis: NOT Redis figures)"
	}
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="10" y="42" fill="#4a5568">%s, %d CPUs, %s; one run, same server for every bar</text>`+"\n",
		html.EscapeString(r.Meta.Go), r.Meta.CPUs, r.Meta.Start.Format("2006-01-02 15:04"))
	y := 70
	for _, p := range panels {
		y = p.write(&b, y)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// write draws p with its top at y and returns the next panel's top.
func (p svgPanel) write(b *strings.Builder, y int) int {
	fmt.Fprintf(b, `<text x="10" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", y+14, html.EscapeString(p.title))
	top := y + 24
	bottom := top + len(p.bars)*svgRowH
	lo, hi := p.scale()
	x := func(v float64) float64 {
		if p.log {
			v = math.Max(v, lo)
			return svgLabelW + (math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*svgBarW
		}
		return svgLabelW + v/hi*svgBarW
	}
	for _, t := range p.ticks(lo, hi) {
		tx := x(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e2e8f0"/>`+"\n", tx, top, tx, bottom)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#718096" font-size="10">%s</text>`+"\n", tx, bottom+12, html.EscapeString(p.unit(t)))
	}
	for i, bar := range p.bars {
		by := top + i*svgRowH
		w := math.Max(1, x(bar.value)-svgLabelW)
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", svgLabelW-8, by+15, html.EscapeString(bar.label))
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", svgLabelW, by+3, w, svgRowH-6, bar.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%d">%s</text>`+"\n", svgLabelW+w+6, by+15, html.EscapeString(bar.text))
	}
	return bottom + 16 + svgPanelGap
}

// scale returns the axis range: whole decades around the values on a log
// axis, 0 to a little above the largest value on a linear one.
func (p svgPanel) scale() (lo, hi float64) {
	minV, maxV := math.Inf(1), 0.0
	for _, bar := range p.bars {
		if bar.value > 0 {
			minV = math.Min(minV, bar.value)
		}
		maxV = math.Max(maxV, bar.value)
	}
	if maxV <= 0 {
		return 1, 10
	}
	if !p.log {
		step := niceStep(maxV * 1.1 / 5)
		return 0, step * math.Ceil(maxV*1.1/step)
	}
	lo = math.Pow(10, math.Floor(math.Log10(minV)-0.5))
	hi = math.Pow(10, math.Ceil(math.Log10(maxV)+0.1))
	return lo, hi
}

// ticks returns the gridline values: decades on a log axis, round steps
// on a linear one.
func (p svgPanel) ticks(lo, hi float64) []float64 {
	var out []float64
	if p.log {
		for v := lo; v <= hi*1.0001; v *= 10 {
			out = append(out, v)
		}
		return out
	}
	step := niceStep(hi / 5)
	for v := 0.0; v <= hi*1.0001; v += step {
		out = append(out, v)
	}
	return out
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
