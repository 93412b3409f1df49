package fit

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
)

// Design is a regression problem: n rows of p term values (X, row-major,
// n×p) and their timings Y (ns). W optionally weights rows (nil: all 1);
// StepIDs optionally names rows in error messages.
type Design struct {
	Terms   []string
	X       []float64
	Y       []float64
	W       []float64
	StepIDs []int64
}

// N is the number of rows.
func (d *Design) N() int { return len(d.Y) }

// P is the number of terms.
func (d *Design) P() int { return len(d.Terms) }

// Row returns the term values of row i (a view).
func (d *Design) Row(i int) []float64 { p := d.P(); return d.X[i*p : (i+1)*p] }

// Matrix wraps X as a gonum matrix (no copy).
func (d *Design) Matrix() *mat.Dense { return mat.NewDense(d.N(), d.P(), d.X) }

// Predict returns X·coef.
func (d *Design) Predict(coef []float64) []float64 {
	out := make([]float64, d.N())
	for i := range out {
		out[i] = dot(d.Row(i), coef)
	}
	return out
}

func (d *Design) stepID(i int) int64 {
	if i < len(d.StepIDs) {
		return d.StepIDs[i]
	}
	return -1
}

func dot(a, b []float64) float64 {
	var s float64
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

// Gram holds the normal equations of a (weighted) least-squares problem,
// XᵀWX and XᵀWy, accumulated in one streaming pass over the rows: the
// solvers then work on p×p numbers whatever n is, which is what makes a
// 1M-row fit take milliseconds. Forming XᵀX squares the condition number;
// the solvers scale the columns to unit norm first, and check the rank, so
// that the loss is harmless for the well-posed problems they accept.
type Gram struct {
	P   int
	XtX []float64 // p×p, row-major, symmetric
	XtY []float64
	YtY float64
	SW  float64 // sum of weights
}

// NewGram accumulates the Gram matrix of rows x (row-major, p columns),
// targets y and weights w (nil: all 1). Rows of weight 0 are skipped.
func NewGram(x, y, w []float64, p int) *Gram {
	g := &Gram{P: p, XtX: make([]float64, p*p), XtY: make([]float64, p)}
	G, b := g.XtX, g.XtY
	n := len(y)
	for r := 0; r < n; r++ {
		wt := 1.0
		if w != nil {
			wt = w[r]
			if wt == 0 {
				continue
			}
		}
		row := x[r*p : r*p+p : r*p+p]
		yw := y[r] * wt
		g.YtY += y[r] * yw
		g.SW += wt
		for i, xi := range row {
			xw := xi * wt
			b[i] += xi * yw
			gi := G[i*p : i*p+p : i*p+p]
			for j := i; j < p; j++ {
				gi[j] += xw * row[j]
			}
		}
	}
	for i := 0; i < p; i++ {
		for j := 0; j < i; j++ {
			G[i*p+j] = G[j*p+i]
		}
	}
	return g
}

// scaled returns the Gram matrix of the columns scaled to unit (weighted)
// norm and the scale factors s (coef = scaledCoef / s). A zero column keeps
// scale 1.
func (g *Gram) scaled() (G, b, s []float64) {
	p := g.P
	s = make([]float64, p)
	for i := 0; i < p; i++ {
		s[i] = math.Sqrt(g.XtX[i*p+i])
		if s[i] == 0 {
			s[i] = 1
		}
	}
	G = make([]float64, p*p)
	b = make([]float64, p)
	for i := 0; i < p; i++ {
		b[i] = g.XtY[i] / s[i]
		for j := 0; j < p; j++ {
			G[i*p+j] = g.XtX[i*p+j] / (s[i] * s[j])
		}
	}
	return G, b, s
}

// rankTol is the smallest eigenvalue, relative to the largest, of the
// column-scaled Gram matrix that a design may have: below it (condition of
// X above about 1e5) the terms involved are reported as collinear.
const rankTol = 1e-10

// CheckRank refuses a (nearly) rank-deficient Gram matrix, naming the
// collinear terms: those with a large weight in an eigenvector of a
// near-zero eigenvalue of the column-scaled Gram matrix.
func (g *Gram) CheckRank(terms []string) error {
	p := g.P
	G, _, _ := g.scaled()
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(p, G), true) {
		return dataErr(ErrRankDeficient, "eigendecomposition failed", terms...)
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	max := 0.0
	for _, v := range vals {
		max = math.Max(max, math.Abs(v))
	}
	involved := map[int]bool{}
	worst := math.Inf(1)
	for k, v := range vals {
		if v > rankTol*max {
			continue
		}
		worst = math.Min(worst, v/max)
		for j := 0; j < p; j++ {
			if math.Abs(vecs.At(j, k)) >= 0.1 {
				involved[j] = true
			}
		}
	}
	if len(involved) == 0 {
		return nil
	}
	idx := make([]int, 0, len(involved))
	for j := range involved {
		idx = append(idx, j)
	}
	sort.Ints(idx)
	names := make([]string, len(idx))
	for i, j := range idx {
		names[i] = terms[j]
	}
	return dataErr(ErrRankDeficient, fmt.Sprintf("these terms are (nearly) linear combinations of each other (relative eigenvalue %.2g); drop one of them", worst), names...)
}

// sub returns the Gram matrix of the columns idx alone.
func (g *Gram) sub(idx []int) *Gram {
	k := len(idx)
	out := &Gram{P: k, XtX: make([]float64, k*k), XtY: make([]float64, k), YtY: g.YtY, SW: g.SW}
	for a, i := range idx {
		out.XtY[a] = g.XtY[i]
		for b, j := range idx {
			out.XtX[a*k+b] = g.XtX[i*g.P+j]
		}
	}
	return out
}

// SolveLS solves the unconstrained least-squares problem of the Gram matrix
// (Cholesky on the column-scaled normal equations). It does not check the
// rank; call CheckRank first.
func (g *Gram) SolveLS() ([]float64, error) {
	G, b, s := g.scaled()
	x, ok := cholSolve(G, b, g.P, nil)
	if !ok {
		return nil, dataErr(ErrRankDeficient, "normal equations are not positive definite")
	}
	for i := range x {
		x[i] /= s[i]
	}
	return x, nil
}

// cholSolve solves G[idx,idx]·z = b[idx] for the index subset idx (nil:
// all) and returns z spread back to length p (zeros outside idx).
func cholSolve(G, b []float64, p int, idx []int) ([]float64, bool) {
	if idx == nil {
		idx = make([]int, p)
		for i := range idx {
			idx[i] = i
		}
	}
	k := len(idx)
	out := make([]float64, p)
	if k == 0 {
		return out, true
	}
	sub := mat.NewSymDense(k, nil)
	rhs := mat.NewVecDense(k, nil)
	for a, i := range idx {
		rhs.SetVec(a, b[i])
		for c := a; c < k; c++ {
			sub.SetSym(a, c, G[i*p+idx[c]])
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(sub) {
		return nil, false
	}
	var z mat.VecDense
	if err := ch.SolveVecTo(&z, rhs); err != nil {
		return nil, false
	}
	for a, i := range idx {
		out[i] = z.AtVec(a)
	}
	return out, true
}

// SolveNNLS solves min ‖Xβ − y‖² subject to β ≥ 0 on the Gram matrix by the
// Lawson–Hanson active-set method (Lawson & Hanson 1974, ch. 23), working
// on the column-scaled normal equations. It does not check the rank; call
// CheckRank first. It returns the coefficients and the number of active-set
// iterations.
func (g *Gram) SolveNNLS() ([]float64, int, error) {
	G, b, s := g.scaled()
	x, it, err := nnlsScaled(G, b, g.P)
	if err != nil {
		return nil, it, err
	}
	for i := range x {
		x[i] /= s[i]
	}
	return x, it, nil
}

func nnlsScaled(G, b []float64, p int) ([]float64, int, error) {
	x := make([]float64, p)
	passive := make([]bool, p)
	w := make([]float64, p)
	grad := func() {
		for i := 0; i < p; i++ {
			w[i] = b[i] - dot(G[i*p:(i+1)*p], x)
		}
	}
	bmax := 0.0
	for _, v := range b {
		bmax = math.Max(bmax, math.Abs(v))
	}
	tol := 1e-11 * math.Max(1, bmax)
	maxIter := 30 * (p + 1)
	skip := make([]bool, p) // indices that failed to enter since x last changed
	it := 0
	grad()
	for ; it < maxIter; it++ {
		j, best := -1, tol
		for i := 0; i < p; i++ {
			if !passive[i] && !skip[i] && w[i] > best {
				j, best = i, w[i]
			}
		}
		if j < 0 {
			return x, it, nil
		}
		passive[j] = true
		entered := false
		for inner := 0; inner < 3*p+3; inner++ {
			idx := indices(passive)
			z, ok := cholSolve(G, b, p, idx)
			if !ok {
				// The new column made the passive set singular: keep it out.
				passive[j], skip[j] = false, true
				break
			}
			if z[j] <= 0 && inner == 0 {
				// Lawson–Hanson guarantees z[j] > 0 in exact arithmetic; in
				// floating point a tiny gradient can break that. Keep j out
				// until x changes, so the method cannot cycle.
				passive[j], skip[j] = false, true
				break
			}
			allPos := true
			for _, i := range idx {
				if z[i] <= 0 {
					allPos = false
				}
			}
			if allPos {
				copy(x, z)
				entered = true
				break
			}
			alpha := math.Inf(1)
			for _, i := range idx {
				if z[i] <= 0 {
					if a := x[i] / (x[i] - z[i]); a < alpha {
						alpha = a
					}
				}
			}
			for i := 0; i < p; i++ {
				x[i] += alpha * (z[i] - x[i])
				if passive[i] && x[i] <= 1e-14 {
					passive[i], x[i] = false, 0
				}
			}
			entered = true
		}
		if entered {
			for i := range skip {
				skip[i] = false
			}
		}
		grad()
	}
	return x, it, fmt.Errorf("fit: NNLS: %w after %d active-set iterations", ErrNoConvergence, it)
}

func indices(b []bool) []int {
	var out []int
	for i, v := range b {
		if v {
			out = append(out, i)
		}
	}
	return out
}

// OLS solves ordinary (or, with d.W, weighted) least squares by a QR
// factorisation of the column-scaled design, the numerically careful
// route (no normal equations). It refuses a rank-deficient design. It
// copies X: for very large n prefer the Gram solvers.
func OLS(d *Design) ([]float64, error) {
	if err := checkDesign(d); err != nil {
		return nil, err
	}
	n, p := d.N(), d.P()
	g := NewGram(d.X, d.Y, d.W, p)
	if err := g.CheckRank(d.Terms); err != nil {
		return nil, err
	}
	_, _, s := g.scaled()
	a := mat.NewDense(n, p, nil)
	y := mat.NewVecDense(n, nil)
	for i := 0; i < n; i++ {
		sw := 1.0
		if d.W != nil {
			sw = math.Sqrt(d.W[i])
		}
		row := d.Row(i)
		for j := 0; j < p; j++ {
			a.Set(i, j, row[j]*sw/s[j])
		}
		y.SetVec(i, d.Y[i]*sw)
	}
	var qr mat.QR
	qr.Factorize(a)
	var beta mat.VecDense
	if err := qr.SolveVecTo(&beta, false, y); err != nil {
		return nil, dataErr(ErrRankDeficient, err.Error(), d.Terms...)
	}
	out := make([]float64, p)
	for j := range out {
		out[j] = beta.AtVec(j) / s[j]
	}
	return out, nil
}

// NNLS solves non-negative least squares (weighted by d.W) on the Gram
// matrix accumulated in one pass, after checking the design. 1M rows × 8
// terms take about 30 ms on one core.
func NNLS(d *Design) ([]float64, error) {
	if err := checkDesign(d); err != nil {
		return nil, err
	}
	g := NewGram(d.X, d.Y, d.W, d.P())
	if err := g.CheckRank(d.Terms); err != nil {
		return nil, err
	}
	x, _, err := g.SolveNNLS()
	return x, err
}

// checkDesign verifies shapes, values and the row count of a design, and
// refuses all-zero and constant terms; it does not check the rank (that
// needs the Gram matrix).
func checkDesign(d *Design) error {
	if err := checkValues(d); err != nil {
		return err
	}
	n, p := d.N(), d.P()
	if min := minRows(p); n < min {
		return dataErr(ErrTooFewRows, fmt.Sprintf("%d rows for %d terms; need at least %d (max(5, 2×terms))", n, p, min))
	}
	if zero, constant := degenerateColumns(d); len(zero) > 0 {
		return dataErr(ErrZeroColumn, "zero on every row; drop the term or select data that exercises it", zero...)
	} else if len(constant) > 0 {
		return dataErr(ErrConstantColumn, "same value on every row, indistinguishable from const; drop the term or select data that varies it", constant...)
	}
	return nil
}

// checkValues verifies the shapes of a design and that every timing is a
// finite positive duration and every term value a finite non-negative
// count: what no choice of terms can repair.
func checkValues(d *Design) error {
	n, p := d.N(), d.P()
	if p == 0 {
		return fmt.Errorf("fit: design has no terms")
	}
	if len(d.X) != n*p {
		return fmt.Errorf("fit: design X has %d values for %d rows × %d terms", len(d.X), n, p)
	}
	if d.W != nil && len(d.W) != n {
		return fmt.Errorf("fit: design has %d weights for %d rows", len(d.W), n)
	}
	if n == 0 {
		return dataErr(ErrEmptySelection, "no rows to fit")
	}
	for i, y := range d.Y {
		if math.IsNaN(y) || math.IsInf(y, 0) || y <= 0 {
			e := dataErr(ErrBadTarget, fmt.Sprintf("timing is %v ns (want a finite positive duration)", y))
			e.Row, e.StepID = i, d.stepID(i)
			return e
		}
		if d.W != nil && (math.IsNaN(d.W[i]) || math.IsInf(d.W[i], 0) || d.W[i] < 0) {
			return fmt.Errorf("fit: weight of row %d is %v", i, d.W[i])
		}
	}
	for i := 0; i < n; i++ {
		for j, v := range d.Row(i) {
			if math.IsNaN(v) {
				e := dataErr(ErrBadFeature, "unknown: the dataset records neither the column this term reads nor the step_requests rows to derive it from (docs/fitting.md lists the columns each term reads)", d.Terms[j])
				e.Row, e.StepID = i, d.stepID(i)
				return e
			}
			if math.IsInf(v, 0) || v < 0 {
				e := dataErr(ErrBadFeature, fmt.Sprintf("value %v (want a finite non-negative count)", v), d.Terms[j])
				e.Row, e.StepID = i, d.stepID(i)
				return e
			}
		}
	}
	return nil
}

func minRows(p int) int {
	if 2*p > 5 {
		return 2 * p
	}
	return 5
}

// degenerateColumns lists the terms that are zero on every row, and the
// terms other than const that are constant (non-zero) on every row when the
// design also has a const term.
func degenerateColumns(d *Design) (zero, constant []string) {
	n, p := d.N(), d.P()
	hasConst := false
	for _, t := range d.Terms {
		if t == "const" {
			hasConst = true
		}
	}
	for j := 0; j < p; j++ {
		first := d.X[j]
		allZero, allSame := true, true
		for i := 0; i < n; i++ {
			v := d.X[i*p+j]
			if v != 0 {
				allZero = false
			}
			if v != first {
				allSame = false
			}
			if !allZero && !allSame {
				break
			}
		}
		switch {
		case allZero:
			zero = append(zero, d.Terms[j])
		case allSame && hasConst && d.Terms[j] != "const":
			constant = append(constant, d.Terms[j])
		}
	}
	return zero, constant
}
