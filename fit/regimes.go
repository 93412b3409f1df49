package fit

import (
	"fmt"
	"math"
	"slices"

	"github.com/steplab/steplab/model"
)

// RegimeZ is how many standard errors one more regime bound must cut the
// held-out error of a kind's linear form by to be kept (FitRecipe): the
// mean of the rows' paired differences in absolute relative error, over
// its standard error. A bound that buys less is noise in the grid, not a
// regime of the kernel.
const RegimeZ = 2.0

// maxRegimeCandidates bounds the values tried as regime bounds: a grid
// sweeps a few batch sizes, traffic hundreds, and every candidate costs a
// cross-validation.
const maxRegimeCandidates = 32

// RegimeReport is one piece of a kind's linear form split into regimes.
type RegimeReport struct {
	// Range says which steps the piece prices, e.g. "decode_requests <= 32".
	Range        string              `json:"range"`
	Rows         int                 `json:"rows"`
	Terms        []string            `json:"terms"`
	Coefficients []model.Coefficient `json:"coefficients"`
	Dropped      []DroppedTerm       `json:"dropped_terms,omitempty"`
}

// regimeBounds chooses where the kind's linear form splits along the
// coordinate spec.Regimes (model.Regimes), from the rows idx, by held-out
// error: starting from one piece, each value of the coordinate in the
// data is tried as a bound (a piece prices the steps up to and including
// it, so steps between two measured values go to the upper piece); the
// bound whose pieces, each fitted on its own rows, give the smallest mean
// absolute relative error out of fold (opt.Folds folds, seeded) is kept
// if it cuts every row's error by RegimeZ standard errors on average;
// until no bound does. A piece needs max(5, 2×terms) rows. No bounds:
// one linear form.
func regimeBounds(d *Data, idx []int, spec KindSpec, opt RecipeOptions) ([]float64, error) {
	fn, err := model.Coord(spec.Regimes)
	if err != nil {
		return nil, fmt.Errorf("fit: recipe kind %s regimes: %w", spec.Kind, err)
	}
	x := make([]float64, len(idx))
	for k, i := range idx {
		x[k] = fn(d.Features[i])
	}
	lin := Options{Terms: spec.Terms, Method: opt.Method, Relative: spec.Relative, Degenerate: DegenerateDrop}
	minRows := max(5, 2*len(spec.Terms))
	fold := Folds(len(idx), opt.Folds, opt.Seed)
	// heldOut is each row's out-of-fold absolute relative error under the
	// pieces of upper; nil when a piece is too small or cannot be fitted.
	heldOut := func(upper []float64) []float64 {
		e := make([]float64, len(idx))
		for _, ks := range splitRegimes(x, upper) {
			if len(ks) < minRows {
				return nil
			}
			for f := 0; f < opt.Folds; f++ {
				var train, test []int
				for _, k := range ks {
					if fold[k] == f {
						test = append(test, k)
					} else {
						train = append(train, idx[k])
					}
				}
				if len(test) == 0 {
					continue
				}
				r, err := Linear(d.Subset(train), lin)
				if err != nil {
					return nil
				}
				for _, k := range test {
					i := idx[k]
					e[k] = math.Abs(r.Model.PredictNs(d.Features[i])-d.Y[i]) / d.Y[i]
				}
			}
		}
		return e
	}
	var upper []float64
	cur := heldOut(upper)
	if cur == nil {
		return nil, nil
	}
	cands := regimeCandidates(x, opt.SnapRel)
	for {
		var next, nextErr []float64
		best := mean(cur)
		for _, c := range cands {
			if slices.Contains(upper, c) {
				continue
			}
			try := append(slices.Clone(upper), c)
			slices.Sort(try)
			if e := heldOut(try); e != nil && mean(e) < best {
				next, nextErr, best = try, e, mean(e)
			}
		}
		if next == nil || !significant(cur, nextErr) {
			return upper, nil
		}
		upper, cur = next, nextErr
	}
}

// mean is the mean of v.
func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// significant reports whether the errors after are smaller than before
// by RegimeZ standard errors of their paired differences.
func significant(before, after []float64) bool {
	n := float64(len(before))
	var s, ss float64
	for i := range before {
		d := before[i] - after[i]
		s += d
		ss += d * d
	}
	m := s / n
	v := (ss/n - m*m) * n / max(n-1, 1)
	return m > 0 && m > RegimeZ*math.Sqrt(max(v, 0)/n)
}

// splitRegimes splits positions 0..len(x)-1 into the pieces of bounds
// upper by their coordinate x.
func splitRegimes(x, upper []float64) [][]int {
	out := make([][]int, len(upper)+1)
	for k, v := range x {
		p := 0
		for p < len(upper) && v > upper[p] {
			p++
		}
		out[p] = append(out[p], k)
	}
	return out
}

// regimeCandidates are the values tried as regime bounds: the largest
// value of each cluster of the coordinate (values within snapRel of each
// other, as a table's nodes), but the last; thinned evenly to
// maxRegimeCandidates.
func regimeCandidates(x []float64, snapRel float64) []float64 {
	_, id := snap(x, snapRel)
	var top []float64
	for k, v := range x {
		for len(top) <= id[k] {
			top = append(top, math.Inf(-1))
		}
		top[id[k]] = math.Max(top[id[k]], v)
	}
	if len(top) < 2 {
		return nil
	}
	top = top[:len(top)-1]
	if n := len(top); n > maxRegimeCandidates {
		thin := make([]float64, 0, maxRegimeCandidates)
		for i := range maxRegimeCandidates {
			thin = append(thin, top[i*n/maxRegimeCandidates])
		}
		top = thin
	}
	return top
}

// fitPieces fits the linear form of each regime of bounds upper along
// coord on its rows of idx.
func fitPieces(d *Data, idx []int, coord string, upper []float64, opt Options) (*model.Regimes, []RegimeReport, error) {
	fn, err := model.Coord(coord)
	if err != nil {
		return nil, nil, err
	}
	x := make([]float64, len(idx))
	for k, i := range idx {
		x[k] = fn(d.Features[i])
	}
	g := &model.Regimes{Coord: coord, Upper: upper}
	var reps []RegimeReport
	for p, ks := range splitRegimes(x, upper) {
		rows := make([]int, len(ks))
		for j, k := range ks {
			rows[j] = idx[k]
		}
		r, err := Linear(d.Subset(rows), opt)
		if err != nil {
			return nil, nil, fmt.Errorf("regime %s: %w", g.Range(p), err)
		}
		a := model.LinearArtifact(r.Model)
		g.Pieces = append(g.Pieces, model.LinearForm{Rows: len(rows), Terms: a.Terms, Coefficients: a.Coefficients, CoefCov: a.CoefCov})
		reps = append(reps, RegimeReport{Range: g.Range(p), Rows: len(rows), Terms: a.Terms, Coefficients: a.Coefficients, Dropped: r.Dropped})
	}
	return g, reps, nil
}
