package fit

import (
	"fmt"
	"math"
)

// HuberOptions tunes Huber robust regression.
type HuberOptions struct {
	// K is the Huber threshold in units of the residual scale; 1.345 (the
	// default) gives 95% efficiency under Gaussian noise.
	K float64
	// NonNegative constrains the coefficients to be ≥ 0 (each IRLS step is
	// an NNLS solve).
	NonNegative bool
	// MaxIter bounds the IRLS iterations (default 100); Tol is the
	// convergence threshold on the relative change of the fitted
	// contributions (default 1e-7).
	MaxIter int
	Tol     float64
}

func (o *HuberOptions) defaults() {
	if o.K <= 0 {
		o.K = 1.345
	}
	if o.MaxIter <= 0 {
		o.MaxIter = 100
	}
	if o.Tol <= 0 {
		o.Tol = 1e-7
	}
}

// HuberResult is a robust fit.
type HuberResult struct {
	Coef []float64
	// Scale is the final robust residual scale, MAD/0.6745 (ns, or in the
	// units of √W·residual when the design is weighted).
	Scale      float64
	Iterations int
	// Weights are the final robust weights, in (0, 1]: 1 for rows within
	// K·Scale, less for the stragglers.
	Weights []float64
}

// Huber fits the design by Huber M-estimation with iteratively reweighted
// least squares: start from the least-squares fit; then repeatedly take the
// residual scale s = MAD/0.6745 (median absolute deviation from the median,
// robust to up to half the rows being outliers), weight each row by
// min(1, K·s/|r|), and re-solve the weighted problem on the Gram matrix.
// Stragglers (a GC pause, a preempted step) then pull on the fit with a
// bounded force instead of a quadratic one. d.W, if set, multiplies the
// robust weights (e.g. 1/y² for relative errors); the residual scale is
// then taken on √W·r.
func Huber(d *Design, opt HuberOptions) (*HuberResult, error) {
	if err := checkDesign(d); err != nil {
		return nil, err
	}
	g := NewGram(d.X, d.Y, d.W, d.P())
	if err := g.CheckRank(d.Terms); err != nil {
		return nil, err
	}
	return huberCore(d, nil, g, opt)
}

// huberCore runs IRLS on d with row multiplicities mult (nil: all 1; a
// bootstrap passes its resample counts). g is the Gram matrix of the
// starting fit (weights W·mult).
func huberCore(d *Design, mult []float64, g *Gram, opt HuberOptions) (*HuberResult, error) {
	opt.defaults()
	n, p := d.N(), d.P()
	solve := func(g *Gram) ([]float64, error) {
		if opt.NonNegative {
			x, _, err := g.SolveNNLS()
			return x, err
		}
		return g.SolveLS()
	}
	coef, err := solve(g)
	if err != nil {
		return nil, err
	}
	_, _, colScale := g.scaled()
	sqw := make([]float64, n) // √(base weight) per row
	for i := range sqw {
		sqw[i] = 1
		if d.W != nil {
			sqw[i] = math.Sqrt(d.W[i])
		}
	}
	var ySize float64 // mean |√W·y|: residuals below 1e-12 of it are rounding
	for i := range sqw {
		ySize += math.Abs(sqw[i]*d.Y[i]) / float64(n)
	}
	e := make([]float64, n)  // standardised residuals
	rw := make([]float64, n) // robust × base × multiplicity weights
	abs := make([]float64, 0, n)
	var scale float64
	for it := 1; it <= opt.MaxIter; it++ {
		abs = abs[:0]
		for i := 0; i < n; i++ {
			e[i] = sqw[i] * (d.Y[i] - dot(d.Row(i), coef))
			m := 1.0
			if mult != nil {
				m = mult[i]
			}
			for k := 0; k < int(m); k++ {
				abs = append(abs, e[i])
			}
		}
		med := median(abs)
		for i := range abs {
			abs[i] = math.Abs(abs[i] - med)
		}
		scale = median(abs) / 0.6745
		if scale <= 1e-12*ySize || math.IsNaN(scale) {
			// Over half the rows fit exactly (to rounding): nothing left to
			// down-weight.
			return &HuberResult{Coef: coef, Scale: 0, Iterations: it, Weights: ones(n)}, nil
		}
		thr := opt.K * scale
		for i := 0; i < n; i++ {
			w := 1.0
			if a := math.Abs(e[i]); a > thr {
				w = thr / a
			}
			rw[i] = w * sqw[i] * sqw[i]
			if mult != nil {
				rw[i] *= mult[i]
			}
		}
		next, err := solve(NewGram(d.X, d.Y, rw, p))
		if err != nil {
			return nil, err
		}
		var change, size float64
		for j := range next {
			change = math.Max(change, math.Abs(next[j]-coef[j])*colScale[j])
			size = math.Max(size, math.Abs(next[j])*colScale[j])
		}
		coef = next
		if change <= opt.Tol*size {
			weights := make([]float64, n)
			for i := range weights {
				weights[i] = 1
				if a := math.Abs(e[i]); a > thr {
					weights[i] = thr / a
				}
			}
			return &HuberResult{Coef: coef, Scale: scale, Iterations: it, Weights: weights}, nil
		}
	}
	return nil, fmt.Errorf("fit: Huber IRLS: %w in %d iterations", ErrNoConvergence, opt.MaxIter)
}

func ones(n int) []float64 {
	o := make([]float64, n)
	for i := range o {
		o[i] = 1
	}
	return o
}

// median returns the median of a (reordered in place) in expected O(n) by
// quickselect.
func median(a []float64) float64 {
	n := len(a)
	if n == 0 {
		return math.NaN()
	}
	k := n / 2
	hi := quickselect(a, k)
	if n%2 == 1 {
		return hi
	}
	// The lower middle is the largest value left of k.
	lo := a[0]
	for _, v := range a[1:k] {
		if v > lo {
			lo = v
		}
	}
	return (lo + hi) / 2
}

// quickselect reorders a so that a[k] is the k-th smallest, everything
// before it ≤ and everything after it ≥, and returns a[k].
func quickselect(a []float64, k int) float64 {
	lo, hi := 0, len(a)-1
	for lo < hi {
		// Median-of-three pivot.
		mid := lo + (hi-lo)/2
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		pivot := a[mid]
		i, j := lo, hi
		for i <= j {
			for a[i] < pivot {
				i++
			}
			for a[j] > pivot {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return a[k]
		}
	}
	return a[k]
}
