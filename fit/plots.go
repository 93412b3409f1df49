package fit

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/internal/plotstyle"
)

// Axis labels of the fit figures (with units). Tests look for them in
// the SVG output.
const (
	LabelMeasured    = "measured step time (ms)"
	LabelPredicted   = "predicted step time (ms)"
	LabelResidual    = "residual (predicted − measured) / measured (%)"
	LabelBatch       = "batch size (requests per step)"
	LabelKVTokens    = "KV tokens read per step"
	LabelStepTime    = "step time (ms)"
	LabelAPE         = "absolute percentage error (%)"
	LabelFractionLE  = "fraction of steps with error ≤ x"
	MaxPlottedPoints = 20000
)

// PlotOptions configures WritePlots.
type PlotOptions struct {
	// Formats are the file formats written (default png and svg).
	Formats []string
	// Title prefixes every figure title (e.g. the model or dataset name).
	Title string
	// Width and Height of each figure (default 16 cm × 13 cm: the legend is drawn below the plot area).
	Width, Height vg.Length
}

// WritePlots draws the fit figures of predictions pred of d's rows (m
// draws the model curve of the step-time figure; nil leaves it out) into
// dir, creating it, and returns the files written:
//
//   - predicted_vs_measured: every step, by kind, with the identity line;
//   - residuals_vs_batch and residuals_vs_kv: relative residual against
//     the batch size and against the KV tokens the step reads;
//   - time_vs_batch: decode steps' measured time against batch size, with
//     the model's curve at the median context per request of the data;
//   - error_cdf: the empirical CDF of the absolute percentage error, one
//     curve per step kind.
//
// Above MaxPlottedPoints rows the scatter plots show an evenly strided
// sample (the CDF uses every row).
func WritePlots(dir string, d *Data, pred []float64, m fpm.FPM, opt PlotOptions) ([]string, error) {
	if d.Len() == 0 {
		return nil, dataErr(ErrEmptySelection, "no rows to plot")
	}
	if len(pred) != d.Len() {
		return nil, fmt.Errorf("fit: plots: %d predictions for %d rows", len(pred), d.Len())
	}
	if len(opt.Formats) == 0 {
		opt.Formats = []string{"png", "svg"}
	}
	for _, f := range opt.Formats {
		if f != "png" && f != "svg" && f != "pdf" {
			return nil, fmt.Errorf("fit: plots: unknown format %q (want png, svg or pdf)", f)
		}
	}
	if opt.Width == 0 {
		opt.Width = 16 * vg.Centimeter
	}
	if opt.Height == 0 {
		opt.Height = 13 * vg.Centimeter
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fit: plots: %w", err)
	}
	ps := &plotSet{dir: dir, opt: opt, d: d, pred: pred, rows: sampleRows(d.Len(), MaxPlottedPoints), kinds: kindsOf(d)}
	for _, figure := range []func() error{ps.predictedVsMeasured, ps.residuals, func() error { return ps.timeVsBatch(m) }, ps.errorCDF} {
		if err := figure(); err != nil {
			return nil, err
		}
	}
	return ps.files, nil
}

// plotSet is the fit figures of one prediction, drawn one kind of figure
// at a time into dir.
type plotSet struct {
	dir  string
	opt  PlotOptions
	d    *Data
	pred []float64
	// rows are the rows the scatter plots show, kinds the step kinds of d.
	rows  []int
	kinds []string
	// files are the files written so far.
	files []string
}

func (ps *plotSet) title(s string) string {
	if ps.opt.Title != "" {
		return ps.opt.Title + ": " + s
	}
	return s
}

// save writes p as name in every format.
func (ps *plotSet) save(p *plotstyle.Figure, name string) error {
	for _, f := range ps.opt.Formats {
		path := filepath.Join(ps.dir, name+"."+f)
		if err := p.Save(ps.opt.Width, ps.opt.Height, path); err != nil {
			return fmt.Errorf("fit: plots: %w", err)
		}
		ps.files = append(ps.files, path)
	}
	return nil
}

// predictedVsMeasured draws every sampled step, by kind, with the identity
// line.
func (ps *plotSet) predictedVsMeasured() error {
	d, pred := ps.d, ps.pred
	p := plotstyle.New(ps.title("predicted vs measured"), LabelMeasured, LabelPredicted)
	hi := 0.0
	for _, kind := range ps.kinds {
		var xy plotter.XYs
		for _, i := range ps.rows {
			if d.Kind(i) == kind {
				xy = append(xy, plotter.XY{X: d.Y[i] / 1e6, Y: pred[i] / 1e6})
				hi = max(hi, d.Y[i]/1e6, pred[i]/1e6)
			}
		}
		if err := addScatter(p, xy, kind, plotstyle.Kind(kind)); err != nil {
			return err
		}
	}
	id, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: hi, Y: hi}})
	if err != nil {
		return err
	}
	id.Color, id.Dashes = plotstyle.Reference, plotstyle.Dashes(1)
	p.Add(id)
	p.AddLegend("identity (perfect prediction)", id)
	return ps.save(p, "predicted_vs_measured")
}

// residuals draws the relative residual against batch size and against
// the KV tokens a step reads.
func (ps *plotSet) residuals() error {
	d, pred := ps.d, ps.pred
	resid := func(i int) float64 { return 100 * (pred[i] - d.Y[i]) / d.Y[i] }
	for _, ax := range []struct {
		name, label string
		x           func(f fpm.Features) float64
	}{
		{"residuals_vs_batch", LabelBatch, func(f fpm.Features) float64 { return float64(BatchOf(f)) }},
		{"residuals_vs_kv", LabelKVTokens, func(f fpm.Features) float64 { return f.DecodeKVTokens + f.PrefillKVTokens }},
	} {
		p := plotstyle.New(ps.title("residuals against "+ax.label), ax.label, LabelResidual)
		for _, kind := range ps.kinds {
			var xy plotter.XYs
			for _, i := range ps.rows {
				if d.Kind(i) == kind {
					xy = append(xy, plotter.XY{X: ax.x(d.Features[i]), Y: resid(i)})
				}
			}
			if err := addScatter(p, xy, kind, plotstyle.Kind(kind)); err != nil {
				return err
			}
		}
		zero := plotter.NewFunction(func(float64) float64 { return 0 })
		zero.Color = plotstyle.Reference
		p.Add(zero)
		if err := ps.save(p, ax.name); err != nil {
			return err
		}
	}
	return nil
}

// timeVsBatch draws step time against batch size: decode steps (all steps
// if none) and m's curve at the median context per request (none when m
// is nil).
func (ps *plotSet) timeVsBatch(m fpm.FPM) error {
	d := ps.d
	p := plotstyle.New(ps.title("step time against batch size"), LabelBatch, LabelStepTime)
	var dec []int
	for _, i := range ps.rows {
		if d.Kind(i) == "decode" {
			dec = append(dec, i)
		}
	}
	what, colour := "decode steps (measured)", plotstyle.Kind("decode")
	if len(dec) == 0 {
		dec, what, colour = ps.rows, "steps (measured)", plotstyle.Measured
	}
	var xy plotter.XYs
	var ctx []float64
	maxB := 0.0
	for _, i := range dec {
		f := d.Features[i]
		b := float64(BatchOf(f))
		xy = append(xy, plotter.XY{X: b, Y: d.Y[i] / 1e6})
		maxB = max(maxB, b)
		if f.DecodeRequests > 0 {
			ctx = append(ctx, f.DecodeKVTokens/f.DecodeRequests)
		}
	}
	if err := addScatter(p, xy, what, colour); err != nil {
		return err
	}
	if m != nil && len(ctx) > 0 && maxB >= 1 {
		sort.Float64s(ctx)
		c := fpm.SortedQuantile(ctx, 0.5)
		var curve plotter.XYs
		for b := 1.0; b <= maxB; b++ {
			f := fpm.Features{DecodeRequests: b, DecodeKVTokens: b * c, PaddedBatch: b}
			curve = append(curve, plotter.XY{X: b, Y: m.PredictNs(f) / 1e6})
		}
		l, err := plotter.NewLine(curve)
		if err != nil {
			return err
		}
		l.Color, l.Width = plotstyle.Predicted, vg.Points(1.5)
		p.Add(l)
		p.AddLegend(fmt.Sprintf("model at %.0f KV tokens/request (median)", c), l)
	}
	return ps.save(p, "time_vs_batch")
}

// errorCDF draws the empirical CDF of the absolute percentage error, one
// curve per step kind, over every row.
func (ps *plotSet) errorCDF() error {
	d, pred := ps.d, ps.pred
	p := plotstyle.New(ps.title("error CDF by step kind"), LabelAPE, LabelFractionLE)
	p.Y.Min, p.Y.Max = 0, 1
	for _, kind := range ps.kinds {
		var apes []float64
		for i := 0; i < d.Len(); i++ {
			if d.Kind(i) == kind {
				apes = append(apes, ape(d.Y[i], pred[i]))
			}
		}
		sort.Float64s(apes)
		var cdf plotter.XYs
		step := max(1, len(apes)/2000)
		for j := 0; j < len(apes); j += step {
			cdf = append(cdf, plotter.XY{X: apes[j], Y: float64(j+1) / float64(len(apes))})
		}
		cdf = append(cdf, plotter.XY{X: apes[len(apes)-1], Y: 1})
		l, err := plotter.NewLine(cdf)
		if err != nil {
			return err
		}
		l.Color, l.Width = plotstyle.Kind(kind), vg.Points(1.5)
		p.Add(l)
		p.AddLegend(fmt.Sprintf("%s (n=%d, p90 %.1f%%)", kind, len(apes), fpm.SortedQuantile(apes, 0.9)), l)
	}
	return ps.save(p, "error_cdf")
}

func addScatter(p *plotstyle.Figure, xy plotter.XYs, name string, c color.Color) error {
	if len(xy) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(finite(xy))
	if err != nil {
		return fmt.Errorf("fit: plots: %w", err)
	}
	s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(1.6), Shape: draw.CircleGlyph{}}
	p.Add(s)
	p.AddLegend(name, s)
	return nil
}

func finite(xy plotter.XYs) plotter.XYs {
	out := xy[:0]
	for _, v := range xy {
		if !math.IsNaN(v.X) && !math.IsNaN(v.Y) && !math.IsInf(v.X, 0) && !math.IsInf(v.Y, 0) {
			out = append(out, v)
		}
	}
	return out
}

func sampleRows(n, limit int) []int {
	step := 1
	if n > limit {
		step = (n + limit - 1) / limit
	}
	out := make([]int, 0, n/step+1)
	for i := 0; i < n; i += step {
		out = append(out, i)
	}
	return out
}

func kindsOf(d *Data) []string {
	var ks []string
	for i := 0; i < d.Len(); i++ {
		if k := d.Kind(i); !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return ks
}
