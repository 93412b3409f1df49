package planner

import (
	"cmp"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/steplab/steplab/internal/plotstyle"
)

// Files Write creates beside the sweep's table.
const (
	SummaryFile  = "plan.json"
	FrontierFig  = "frontier" // .png and .svg: output tokens/s per GPU against ITL
	CostFig      = "cost"     // .png and .svg: $ per million output tokens against ITL
	ChosenDir    = "chosen"
	VLLMFile     = "vllm_args.txt"
	GraphFile    = "dynamo_graph.yaml"
	ScenarioFile = "scenario.yaml"
)

// Write stores the summary, the frontier figures and, when a candidate
// was chosen, its launch settings in dir.
func Write(dir, name string, cs []*Candidate) error {
	s := Summarise(cs)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := figure(filepath.Join(dir, FrontierFig), name+": goodput per GPU within the SLO", "output tokens/s per GPU", cs, s,
		func(c *Candidate) float64 { return c.TokensPerSPerGPU }, 1); err != nil {
		return err
	}
	if err := figure(filepath.Join(dir, CostFig), name+": cost within the SLO", "$ per million output tokens", cs, s,
		func(c *Candidate) float64 { return c.CostPerMTokens }, -1); err != nil {
		return err
	}
	if s.Chosen < 0 {
		return nil
	}
	return writeLaunch(filepath.Join(dir, ChosenDir), name, cs[s.Chosen])
}

func writeLaunch(dir, name string, c *Candidate) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g, err := c.Config.Graph(name)
	if err != nil {
		return err
	}
	// The model is the plan's reference (a catalogue name or a config.json):
	// the serving side names the checkpoint it stands for.
	args := fmt.Sprintf("# one line per pool; %s is the plan's model: serve the checkpoint it stands for\n%s\n", c.Config.Model,
		strings.Join(c.Config.VLLMArgs(), "\n"))
	for f, b := range map[string][]byte{VLLMFile: []byte(args), GraphFile: g,
		ScenarioFile: []byte(c.Scenario)} {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// figure draws every feasible candidate at its ITL (x) and y, one colour
// per GPU type, the frontier of the two (the best y at each ITL or less;
// sign 1: higher is better, -1: lower: a cost, on a log scale when the
// costliest is over ten times the cheapest) as a line and the choice
// ringed.
func figure(path, title, ylabel string, cs []*Candidate, s Summary, y func(*Candidate) float64, sign float64) error {
	f := plotstyle.New(title, "ITL at the SLO percentile, at the goodput rate (ms)", ylabel)
	// A series per GPU (its colour) and layout kind (its glyph).
	type key struct{ hw, kind int }
	var hws []string
	series := map[key]plotter.XYs{}
	var keys []key
	var all plotter.XYs
	for _, c := range cs {
		if !c.Feasible() {
			continue
		}
		hw := slices.Index(hws, c.Config.Hardware)
		if hw < 0 {
			hws, hw = append(hws, c.Config.Hardware), len(hws)
		}
		k := key{hw, layoutKind(c.Config)}
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		series[k] = append(series[k], plotter.XY{X: c.ITLMs, Y: y(c)})
		all = append(all, plotter.XY{X: c.ITLMs, Y: y(c)})
	}
	if lo, hi := yRange(all); sign < 0 && hi > 10*lo {
		f.Y.Scale, f.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		f.Y.Label.Text += " (log scale)"
	}
	kinds := map[int]bool{}
	for _, k := range keys {
		sc, err := plotter.NewScatter(series[k])
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = plotstyle.Placement(k.hw), layoutGlyphs[k.kind].glyph, vg.Points(3)
		f.Add(sc)
		kinds[k.kind] = true
	}
	for i, hw := range hws {
		f.AddLegend(hw, legendGlyph(plotstyle.Placement(i), draw.BoxGlyph{}))
	}
	for i, g := range layoutGlyphs {
		if kinds[i] {
			f.AddLegend(g.name, legendGlyph(plotstyle.Reference, g.glyph))
		}
	}
	if front := envelope(all, sign); len(front) > 0 {
		l, err := plotter.NewLine(front)
		if err != nil {
			return err
		}
		l.Color, l.Dashes = plotstyle.Reference, plotstyle.Dashes(1)
		f.Add(l)
		f.AddLegend("frontier: the best at this ITL or less", l)
	}
	if s.Chosen >= 0 {
		c := cs[s.Chosen]
		ch, err := plotter.NewScatter(plotter.XYs{{X: c.ITLMs, Y: y(c)}})
		if err != nil {
			return err
		}
		ch.GlyphStyle.Color, ch.GlyphStyle.Shape, ch.GlyphStyle.Radius = plotstyle.Reference, draw.RingGlyph{}, vg.Points(7)
		f.Add(ch)
		f.AddLegend(fmt.Sprintf("chosen: %s %s TP%d", c.Config.Hardware, c.Config.Layout(), c.Config.TensorParallel), ch)
	}
	for _, ext := range []string{".png", ".svg"} {
		if err := f.Save(7*vg.Inch, 5*vg.Inch, path+ext); err != nil {
			return err
		}
	}
	return nil
}

// yRange is the least and the most y of xy (0, 0 when empty).
func yRange(xy plotter.XYs) (lo, hi float64) {
	for i, p := range xy {
		if i == 0 || p.Y < lo {
			lo = p.Y
		}
		hi = max(hi, p.Y)
	}
	return lo, hi
}

// legendGlyph is a legend entry's glyph.
func legendGlyph(c color.Color, g draw.GlyphDrawer) plot.Thumbnailer {
	return &plotter.Scatter{GlyphStyle: draw.GlyphStyle{Color: c, Shape: g, Radius: vg.Points(3)}}
}

// layoutGlyphs mark a candidate's layout kind (layoutKind indexes them).
var layoutGlyphs = []struct {
	name  string
	glyph draw.GlyphDrawer
}{{"agg", draw.CircleGlyph{}}, {"prefill/decode", draw.TriangleGlyph{}}, {"agg, expert-parallel", draw.CrossGlyph{}},
	{"prefill/decode, expert-parallel", draw.PlusGlyph{}}}

// layoutKind is 0 agg, 1 prefill/decode, +2 with expert parallelism.
func layoutKind(c Config) int {
	k := 0
	if len(c.Pools) == 2 {
		k = 1
	}
	if c.Pools[0].ExpertParallel > 1 {
		k += 2
	}
	return k
}

// envelope is the staircase of the points no other beats at a lower or
// equal x: sign·y strictly improving as x grows.
func envelope(xy plotter.XYs, sign float64) plotter.XYs {
	pts := slices.Clone(xy)
	slices.SortFunc(pts, func(a, b plotter.XY) int {
		if c := cmp.Compare(a.X, b.X); c != 0 {
			return c
		}
		return cmp.Compare(sign*b.Y, sign*a.Y)
	})
	var out plotter.XYs
	for _, p := range pts {
		if len(out) == 0 || sign*p.Y > sign*out[len(out)-1].Y {
			out = append(out, p)
		}
	}
	return out
}
