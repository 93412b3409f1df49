package model

import (
	"fmt"
	"math"
	"sort"
)

// Linear is the linear-basis forward-pass model (docs/architecture.md#forward-pass-model):
//
//	t(step) = Σ Coef[i] · term_i(features)     [ns]
//
// with non-negative coefficients when fitted by NNLS or non-negative Huber.
//
// Mixed steps. A mixed step is priced as its prefill plus the marginal cost
// of its decode work. The linear form embodies this by construction: every
// term but the fixed ones (const) is a sum over the step's work, and the
// features of a mixed step are the prefill features plus the decode
// features, so
//
//	t(mixed) = const + prefill terms + decode terms
//	         = t(prefill alone) + [t(decode alone) − const]
//
// i.e. the decode work adds exactly its marginal cost and the fixed cost is
// paid once. The grid form has no such additivity and composes mixed steps
// explicitly (see Grid).
type Linear struct {
	Terms []string
	Coef  []float64
	// CoefLo and CoefHi are a central interval of coverage CoefLevel on each
	// coefficient (bootstrap percentiles); nil when not estimated.
	CoefLo, CoefHi []float64
	CoefLevel      float64
	// Residuals describes the prediction error; nil when unknown, and then
	// PredictIntervalNs returns a zero-width interval.
	Residuals *ResidualQuantiles

	basis *Basis
}

// NewLinear builds a linear model from term names and coefficients.
func NewLinear(terms []string, coef []float64) (*Linear, error) {
	if len(terms) != len(coef) {
		return nil, fmt.Errorf("model: linear: %d terms but %d coefficients", len(terms), len(coef))
	}
	b, err := NewBasis(terms)
	if err != nil {
		return nil, err
	}
	for i, c := range coef {
		if math.IsNaN(c) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("model: linear: coefficient of %q is %v", terms[i], c)
		}
	}
	return &Linear{Terms: append([]string(nil), terms...), Coef: append([]float64(nil), coef...), basis: b}, nil
}

func (m *Linear) ensure() {
	if m.basis == nil {
		b, err := NewBasis(m.Terms)
		if err != nil {
			panic(err) // constructed outside NewLinear with a bad term
		}
		m.basis = b
	}
}

// PredictNs implements FPM. A Linear built by NewLinear or Load is safe for
// concurrent predictions; one built as a struct literal resolves its terms
// on first use, so make one prediction before sharing it.
func (m *Linear) PredictNs(f Features) float64 {
	m.ensure()
	var s float64
	for i, fn := range m.basis.funcs {
		s += m.Coef[i] * fn(f)
	}
	return s
}

// Contributions returns each term's share of the prediction (ns), in Terms
// order: a breakdown of why a step costs what it costs.
func (m *Linear) Contributions(f Features) []float64 {
	m.ensure()
	out := make([]float64, len(m.Terms))
	for i, fn := range m.basis.funcs {
		out[i] = m.Coef[i] * fn(f)
	}
	return out
}

// PredictIntervalNs implements IntervalFPM from the residual quantiles.
func (m *Linear) PredictIntervalNs(f Features, coverage float64) (mid, lo, hi float64) {
	mid = m.PredictNs(f)
	lo, hi = m.Residuals.Interval(mid, coverage)
	return mid, lo, hi
}

// Residual scales of ResidualQuantiles.
const (
	// ScaleRelative: residuals are (actual − predicted)/predicted; an
	// interval scales with the prediction (step times are heteroscedastic).
	ScaleRelative = "relative"
	// ScaleAbsolute: residuals are actual − predicted, in ns.
	ScaleAbsolute = "absolute"
)

// ResidualQuantiles is an empirical residual distribution stored as
// quantiles at probabilities P (ascending). A prediction interval of
// coverage c takes the residual quantiles at (1−c)/2 and (1+c)/2, linearly
// interpolated between stored probabilities and clamped to the stored range
// (so coverage beyond the outermost stored probabilities is not honoured).
type ResidualQuantiles struct {
	Scale  string    `json:"scale"`
	P      []float64 `json:"p"`
	Values []float64 `json:"values"`
	// N is the number of residuals the quantiles were taken from; Source
	// says which (e.g. "training", "cross-validation", "repeats").
	N      int    `json:"n"`
	Source string `json:"source,omitempty"`
}

// DefaultResidualP are the probabilities at which residual quantiles are
// stored: enough for central 50/80/90/95/98/99% intervals.
var DefaultResidualP = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975, 0.99, 0.995}

// NewResidualQuantiles takes the empirical quantiles (linear interpolation
// between order statistics) of residuals at probabilities p (nil means
// DefaultResidualP). residuals is sorted in place.
func NewResidualQuantiles(scale string, residuals []float64, p []float64, source string) (*ResidualQuantiles, error) {
	if scale != ScaleRelative && scale != ScaleAbsolute {
		return nil, fmt.Errorf("model: residual scale %q: want %q or %q", scale, ScaleRelative, ScaleAbsolute)
	}
	if len(residuals) == 0 {
		return nil, fmt.Errorf("model: residual quantiles: no residuals")
	}
	if p == nil {
		p = DefaultResidualP
	}
	sort.Float64s(residuals)
	q := &ResidualQuantiles{Scale: scale, P: append([]float64(nil), p...), Values: make([]float64, len(p)), N: len(residuals), Source: source}
	for i, pi := range p {
		q.Values[i] = SortedQuantile(residuals, pi)
	}
	return q, nil
}

// SortedQuantile is the p-quantile of sorted x with linear interpolation
// between order statistics (type 7, as numpy's default).
func SortedQuantile(x []float64, p float64) float64 {
	n := len(x)
	if n == 0 {
		return math.NaN()
	}
	if p <= 0 {
		return x[0]
	}
	if p >= 1 {
		return x[n-1]
	}
	h := p * float64(n-1)
	i := int(h)
	if i >= n-1 {
		return x[n-1]
	}
	return x[i] + (h-float64(i))*(x[i+1]-x[i])
}

// Quantile returns the residual quantile at probability p.
func (q *ResidualQuantiles) Quantile(p float64) float64 {
	return interp1(q.P, q.Values, p)
}

// Interval turns a point prediction into a central interval of the given
// coverage. A nil receiver gives a zero-width interval.
func (q *ResidualQuantiles) Interval(mid, coverage float64) (lo, hi float64) {
	if q == nil || len(q.P) == 0 || !(coverage > 0) {
		return mid, mid
	}
	if coverage >= 1 {
		coverage = 1
	}
	rlo, rhi := q.Quantile((1-coverage)/2), q.Quantile((1+coverage)/2)
	if q.Scale == ScaleAbsolute {
		lo, hi = mid+rlo, mid+rhi
	} else {
		lo, hi = mid*(1+rlo), mid*(1+rhi)
	}
	if lo < 0 {
		lo = 0
	}
	if lo > mid {
		lo = mid
	}
	if hi < mid {
		hi = mid
	}
	return lo, hi
}

// interp1 interpolates y(x) linearly on ascending xs, clamped at the ends.
func interp1(xs, ys []float64, x float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	if x <= xs[0] {
		return ys[0]
	}
	if x >= xs[n-1] {
		return ys[n-1]
	}
	i := sort.SearchFloat64s(xs, x) // xs[i-1] < x <= xs[i]
	x0, x1 := xs[i-1], xs[i]
	t := (x - x0) / (x1 - x0)
	return ys[i-1] + t*(ys[i]-ys[i-1])
}
