package fit

import (
	"fmt"
	"github.com/steplab/steplab/fpm"
	"slices"
)

// Policies for terms the data cannot identify (Options.Degenerate): terms
// zero or constant on every row, or linear combinations of other terms.
const (
	// DegenerateAuto drops such terms when the basis is the default one
	// (Options.Terms nil) and refuses the fit when the caller named the
	// terms: a default basis meets data of every kind (a decode grid has
	// no prefill KV, a trace without prefix hits no cached prefill), while
	// a named term the data cannot inform is usually a selection mistake.
	// The zero value means DegenerateAuto.
	DegenerateAuto = "auto"
	// DegenerateError refuses the fit, naming the terms.
	DegenerateError = "error"
	// DegenerateDrop leaves such terms out of the model and lists them in
	// Result.Dropped with the reason. The model then has no such term at
	// all, rather than a coefficient of 0 that would look like a
	// measurement. Of several collinear terms the ones earlier in the
	// basis stay (see identifiable).
	DegenerateDrop = "drop"
)

// Options configures Linear.
type Options struct {
	Terms  []string // nil: fpm.DefaultTerms
	Method string   // MethodNNLS by default
	Huber  HuberOptions
	// Relative weights rows by 1/y², minimising relative rather than
	// absolute error (steps span three orders of magnitude).
	Relative   bool
	Degenerate string // DegenerateAuto (default), DegenerateError or DegenerateDrop
	// Bootstrap replicates for coefficient intervals (0: none); Level is
	// their coverage (default 0.95), Seed the random stream, Workers the
	// parallelism.
	Bootstrap int
	Level     float64
	Seed      uint64
	Workers   int
}

// DroppedTerm is a term left out under DegenerateDrop, and why.
type DroppedTerm struct {
	Term   string `json:"term"`
	Reason string `json:"reason"`
}

// Result is a fitted linear model with what the fit learnt on the way.
type Result struct {
	Model   *fpm.Linear
	Method  string
	Rows    int
	Dropped []DroppedTerm
	// Huber: the final residual scale and IRLS iterations.
	HuberScale float64
	Iterations int
	// Boot is the bootstrap behind Model.CoefLo/CoefHi (nil without one).
	Boot *BootstrapResult
}

// Linear fits the linear basis model to the data. The model's residual
// quantiles (relative, from the training rows) give its prediction
// intervals; with Bootstrap > 0 its coefficients carry percentile
// intervals. Terms the data cannot identify are dropped or refused as
// Options.Degenerate says; any other degenerate data is an error wrapping
// one of the sentinel errors of this package (see errors.go), and no model
// is returned with it.
func Linear(d *Data, opt Options) (*Result, error) {
	terms := opt.Terms
	if terms == nil {
		terms = fpm.DefaultTerms
	}
	method := opt.Method
	if method == "" {
		method = MethodNNLS
	}
	if !slices.Contains(Methods, method) {
		return nil, fmt.Errorf("fit: unknown method %q (want one of %v)", method, Methods)
	}
	policy := opt.Degenerate
	if policy == "" || policy == DegenerateAuto {
		policy = DegenerateDrop
		if opt.Terms != nil {
			policy = DegenerateError
		}
	}
	var dropped []DroppedTerm
	switch policy {
	case DegenerateError:
		if err := unrecordedError(d, terms); err != nil {
			return nil, err
		}
	case DegenerateDrop:
		var err error
		if terms, dropped, err = identifiable(d, terms, opt.Relative); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("fit: degenerate-term policy %q: want %q, %q or %q", opt.Degenerate, DegenerateAuto, DegenerateError, DegenerateDrop)
	}
	ds, err := d.design(terms, opt.Relative)
	if err != nil {
		return nil, err
	}
	if err := checkDesign(ds); err != nil {
		return nil, err
	}
	g := NewGram(ds.X, ds.Y, ds.W, ds.P())
	if err := g.CheckRank(ds.Terms); err != nil {
		return nil, err
	}
	res := &Result{Method: method, Rows: ds.N(), Dropped: dropped}
	var coef []float64
	switch method {
	case MethodOLS:
		coef, err = OLS(ds)
	case MethodNNLS:
		coef, res.Iterations, err = g.SolveNNLS()
	default:
		h := opt.Huber
		h.NonNegative = method == MethodHuberNN
		var hr *HuberResult
		if hr, err = huberCore(ds, nil, g, h); err == nil {
			coef, res.HuberScale, res.Iterations = hr.Coef, hr.Scale, hr.Iterations
		}
	}
	if err != nil {
		return nil, err
	}
	m, err := fpm.NewLinear(ds.Terms, coef)
	if err != nil {
		return nil, err
	}
	if m.Residuals, err = fpm.NewResidualQuantiles(fpm.ScaleRelative, relResiduals(ds, coef), nil, "training"); err != nil {
		return nil, fmt.Errorf("fit: no positive prediction to take residuals against: %w", err)
	}
	if opt.Bootstrap > 0 {
		boot, err := Bootstrap(ds, method, opt.Huber, BootstrapOptions{Replicates: opt.Bootstrap, Level: opt.Level, Seed: opt.Seed, Workers: opt.Workers})
		if err != nil {
			return nil, err
		}
		res.Boot = boot
		m.CoefLo, m.CoefHi, m.CoefLevel, m.CoefCov = boot.Lo, boot.Hi, boot.Level, boot.Cov()
	}
	res.Model = m
	return res, nil
}
