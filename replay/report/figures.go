package report

import (
	"bytes"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/steplab/steplab/datasets/inspect"
	"github.com/steplab/steplab/replay/whatif"
)

// Axis labels of the report's own figures (with units).
const (
	LabelBatchBucket  = "batch size (requests per step)"
	LabelWallMs       = "step wall time (ms)"
	LabelStage        = "workflow stage"
	LabelLatencyP90Ms = "p90 latency (ms)"
	LabelPlacement    = "placement"
	LabelThroughput   = "throughput (req/s)"
)

var palette = []color.Color{
	color.RGBA{R: 0x24, G: 0x58, B: 0xb3, A: 0xff},
	color.RGBA{R: 0xd9, G: 0x6c, B: 0x1e, A: 0xff},
	color.RGBA{R: 0x2a, G: 0x8a, B: 0x4a, A: 0xff},
	color.RGBA{R: 0x9b, G: 0x3d, B: 0xb0, A: 0xff},
	color.RGBA{R: 0xb3, G: 0x26, B: 0x1e, A: 0xff},
	color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff},
}

func col(i int) color.Color { return palette[i%len(palette)] }

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.X.Label.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.TextStyle.Font.Size = vg.Points(11)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

func renderSVG(p *plot.Plot) ([]byte, error) {
	wt, err := p.WriterTo(16*vg.Centimeter, 11*vg.Centimeter, "svg")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// wallTimeFigure draws the median and p90 wall time per batch-size bucket,
// one pair of lines per step kind.
func wallTimeFigure(name string, groups []inspect.WallGroup) ([]byte, error) {
	order := map[string]int{}
	var labels []string
	for _, b := range inspect.BatchBuckets {
		order[b.Label] = len(labels)
		labels = append(labels, b.Label)
	}
	order[">512"] = len(labels)
	labels = append(labels, ">512")
	used := map[int]bool{}
	for _, g := range groups {
		if i, ok := order[g.Batch]; ok {
			used[i] = true
		}
	}
	// Keep only the buckets present, in order.
	pos := map[int]float64{}
	var shown []string
	for i, l := range labels {
		if used[i] {
			pos[i] = float64(len(shown))
			shown = append(shown, l)
		}
	}
	p := newPlot(name+": step wall time by batch size", LabelBatchBucket, LabelWallMs)
	var kinds []string
	byKind := map[string][]inspect.WallGroup{}
	for _, g := range groups {
		if _, ok := byKind[g.Kind]; !ok {
			kinds = append(kinds, g.Kind)
		}
		byKind[g.Kind] = append(byKind[g.Kind], g)
	}
	for k, kind := range kinds {
		var p50, p90 plotter.XYs
		for _, g := range byKind[kind] {
			i, ok := order[g.Batch]
			if !ok || g.WallMs.Count == 0 {
				continue
			}
			p50 = append(p50, plotter.XY{X: pos[i], Y: g.WallMs.P50})
			p90 = append(p90, plotter.XY{X: pos[i], Y: g.WallMs.P90})
		}
		if len(p50) == 0 {
			continue
		}
		for j, xy := range []plotter.XYs{p50, p90} {
			l, s, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, err
			}
			l.Color, s.Color = col(k), col(k)
			l.Width = vg.Points(1.5)
			s.Shape = draw.CircleGlyph{}
			s.Radius = vg.Points(2.5)
			what := " median"
			if j == 1 {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				s.Shape = draw.TriangleGlyph{}
				what = " p90"
			}
			p.Add(l, s)
			p.Legend.Add(kind+what, l, s)
		}
	}
	p.NominalX(shown...)
	// Step times span two orders of magnitude (a decode step of one request
	// against a long prefill): a log axis keeps both readable.
	lo, hi := math.Inf(1), 0.0
	for _, g := range groups {
		if g.WallMs.Count > 0 && g.WallMs.P50 > 0 {
			lo, hi = math.Min(lo, g.WallMs.P50), math.Max(hi, g.WallMs.P90)
		}
	}
	if hi > 0 {
		p.Y.Min, p.Y.Max = lo/2, hi*1.6
	}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(6)
	return renderSVG(p)
}

// stageLatencyFigure draws each stage's p90 latency (and the end-to-end
// p90) as grouped bars, one bar per placement.
func stageLatencyFigure(a *whatif.Audit) ([]byte, error) {
	names := append(append([]string{}, a.Stages...), "end to end")
	p := newPlot(a.Scenario+": p90 latency by stage", LabelStage, LabelLatencyP90Ms)
	n := len(a.Placements)
	w := vg.Points(math.Min(18, 120/float64(max(1, n))))
	for i, pl := range a.Placements {
		v := make(plotter.Values, len(names))
		for j := range a.Stages {
			if j < len(pl.Stages) {
				v[j] = pl.Stages[j].P90Ms
			}
		}
		v[len(names)-1] = pl.E2E.P90Ms
		bars, err := plotter.NewBarChart(v, w)
		if err != nil {
			return nil, err
		}
		bars.Color = col(i)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(n-1)/2) * w
		p.Add(bars)
		p.Legend.Add(pl.Placement, bars)
	}
	p.NominalX(names...)
	p.Y.Min = 0
	return renderSVG(p)
}

// throughputFigure draws request-window and full-process throughput per
// placement, with the offered rate.
func throughputFigure(a *whatif.Audit) ([]byte, error) {
	names := placementNames(*a)
	p := newPlot(a.Scenario+": throughput per placement", LabelPlacement, LabelThroughput)
	w := vg.Points(26)
	for i, s := range []struct {
		name string
		v    func(whatif.PlacementAudit) float64
	}{
		{"request window", func(p whatif.PlacementAudit) float64 { return p.WindowMeanRPS }},
		{"full process", func(p whatif.PlacementAudit) float64 { return p.FullProcessMeanRPS }},
	} {
		v := make(plotter.Values, len(names))
		for j, pl := range a.Placements {
			v[j] = s.v(pl)
		}
		bars, err := plotter.NewBarChart(v, w)
		if err != nil {
			return nil, err
		}
		bars.Color = col(i)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-0.5) * w
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	if a.OfferedRPS > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: a.OfferedRPS}, {X: float64(len(names)) - 0.5, Y: a.OfferedRPS}})
		if err != nil {
			return nil, err
		}
		l.Color = color.Gray{Y: 60}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("offered rate", l)
		p.Y.Max = a.OfferedRPS * 1.25
	}
	p.Legend.Left = false
	p.NominalX(names...)
	p.Y.Min = 0
	return renderSVG(p)
}

// logTicks labels 1, 2 and 5 times each power of ten (plot.LogTicks labels
// only the powers, too few over a range of one or two decades).
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1; m < 10; m++ {
			v := float64(m) * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			out = append(out, t)
		}
	}
	return out
}
