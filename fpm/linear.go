package fpm

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
	// CoefCov is the covariance of the coefficients (of the bootstrap
	// replicates); nil when not estimated. With it, an interval adds the
	// coefficient uncertainty of the prediction to the residual spread.
	CoefCov [][]float64
	// Residuals describes the prediction error; nil when unknown, and then
	// PredictIntervalNs returns a zero-width interval.
	Residuals *ResidualQuantiles

	basis *Basis
}

// NewLinear builds a linear model from term names and coefficients.
func NewLinear(terms []string, coef []float64) (*Linear, error) {
	if len(terms) != len(coef) {
		return nil, fmt.Errorf("fpm: linear: %d terms but %d coefficients", len(terms), len(coef))
	}
	b, err := NewBasis(terms)
	if err != nil {
		return nil, err
	}
	for i, c := range coef {
		if math.IsNaN(c) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("fpm: linear: coefficient of %q is %v", terms[i], c)
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

// PredictIntervalNs implements IntervalFPM: the residual quantiles'
// spread combined with the coefficient uncertainty (CoefCov), see
// ResidualQuantiles.IntervalSE.
func (m *Linear) PredictIntervalNs(f Features, coverage float64) (mid, lo, hi float64) {
	mid, se := m.predictSE(f)
	lo, hi = m.Residuals.IntervalSE(mid, se, coverage)
	return mid, lo, hi
}

// predictSE returns the prediction and its standard error from the
// coefficient covariance, √(xᵀ·CoefCov·x) (0 without one).
func (m *Linear) predictSE(f Features) (mid, se float64) {
	m.ensure()
	var buf [16]float64
	x := buf[:0]
	if len(m.Terms) <= len(buf) {
		x = buf[:len(m.Terms)]
	} else {
		x = make([]float64, len(m.Terms))
	}
	m.basis.Eval(f, x)
	for i, c := range m.Coef {
		mid += c * x[i]
	}
	if len(m.CoefCov) != len(x) {
		return mid, 0
	}
	var v float64
	for i, row := range m.CoefCov {
		if x[i] == 0 {
			continue
		}
		var s float64
		for j, c := range row {
			s += c * x[j]
		}
		v += x[i] * s
	}
	return mid, math.Sqrt(math.Max(v, 0))
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
		return nil, fmt.Errorf("fpm: residual scale %q: want %q or %q", scale, ScaleRelative, ScaleAbsolute)
	}
	if len(residuals) == 0 {
		return nil, fmt.Errorf("fpm: residual quantiles: no residuals")
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
	return q.IntervalSE(mid, 0, coverage)
}

// IntervalSE is Interval for a prediction that is itself uncertain, with
// standard error se (coefficient or node uncertainty): the residual
// deviations below and above mid and z·se, z the normal quantile of the
// coverage, add in quadrature as independent errors do. The interval
// always contains mid and never goes below 0. A nil receiver gives ±z·se.
func (q *ResidualQuantiles) IntervalSE(mid, se, coverage float64) (lo, hi float64) {
	if !(coverage > 0) {
		return mid, mid
	}
	coverage = math.Min(coverage, 1)
	rlo, rhi := q.at(coverage)
	return spread(mid, se, NormalQuantile((1+coverage)/2), rlo, rhi)
}

// at returns the residual deviations below and above a prediction of 1
// (relative) or 0 (absolute: mid is added by spread's caller) at the
// central coverage: the quantiles at (1−c)/2 and (1+c)/2. The relative
// ones are returned as fractions, the absolute ones in ns, with the scale
// folded in by the caller through rel.
func (q *ResidualQuantiles) at(coverage float64) (rlo, rhi quantileDev) {
	if q == nil || len(q.P) == 0 {
		return quantileDev{}, quantileDev{}
	}
	abs := q.Scale == ScaleAbsolute
	return quantileDev{q.Quantile((1 - coverage) / 2), abs}, quantileDev{q.Quantile((1 + coverage) / 2), abs}
}

// quantileDev is a residual quantile, relative (a fraction of the
// prediction) or absolute (ns).
type quantileDev struct {
	v   float64
	abs bool
}

func (d quantileDev) ns(mid float64) float64 {
	if d.abs {
		return d.v
	}
	return mid * d.v
}

// spread is IntervalSE once the quantiles and z are known.
func spread(mid, se, z float64, rlo, rhi quantileDev) (lo, hi float64) {
	dlo, dhi := clamp(-rlo.ns(mid), 0, math.MaxFloat64), clamp(rhi.ns(mid), 0, math.MaxFloat64)
	if se > 0 {
		zs := z * se
		dlo, dhi = math.Sqrt(dlo*dlo+zs*zs), math.Sqrt(dhi*dhi+zs*zs)
	}
	return clamp(mid-dlo, 0, math.MaxFloat64), mid + dhi
}

// NormalQuantile is the p-quantile of the standard normal distribution
// (+Inf at p ≥ 1).
func NormalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

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
