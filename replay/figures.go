package replay

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var palette = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255},
	color.RGBA{R: 255, G: 127, B: 14, A: 255},
	color.RGBA{R: 44, G: 160, B: 44, A: 255},
	color.RGBA{R: 214, G: 39, B: 40, A: 255},
}

// savePlot writes p as name.png and name.svg in dir.
func savePlot(p *plot.Plot, dir, name string) ([]string, error) {
	var out []string
	for _, ext := range []string{".png", ".svg"} {
		path := filepath.Join(dir, name+ext)
		if err := p.Save(18*vg.Centimeter, 10*vg.Centimeter, path); err != nil {
			return nil, fmt.Errorf("figure %s: %w", path, err)
		}
		out = append(out, path)
	}
	return out, nil
}

// addRecPred draws a recorded curve (solid) and its prediction (dashed,
// named predName) on p; an empty curve is left out.
func addRecPred(p *plot.Plot, rec, pred plotter.XYs, predName string) error {
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
		l.Color = palette[i]
		l.Width = vg.Points(1)
		if i == 1 {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(d.name, l)
	}
	return nil
}

// StepFigures draws the step replay's figures into dir: recorded vs
// predicted over time (steps.time.{png,svg}) and the CDF of the absolute
// relative error per kind (steps.error_cdf.{png,svg}). It returns the files.
func StepFigures(s *StepSummary, dir string) ([]string, error) {
	var files []string
	if ser := s.Series; ser != nil && len(ser.T) > 0 {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: recorded vs predicted (mean per bin of %d steps)", ser.Field, max(1, int(s.Steps)/len(ser.T)))
		p.X.Label.Text = "time since start (s)"
		if ser.TIsIndex {
			p.X.Label.Text = "step (position in the steps table)"
		}
		p.Y.Label.Text = ser.Field + " (ms)"
		rec, pred := make(plotter.XYs, len(ser.T)), make(plotter.XYs, len(ser.T))
		for i := range ser.T {
			rec[i] = plotter.XY{X: ser.T[i], Y: ser.Rec[i]}
			pred[i] = plotter.XY{X: ser.T[i], Y: ser.Pred[i]}
		}
		if err := addRecPred(p, rec, pred, "predicted"); err != nil {
			return nil, err
		}
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		f, err := savePlot(p, dir, "steps.time")
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	if len(s.cdf) > 0 {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("CDF of |relative error| of %s per step kind", s.PrimaryField)
		p.X.Label.Text = "|predicted − recorded| / recorded (%)"
		p.Y.Label.Text = "fraction of steps"
		kinds := make([]string, 0, len(s.cdf))
		for k := range s.cdf {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		xmax := 0.0
		for _, k := range kinds {
			xmax = max(xmax, 100*s.cdf[k].quantile(0.99))
		}
		if xmax == 0 {
			xmax = 1
		}
		for i, k := range kinds {
			h := s.cdf[k]
			if h.n == 0 {
				continue
			}
			var xy plotter.XYs
			var c uint64
			xy = append(xy, plotter.XY{X: 0, Y: float64(h.c[0]) / float64(h.n)})
			for b := 1; b < len(h.c); b++ {
				if h.c[b] == 0 {
					continue
				}
				c += h.c[b]
				x := 100 * relBucketMid(b)
				xy = append(xy, plotter.XY{X: min(x, xmax), Y: float64(c+h.c[0]) / float64(h.n)})
			}
			if len(xy) == 1 {
				xy = append(xy, plotter.XY{X: xmax, Y: 1})
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, err
			}
			l.Color = palette[i%len(palette)]
			l.Width = vg.Points(1.2)
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s (%d steps)", k, h.n), l)
		}
		p.X.Min, p.X.Max = 0, xmax
		p.Y.Min, p.Y.Max = 0, 1
		p.Legend.Top = false
		p.Legend.Left = false
		p.Legend.XOffs = -vg.Points(4)
		p.Legend.YOffs = vg.Points(4)
		p.Add(plotter.NewGrid())
		f, err := savePlot(p, dir, "steps.error_cdf")
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	return files, nil
}
