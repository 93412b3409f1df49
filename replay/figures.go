package replay

import (
	"fmt"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/steplab/steplab/internal/plotstyle"
)

// savePlot writes p as name.png and name.svg in dir.
func savePlot(p *plotstyle.Figure, dir, name string) ([]string, error) {
	var out []string
	for _, ext := range []string{".png", ".svg"} {
		path := filepath.Join(dir, name+ext)
		if err := p.Save(18*vg.Centimeter, 11*vg.Centimeter, path); err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

// addRecPred draws a recorded curve (solid) and its prediction (dashed,
// named predName) on p; an empty curve is left out.
func addRecPred(p *plotstyle.Figure, rec, pred plotter.XYs, predName string) error {
	for i, d := range []struct {
		name string
		xy   plotter.XYs
	}{{"recorded", rec}, {predName, pred}} {
		if len(d.xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(d.xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = plotstyle.Measured, vg.Points(1)
		if i == 1 {
			l.Color, l.Dashes = plotstyle.Predicted, plotstyle.Dashes(1)
		}
		p.Add(l)
		p.AddLegend(d.name, l)
	}
	return nil
}

// StepFigures draws the step replay's figures into dir: recorded vs
// predicted over time (steps.time.{png,svg}) and the CDF of the absolute
// relative error per kind (steps.error_cdf.{png,svg}). It returns the files.
func StepFigures(s *StepSummary, dir string) ([]string, error) {
	var files []string
	if ser := s.Series; ser != nil && len(ser.T) > 0 {
		x := "time since start (s)"
		if ser.TIsIndex {
			x = "step (position in the steps table)"
		}
		p := plotstyle.New(fmt.Sprintf("%s: recorded vs predicted (mean per bin of %d steps)", ser.Field, max(1, int(s.Steps)/len(ser.T))), x, ser.Field+" (ms)")
		rec, pred := make(plotter.XYs, len(ser.T)), make(plotter.XYs, len(ser.T))
		for i := range ser.T {
			rec[i] = plotter.XY{X: ser.T[i], Y: ser.Rec[i]}
			pred[i] = plotter.XY{X: ser.T[i], Y: ser.Pred[i]}
		}
		if err := addRecPred(p, rec, pred, "predicted"); err != nil {
			return nil, err
		}
		f, err := savePlot(p, dir, "steps.time")
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	if len(s.cdf) > 0 {
		p := plotstyle.New(fmt.Sprintf("CDF of |relative error| of %s per step kind", s.PrimaryField),
			"|predicted − recorded| / recorded (%)", "fraction of steps")
		kinds := make([]string, 0, len(s.cdf))
		for k := range s.cdf {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		xmax := 0.0
		for _, k := range kinds {
			xmax = max(xmax, 100*s.cdf[k].Bucket(0.99))
		}
		if xmax == 0 {
			xmax = 1
		}
		for _, k := range kinds {
			h := s.cdf[k]
			n := h.Count()
			if n == 0 {
				continue
			}
			// From the share of exact predictions at 0, one point a bucket.
			xy := plotter.XYs{{X: 0, Y: 0}}
			var c uint64
			for x, k := range h.Buckets() {
				c += k
				if x == 0 {
					xy[0].Y = float64(c) / float64(n)
					continue
				}
				xy = append(xy, plotter.XY{X: min(100*x, xmax), Y: float64(c) / float64(n)})
			}
			if len(xy) == 1 {
				xy = append(xy, plotter.XY{X: xmax, Y: 1})
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, err
			}
			l.Color = plotstyle.Kind(k)
			l.Width = vg.Points(1.2)
			p.Add(l)
			p.AddLegend(fmt.Sprintf("%s (%d steps)", k, n), l)
		}
		p.X.Min, p.X.Max = 0, xmax
		p.Y.Min, p.Y.Max = 0, 1
		f, err := savePlot(p, dir, "steps.error_cdf")
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	return files, nil
}
