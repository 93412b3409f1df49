package report

import (
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/steplab/steplab/datasets/inspect"
	"github.com/steplab/steplab/internal/plotstyle"
	"github.com/steplab/steplab/workflow/whatif"
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

// noFigure says why the data cannot be drawn; the page shows it in place
// of the figure.
type noFigure string

func (n noFigure) Error() string { return string(n) }

// figW × figH is the size of the report's own figures (the legend band
// below the plot area included).
const figW, figH = 16 * vg.Centimeter, 12 * vg.Centimeter

// wallTimeFigure draws the median and p90 wall time per batch-size bucket,
// one pair of lines per step kind, on a log axis: groups whose times are
// not positive cannot be placed on it and are left out (all of them: a
// note instead of the figure).
func wallTimeFigure(name string, groups []inspect.WallGroup) ([]byte, error) {
	order := map[string]int{}
	var labels []string
	for _, b := range inspect.BatchBuckets {
		order[b.Label] = len(labels)
		labels = append(labels, b.Label)
	}
	order[">512"] = len(labels)
	labels = append(labels, ">512")
	drawable := func(g inspect.WallGroup) bool {
		_, ok := order[g.Batch]
		return ok && g.WallMs.Count > 0 && g.WallMs.P50 > 0 && g.WallMs.P90 > 0
	}
	used := map[int]bool{}
	lo, hi := math.Inf(1), 0.0
	for _, g := range groups {
		if drawable(g) {
			used[order[g.Batch]] = true
			lo, hi = math.Min(lo, g.WallMs.P50), math.Max(hi, g.WallMs.P90)
		}
	}
	if len(used) == 0 {
		return nil, noFigure("no step kind and batch size has a positive wall time (wall_time_ns): nothing can be drawn on the log-scale time axis")
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
	f := plotstyle.New(name+": step wall time by batch size", LabelBatchBucket, LabelWallMs)
	var kinds []string
	byKind := map[string][]inspect.WallGroup{}
	for _, g := range groups {
		if _, ok := byKind[g.Kind]; !ok {
			kinds = append(kinds, g.Kind)
		}
		byKind[g.Kind] = append(byKind[g.Kind], g)
	}
	for _, kind := range kinds {
		var p50, p90 plotter.XYs
		for _, g := range byKind[kind] {
			if drawable(g) {
				p50 = append(p50, plotter.XY{X: pos[order[g.Batch]], Y: g.WallMs.P50})
				p90 = append(p90, plotter.XY{X: pos[order[g.Batch]], Y: g.WallMs.P90})
			}
		}
		if len(p50) == 0 {
			continue
		}
		for j, xy := range []plotter.XYs{p50, p90} {
			l, s, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, err
			}
			l.Color, s.Color = plotstyle.Kind(kind), plotstyle.Kind(kind)
			l.Width = vg.Points(1.5)
			s.Shape = draw.CircleGlyph{}
			s.Radius = vg.Points(2.5)
			what := " median"
			if j == 1 {
				l.Dashes = plotstyle.Dashes(1)
				s.Shape = draw.TriangleGlyph{}
				what = " p90"
			}
			f.Add(l, s)
			f.AddLegend(kind+what, l, s)
		}
	}
	f.NominalX(shown...)
	// Step times span two orders of magnitude (a decode step of one request
	// against a long prefill): a log axis keeps both readable.
	f.Y.Min, f.Y.Max = lo/2, hi*1.6
	f.Y.Scale = plot.LogScale{}
	f.Y.Tick.Marker = logTicks{}
	return f.Render(figW, figH, "svg")
}

// stageLatencyFigure draws each stage's p90 latency (and the end-to-end
// p90) as grouped bars, one bar per placement in the placement's colour.
func stageLatencyFigure(a *whatif.Audit) ([]byte, error) {
	if len(a.Placements) == 0 {
		return nil, noFigure("the run has no placements")
	}
	names := append(append([]string{}, a.Stages...), "end to end")
	f := plotstyle.New(a.Scenario+": p90 latency by stage", LabelStage, LabelLatencyP90Ms)
	n := len(a.Placements)
	w := vg.Points(math.Min(18, 120/float64(n)))
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
		bars.Color = plotstyle.Placement(i)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(n-1)/2) * w
		f.Add(bars)
		f.AddLegend(pl.Placement, bars)
	}
	f.NominalX(names...)
	f.Y.Min = 0
	return f.Render(figW, figH, "svg")
}

// throughputFigure draws request-window (filled) and full-process
// (outlined) throughput per placement, in the placement's colour, with the
// offered rate.
func throughputFigure(a *whatif.Audit) ([]byte, error) {
	if len(a.Placements) == 0 {
		return nil, noFigure("the run has no placements")
	}
	names := placementNames(*a)
	f := plotstyle.New(a.Scenario+": throughput per placement", LabelPlacement, LabelThroughput)
	w := vg.Points(26)
	bar := func(v float64, c color.Color, filled bool) (*plotter.BarChart, error) {
		b, err := plotter.NewBarChart(plotter.Values{v}, w)
		if err != nil {
			return nil, err
		}
		b.LineStyle.Color, b.LineStyle.Width = c, vg.Points(1.5)
		b.Color = color.White
		if filled {
			b.Color = c
		}
		return b, nil
	}
	for i, pl := range a.Placements {
		for j, v := range []float64{pl.WindowMeanRPS, pl.FullProcessMeanRPS} {
			b, err := bar(v, plotstyle.Placement(i), j == 0)
			if err != nil {
				return nil, err
			}
			b.XMin, b.Offset = float64(i), vg.Length(float64(j)-0.5)*w
			f.Add(b)
		}
	}
	for j, name := range []string{"request window (filled)", "full process (outlined)"} {
		b, err := bar(1, plotstyle.Measured, j == 0)
		if err != nil {
			return nil, err
		}
		f.AddLegend(name, b)
	}
	if a.OfferedRPS > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: a.OfferedRPS}, {X: float64(len(names)) - 0.5, Y: a.OfferedRPS}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Dashes = plotstyle.Reference, plotstyle.Dashes(1)
		f.Add(l)
		f.AddLegend("offered rate", l)
		f.Y.Max = a.OfferedRPS * 1.25
	}
	f.NominalX(names...)
	f.Y.Min = 0
	return f.Render(figW, figH, "svg")
}

// logTicks labels 1, 2 and 5 times each power of ten (plot.LogTicks labels
// only the powers, too few over a range of one or two decades).
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	if !(lo > 0 && hi >= lo && !math.IsInf(hi, 0)) {
		return nil // no decades to count: the axis is not a positive range
	}
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
