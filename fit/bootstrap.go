package fit

import (
	"fmt"
	"github.com/steplab/steplab/fpm"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
)

// Fitting methods.
const (
	MethodOLS     = "ols"      // least squares (QR); coefficients may go negative
	MethodNNLS    = "nnls"     // non-negative least squares (Lawson–Hanson)
	MethodHuber   = "huber"    // Huber robust regression (IRLS)
	MethodHuberNN = "huber-nn" // Huber with non-negative coefficients
)

// Methods lists the fitting methods.
var Methods = []string{MethodOLS, MethodNNLS, MethodHuber, MethodHuberNN}

// solveWith fits d with method; w are the row weights to use (W times
// bootstrap multiplicities; nil: d.W) and mult the multiplicities alone
// (nil: 1), which Huber needs for its median.
func solveWith(d *Design, method string, hopt HuberOptions, w, mult []float64) ([]float64, error) {
	if w == nil {
		w = d.W
	}
	g := NewGram(d.X, d.Y, w, d.P())
	switch method {
	case MethodOLS:
		return g.SolveLS()
	case MethodNNLS:
		x, _, err := g.SolveNNLS()
		return x, err
	case MethodHuber, MethodHuberNN:
		hopt.NonNegative = method == MethodHuberNN
		r, err := huberCore(d, mult, g, hopt)
		if err != nil {
			return nil, err
		}
		return r.Coef, nil
	}
	return nil, fmt.Errorf("fit: unknown method %q (want one of %v)", method, Methods)
}

// BootstrapOptions tunes the pairs bootstrap.
type BootstrapOptions struct {
	Replicates int     // default 200
	Level      float64 // central interval coverage, default 0.95
	Seed       uint64
	// Workers fits replicates in parallel (default 1). Results do not depend
	// on it: replicate b always draws from the stream (Seed, b).
	Workers int
}

// BootstrapResult holds the coefficient vectors of the bootstrap replicates
// and the percentile intervals they give.
type BootstrapResult struct {
	Terms  []string
	Coef   [][]float64 // [replicate][term]
	Level  float64
	Lo, Hi []float64 // percentile interval per term
	// Failed counts replicates whose resample could not be fitted (e.g. a
	// rare term never drawn); they are left out.
	Failed int
	// resid holds, per replicate, residDraws relative training residuals
	// drawn at random: with the replicate's prediction each gives a
	// predictive draw.
	resid [][]float64
	basis *fpm.Basis
}

// Bootstrap estimates the sampling distribution of the coefficients by the
// pairs bootstrap: each replicate resamples the n rows with replacement
// (as integer multiplicities, so no copy of X is made) and refits with the
// same method. Pairs, not residuals, are resampled because step-time noise
// grows with the step (heteroscedastic), which the pairs bootstrap
// respects. Intervals are percentile intervals. More than 10% failed
// replicates is an error.
func Bootstrap(d *Design, method string, hopt HuberOptions, opt BootstrapOptions) (*BootstrapResult, error) {
	if err := checkDesign(d); err != nil {
		return nil, err
	}
	if opt.Replicates <= 0 {
		opt.Replicates = 200
	}
	if opt.Level <= 0 || opt.Level >= 1 {
		opt.Level = 0.95
	}
	if opt.Workers <= 0 {
		opt.Workers = 1
	}
	basis, err := fpm.NewBasis(d.Terms)
	if err != nil {
		return nil, err
	}
	base, err := solveWith(d, method, hopt, nil, nil)
	if err != nil {
		return nil, err
	}
	rel := relResiduals(d, base)
	n, B := d.N(), opt.Replicates
	coefs := make([][]float64, B)
	resid := make([][]float64, B)
	errs := make([]error, B)
	var wg sync.WaitGroup
	next := make(chan int)
	for k := 0; k < opt.Workers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mult := make([]float64, n)
			w := make([]float64, n)
			for b := range next {
				rng := rand.New(rand.NewPCG(opt.Seed, uint64(b)+1))
				clear(mult)
				for i := 0; i < n; i++ {
					mult[rng.IntN(n)]++
				}
				for i := range w {
					w[i] = mult[i]
					if d.W != nil {
						w[i] *= d.W[i]
					}
				}
				coefs[b], errs[b] = solveWith(d, method, hopt, w, mult)
				resid[b] = make([]float64, residDraws)
				for k := range resid[b] {
					if len(rel) > 0 {
						resid[b][k] = rel[rng.IntN(len(rel))]
					}
				}
			}
		}()
	}
	for b := 0; b < B; b++ {
		next <- b
	}
	close(next)
	wg.Wait()
	res := &BootstrapResult{Terms: append([]string(nil), d.Terms...), Level: opt.Level, basis: basis}
	for b := 0; b < B; b++ {
		if errs[b] != nil || coefs[b] == nil {
			res.Failed++
			continue
		}
		res.Coef = append(res.Coef, coefs[b])
		res.resid = append(res.resid, resid[b])
	}
	if res.Failed*10 > B {
		return nil, fmt.Errorf("fit: bootstrap: %d of %d replicates could not be fitted (first: %v)", res.Failed, B, firstErr(errs))
	}
	p := d.P()
	res.Lo, res.Hi = make([]float64, p), make([]float64, p)
	col := make([]float64, len(res.Coef))
	for j := 0; j < p; j++ {
		for b, c := range res.Coef {
			col[b] = c[j]
		}
		sort.Float64s(col)
		res.Lo[j] = fpm.SortedQuantile(col, (1-opt.Level)/2)
		res.Hi[j] = fpm.SortedQuantile(col, (1+opt.Level)/2)
	}
	return res, nil
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// residDraws is the number of residuals drawn per replicate for prediction
// intervals (200 replicates give 1,600 predictive draws).
const residDraws = 8

// relResiduals returns (y − ŷ)/ŷ for the rows with ŷ > 0.
func relResiduals(d *Design, coef []float64) []float64 {
	out := make([]float64, 0, d.N())
	for i := 0; i < d.N(); i++ {
		yh := dot(d.Row(i), coef)
		if yh > 0 {
			out = append(out, (d.Y[i]-yh)/yh)
		}
	}
	return out
}

// PredictInterval returns a bootstrap prediction interval for a new step:
// the percentiles, over replicates, of the replicate's prediction times
// (1 + a relative training residual drawn for that replicate), eight draws
// per replicate. It carries
// both the coefficient uncertainty and the step-to-step noise. mid is the
// median draw.
func (r *BootstrapResult) PredictInterval(f fpm.Features, coverage float64) (mid, lo, hi float64) {
	x := r.basis.Eval(f, make([]float64, r.basis.Len()))
	draws := make([]float64, 0, len(r.Coef)*residDraws)
	for b, c := range r.Coef {
		yh := dot(x, c)
		for _, e := range r.resid[b] {
			draws = append(draws, yh*(1+e))
		}
	}
	sort.Float64s(draws)
	mid = fpm.SortedQuantile(draws, 0.5)
	lo = fpm.SortedQuantile(draws, (1-coverage)/2)
	hi = fpm.SortedQuantile(draws, (1+coverage)/2)
	return mid, math.Max(lo, 0), hi
}

// Cov returns the covariance matrix of the coefficients over the
// replicates (p×p, in Terms order): what fpm.Linear.CoefCov holds.
func (r *BootstrapResult) Cov() [][]float64 {
	p, n := len(r.Terms), float64(len(r.Coef))
	mean := make([]float64, p)
	for _, c := range r.Coef {
		for j, v := range c {
			mean[j] += v / n
		}
	}
	cov := make([][]float64, p)
	for i := range cov {
		cov[i] = make([]float64, p)
	}
	if n < 2 {
		return cov
	}
	for _, c := range r.Coef {
		for i := range cov {
			di := c[i] - mean[i]
			for j := range cov[i] {
				cov[i][j] += di * (c[j] - mean[j]) / (n - 1)
			}
		}
	}
	return cov
}

// CoefInterval returns the percentile interval of term j at another
// coverage than the one computed.
func (r *BootstrapResult) CoefInterval(j int, coverage float64) (lo, hi float64) {
	col := make([]float64, len(r.Coef))
	for b, c := range r.Coef {
		col[b] = c[j]
	}
	sort.Float64s(col)
	return fpm.SortedQuantile(col, (1-coverage)/2), fpm.SortedQuantile(col, (1+coverage)/2)
}
