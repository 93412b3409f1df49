package fit

import (
	"cmp"
	"fmt"
	"github.com/steplab/steplab/fpm"
	"math"
	"slices"
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

// maxRegimeRows bounds the rows the search for regime bounds
// cross-validates: a grid has a few hundred, traffic thousands, which an
// evenly spaced sample of this many represents at a fraction of the cost
// (the pieces are then fitted on every row).
const maxRegimeRows = 512

// regimeRepeats is how many fold assignments (seeds Seed, Seed+1, ...)
// each row's held-out error is averaged over in the search for regime
// bounds: with one, which bounds pass RegimeZ on a few hundred grid rows
// depends on how the folds fell.
const regimeRepeats = 3

// RegimeReport is one piece of a kind's linear form split into regimes.
type RegimeReport struct {
	// Range says which steps the piece prices, e.g. "decode_requests <= 32".
	Range        string            `json:"range"`
	Rows         int               `json:"rows"`
	Terms        []string          `json:"terms"`
	Coefficients []fpm.Coefficient `json:"coefficients"`
	Dropped      []DroppedTerm     `json:"dropped_terms,omitempty"`
}

// regimeBounds chooses where the kind's linear form splits along the
// coordinate spec.Regimes (fpm.Regimes), from the rows idx, by held-out
// error: starting from the known bounds spec.Bounds (none when a piece
// they leave cannot be fitted) or one piece, each value of the coordinate in the
// data is tried as a bound (a piece prices the steps up to and including
// it, so steps between two measured values go to the upper piece); the
// bound whose pieces, each fitted on its own rows, give the smallest mean
// absolute relative error out of fold (opt.Folds folds, each row's error
// averaged over regimeRepeats seeded fold assignments) is kept
// if it cuts every row's error by RegimeZ standard errors on average;
// until no bound does. No bounds: one linear form. Of more than
// maxRegimeRows rows, an evenly spaced sample is searched.
//
// Each piece is fitted as Linear fits it, by NNLS (whatever the recipe's
// solver, which fits the pieces found): in the kind's error weighting,
// without the terms the piece's rows cannot identify (not recorded by the
// source, zero, or a combination of the terms before them), on at least
// max(5, 2×terms) rows. The search fits thousands of pieces, so it sums
// each term's Gram matrix over the rows sorted by the coordinate once, per
// fold, and reads a piece's off the prefix sums.
func regimeBounds(d *Data, idx []int, spec KindSpec, opt RecipeOptions) ([]float64, error) {
	fn, err := fpm.Coord(spec.Regimes)
	if err != nil {
		return nil, fmt.Errorf("fit: recipe kind %s regimes: %w", spec.Kind, err)
	}
	terms := slices.DeleteFunc(slices.Clone(spec.Terms), func(t string) bool { return d.Unrecorded[t] > 0 })
	if len(terms) == 0 {
		return nil, nil
	}
	if n := len(idx); n > maxRegimeRows {
		sample := make([]int, maxRegimeRows)
		for j := range sample {
			sample[j] = idx[j*n/maxRegimeRows]
		}
		idx = sample
	}
	var searches []*regimeSearch
	for r := range regimeRepeats {
		fold := Folds(len(idx), opt.Folds, opt.Seed+uint64(r))
		s, err := newRegimeSearch(d, idx, fold, fn, terms, spec.Relative, opt.Folds)
		if err != nil {
			return nil, err
		}
		searches = append(searches, s)
	}
	heldOut := func(upper []float64) []float64 {
		var sum []float64
		for _, s := range searches {
			e := s.heldOut(upper)
			if e == nil {
				return nil
			}
			if sum == nil {
				sum = make([]float64, len(e))
			}
			for i, v := range e {
				sum[i] += v / regimeRepeats
			}
		}
		return sum
	}
	upper := slices.Sorted(slices.Values(spec.Bounds))
	cur := heldOut(upper)
	if cur == nil && len(upper) > 0 { // a known bound leaves a piece the rows cannot fit
		upper, cur = nil, heldOut(nil)
	}
	if cur == nil {
		return nil, nil
	}
	cands := regimeCandidates(searches[0].x, opt.SnapRel)
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

// regimeSearch holds the rows of a regime search sorted by their
// coordinate x: the design (p terms a row), targets, weights, folds, and
// the prefix sums of the Gram matrix (XᵀWX then XᵀWy, p² + p values) over
// all rows and over each fold's rows.
type regimeSearch struct {
	terms     []string
	p, folds  int
	x, y, w   []float64
	design    []float64
	fold      []int
	all       [][]float64   // all[r]: rows [0, r)
	byFold    [][][]float64 // byFold[f][r]: rows [0, r) of fold f
	foldCount [][]int       // foldCount[f][r]: rows [0, r) of fold f
}

func newRegimeSearch(d *Data, idx, fold []int, coord fpm.TermFunc, terms []string, relative bool, folds int) (*regimeSearch, error) {
	b, err := fpm.NewBasis(terms)
	if err != nil {
		return nil, err
	}
	n, p := len(idx), b.Len()
	order := make([]int, n)
	for k := range order {
		order[k] = k
	}
	xk := make([]float64, n)
	for k, i := range idx {
		xk[k] = coord(d.Features[i])
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(xk[a], xk[b]) })
	s := &regimeSearch{terms: terms, p: p, folds: folds, x: make([]float64, n), y: make([]float64, n), w: make([]float64, n),
		design: make([]float64, n*p), fold: make([]int, n)}
	for r, k := range order {
		i := idx[k]
		s.x[r], s.y[r], s.w[r], s.fold[r] = xk[k], d.Y[i], 1, fold[k]
		if relative {
			s.w[r] = 1 / (d.Y[i] * d.Y[i])
		}
		b.Eval(d.Features[i], s.design[r*p:(r+1)*p])
	}
	m := p*p + p
	prefix := func(in func(r int) bool) ([][]float64, []int) {
		sums, counts := make([][]float64, n+1), make([]int, n+1)
		sums[0] = make([]float64, m)
		for r := range n {
			next := slices.Clone(sums[r])
			counts[r+1] = counts[r]
			if in(r) {
				counts[r+1]++
				row := s.design[r*p : (r+1)*p]
				for a, xa := range row {
					for c, xc := range row {
						next[a*p+c] += s.w[r] * xa * xc
					}
					next[p*p+a] += s.w[r] * xa * s.y[r]
				}
			}
			sums[r+1] = next
		}
		return sums, counts
	}
	s.all, _ = prefix(func(int) bool { return true })
	for f := range folds {
		sums, counts := prefix(func(r int) bool { return s.fold[r] == f })
		s.byFold, s.foldCount = append(s.byFold, sums), append(s.foldCount, counts)
	}
	return s, nil
}

// gram is the Gram matrix of the rows [lo, hi), less those of fold f
// (f < 0: none).
func (s *regimeSearch) gram(lo, hi, f int) *Gram {
	p := s.p
	g := &Gram{P: p, XtX: make([]float64, p*p), XtY: make([]float64, p)}
	for j := range p*p + p {
		v := s.all[hi][j] - s.all[lo][j]
		if f >= 0 {
			v -= s.byFold[f][hi][j] - s.byFold[f][lo][j]
		}
		if j < p*p {
			g.XtX[j] = v
		} else {
			g.XtY[j-p*p] = v
		}
	}
	return g
}

// heldOut is each row's out-of-fold absolute relative error under the
// pieces of upper (rows in coordinate order); nil when a piece cannot be
// fitted.
func (s *regimeSearch) heldOut(upper []float64) []float64 {
	n, p := len(s.x), s.p
	e := make([]float64, n)
	lo := 0
	for piece := 0; piece <= len(upper); piece++ {
		hi := n
		if piece < len(upper) {
			hi, _ = slices.BinarySearch(s.x, math.Nextafter(upper[piece], math.Inf(1)))
		}
		// The terms the piece identifies, in basis order.
		g := s.gram(lo, hi, -1)
		var kept []int
		var names []string
		for j := range p {
			if try := append(slices.Clone(kept), j); g.sub(try).CheckRank(append(slices.Clone(names), s.terms[j])) == nil {
				kept, names = try, append(names, s.terms[j])
			}
		}
		if len(kept) == 0 || hi-lo < max(5, 2*len(s.terms)) {
			return nil
		}
		for f := range s.folds {
			test := s.foldCount[f][hi] - s.foldCount[f][lo]
			if test == 0 {
				continue
			}
			if hi-lo-test < max(5, 2*len(kept)) {
				return nil
			}
			coef, _, err := s.gram(lo, hi, f).sub(kept).SolveNNLS()
			if err != nil {
				return nil
			}
			for r := lo; r < hi; r++ {
				if s.fold[r] != f {
					continue
				}
				var pred float64
				for a, j := range kept {
					pred += coef[a] * s.design[r*p+j]
				}
				e[r] = math.Abs(pred-s.y[r]) / s.y[r]
			}
		}
		lo = hi
	}
	return e
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
func fitPieces(d *Data, idx []int, coord string, upper []float64, opt Options) (*fpm.Regimes, []RegimeReport, error) {
	fn, err := fpm.Coord(coord)
	if err != nil {
		return nil, nil, err
	}
	x := make([]float64, len(idx))
	for k, i := range idx {
		x[k] = fn(d.Features[i])
	}
	g := &fpm.Regimes{Coord: coord, Upper: upper}
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
		a := fpm.LinearArtifact(r.Model)
		g.Pieces = append(g.Pieces, fpm.LinearForm{Rows: len(rows), Terms: a.Terms, Coefficients: a.Coefficients, CoefCov: a.CoefCov})
		reps = append(reps, RegimeReport{Range: g.Range(p), Rows: len(rows), Terms: a.Terms, Coefficients: a.Coefficients, Dropped: r.Dropped})
	}
	return g, reps, nil
}
