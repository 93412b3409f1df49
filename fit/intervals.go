package fit

import (
	"fmt"
	"github.com/steplab/steplab/fpm"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// Coverage is how often actual step times fell inside their prediction
// intervals.
type Coverage struct {
	N       int `json:"n"`
	Covered int `json:"covered"`
	// Below and Above count actual times under the interval's lower edge
	// and over its upper edge.
	Below int `json:"below"`
	Above int `json:"above"`
	// Pct is 100·Covered/N.
	Pct float64 `json:"coverage_pct"`
	// MeanWidthPct is the mean width hi − lo in percent of the prediction.
	MeanWidthPct float64 `json:"mean_width_pct"`
}

// Add counts one actual time y against the interval [lo, hi] around the
// prediction mid.
func (c *Coverage) Add(y, mid, lo, hi float64) {
	c.N++
	switch {
	case y < lo:
		c.Below++
	case y > hi:
		c.Above++
	default:
		c.Covered++
	}
	if mid > 0 {
		c.MeanWidthPct += 100 * (hi - lo) / mid
	}
}

// Finish turns the counts into percentages (once, after the last Add).
func (c *Coverage) Finish() {
	if c.N > 0 {
		c.Pct = 100 * float64(c.Covered) / float64(c.N)
		c.MeanWidthPct /= float64(c.N)
	}
}

// IntervalReport is the empirical coverage of a model's prediction
// intervals at a nominal level: overall, per step kind and, for a
// fpm.Pricer (the recipe), per region (interpolated, extrapolated, …).
type IntervalReport struct {
	Level    float64             `json:"level"`
	Overall  Coverage            `json:"overall"`
	ByKind   map[string]Coverage `json:"by_kind"`
	ByRegion map[string]Coverage `json:"by_region,omitempty"`
}

// EvaluateIntervals predicts every row of d with its interval at the
// given coverage and reports how many actual times fell inside.
func EvaluateIntervals(m fpm.IntervalFPM, d *Data, level float64) *IntervalReport {
	r := &IntervalReport{Level: level, ByKind: map[string]Coverage{}}
	pr, _ := m.(fpm.Pricer)
	if pr != nil {
		r.ByRegion = map[string]Coverage{}
	}
	for i, f := range d.Features {
		var mid, lo, hi float64
		if pr != nil {
			p := pr.Price(f, level)
			mid, lo, hi = p.Ns, p.Lo, p.Hi
			c := r.ByRegion[p.Region]
			c.Add(d.Y[i], mid, lo, hi)
			r.ByRegion[p.Region] = c
		} else {
			mid, lo, hi = m.PredictIntervalNs(f, level)
		}
		r.Overall.Add(d.Y[i], mid, lo, hi)
		c := r.ByKind[d.Kind(i)]
		c.Add(d.Y[i], mid, lo, hi)
		r.ByKind[d.Kind(i)] = c
	}
	r.Overall.Finish()
	for _, g := range []map[string]Coverage{r.ByKind, r.ByRegion} {
		for k, c := range g {
			c.Finish()
			g[k] = c
		}
	}
	return r
}

// CalibratedRegion says what a calibration did to one region's residuals.
type CalibratedRegion struct {
	Kind   string `json:"kind"`
	Region string `json:"region"`
	// N is the calibration rows the recipe priced in this region.
	N int `json:"n"`
	// Action: "replaced" (enough rows: the region's residuals are the
	// calibration's), "widened" (too few rows: the held-out residuals
	// widened to the kind's pooled calibration residuals), "pooled" (the
	// kind's residuals over all its calibration rows), or "kept" (too few
	// rows of the kind: the held-out residuals stay).
	Action string `json:"action"`
}

// Calibration actions.
const (
	CalibReplaced = "replaced"
	CalibWidened  = "widened"
	CalibPooled   = "pooled"
	CalibKept     = "kept"
)

// CalibrateRecipe replaces the recipe's held-out residual quantiles by the
// residuals of its predictions on d, a calibration split of the traffic
// the recipe will price (split-conformal calibration: the interval's
// quantiles come from data the point model was not fitted on, and carry
// whatever that traffic costs that the benchmark did not measure).
//
// Per kind with at least minRows calibration rows, the residuals over all
// of them become the kind's pooled quantiles, and each region with
// minRows of its own gets its own; a region with fewer keeps its held-out
// quantiles widened, probability by probability, to the pooled
// calibration ones (the lower quantiles the lesser, the upper the
// greater). A kind with fewer than minRows calibration rows keeps its
// held-out residuals. Test the result on data it was not calibrated on.
func CalibrateRecipe(r *fpm.Recipe, d *Data, minRows int, source string) ([]CalibratedRegion, error) {
	if minRows <= 0 {
		minRows = 20
	}
	byKind := map[string]map[string][]float64{}
	for i, f := range d.Features {
		p := r.Price(f, r.Level)
		if p.Region == fpm.RegionUnpriced || !(p.Ns > 0) {
			continue
		}
		if byKind[p.Kind] == nil {
			byKind[p.Kind] = map[string][]float64{}
		}
		byKind[p.Kind][p.Region] = append(byKind[p.Kind][p.Region], (d.Y[i]-p.Ns)/p.Ns)
	}
	var out []CalibratedRegion
	for ki := range r.Kinds {
		k := &r.Kinds[ki]
		regs := byKind[k.Kind]
		var all []float64
		for _, reg := range fpm.Regions {
			all = append(all, regs[reg]...)
		}
		if len(all) < minRows {
			out = append(out, CalibratedRegion{Kind: k.Kind, Region: fpm.RegionAll, N: len(all), Action: CalibKept})
			continue
		}
		if k.Residuals == nil {
			k.Residuals = map[string]*fpm.ResidualQuantiles{}
		}
		pooled, err := fpm.NewResidualQuantiles(fpm.ScaleRelative, all, nil, source)
		if err != nil {
			return nil, err
		}
		for _, reg := range fpm.Regions {
			rs := regs[reg]
			switch {
			case len(rs) >= minRows:
				q, err := fpm.NewResidualQuantiles(fpm.ScaleRelative, rs, nil, source)
				if err != nil {
					return nil, err
				}
				k.Residuals[reg] = q
				out = append(out, CalibratedRegion{Kind: k.Kind, Region: reg, N: len(rs), Action: CalibReplaced})
			case k.Residuals[reg] != nil:
				k.Residuals[reg] = widen(k.Residuals[reg], pooled)
				out = append(out, CalibratedRegion{Kind: k.Kind, Region: reg, N: len(rs), Action: CalibWidened})
			}
		}
		k.Residuals[fpm.RegionAll] = pooled
		k.Extent = nil // the calibration's residuals measured the traffic at its own distance from the grid
		out = append(out, CalibratedRegion{Kind: k.Kind, Region: fpm.RegionAll, N: len(all), Action: CalibPooled})
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("fit: calibration: %w", err)
	}
	return out, nil
}

// widen returns q with each quantile moved outwards to wide's where wide's
// is further from the median (both at the same probabilities; else wide).
func widen(q, wide *fpm.ResidualQuantiles) *fpm.ResidualQuantiles {
	if len(q.P) != len(wide.P) {
		return wide
	}
	out := &fpm.ResidualQuantiles{Scale: q.Scale, P: append([]float64(nil), q.P...), Values: make([]float64, len(q.P)),
		N: q.N + wide.N, Source: q.Source + ", widened by " + wide.Source}
	for i, p := range q.P {
		if p != wide.P[i] {
			return wide
		}
		switch {
		case p < 0.5:
			out.Values[i] = math.Min(q.Values[i], wide.Values[i])
		case p > 0.5:
			out.Values[i] = math.Max(q.Values[i], wide.Values[i])
		default:
			out.Values[i] = wide.Values[i]
		}
	}
	return out
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WriteText prints the coverage table: overall, per kind and per region,
// each next to the nominal level.
func (r *IntervalReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "prediction intervals at %.0f%% nominal:\n", 100*r.Level)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scope\tn\tcoverage %\tnominal %\tbelow\tabove\tmean width %\t")
	row := func(name string, c Coverage) {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f\t%d\t%d\t%.1f\t\n", name, c.N, c.Pct, 100*r.Level, c.Below, c.Above, c.MeanWidthPct)
	}
	row("all", r.Overall)
	for _, k := range sortedKeys(r.ByKind) {
		row("kind="+k, r.ByKind[k])
	}
	for _, k := range fpm.Regions {
		if c, ok := r.ByRegion[k]; ok {
			row("region="+k, c)
		}
	}
	tw.Flush()
}

// WriteText prints what the recipe fitted per kind: how it prices the
// kind, its table, its linear coefficients and its interval spread.
func (r *RecipeReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\nrecipe (intervals at %.0f%%):\n", 100*r.Level)
	for _, k := range r.Kinds {
		fmt.Fprintf(w, "\n%s: %d rows, priced by %s", k.Kind, k.Rows, k.PricedBy)
		if k.Note != "" {
			fmt.Fprintf(w, " (%s)", k.Note)
		}
		fmt.Fprintln(w)
		if t := k.Table; t != nil {
			if t.Reason != "" {
				fmt.Fprintf(w, "  no table over %s: %s\n", strings.Join(t.Coords, " × "), t.Reason)
			} else {
				fmt.Fprintf(w, "  table over %s: %v nodes, %d measured, %d missing, up to %d repeats",
					strings.Join(t.Coords, " × "), t.Nodes, t.Measured, t.Missing, t.MaxRepeats)
				if t.OffGrid > 0 {
					fmt.Fprintf(w, "; %d rows off its lines (linear form only)", t.OffGrid)
				}
				fmt.Fprintln(w)
			}
		}
		if len(k.Coefficients) > 0 {
			WriteCoefficients(w, k.Coefficients)
		}
		for _, g := range k.Regimes {
			fmt.Fprintf(w, "  regime %s: %d rows\n", g.Range, g.Rows)
			WriteCoefficients(w, g.Coefficients)
		}
		for _, rs := range k.Residuals {
			fmt.Fprintf(w, "  interval %-12s [%+.1f%%, %+.1f%%] from %d residuals (%s)\n", rs.Region, rs.LoPct, rs.HiPct, rs.N, rs.Source)
		}
	}
	if len(r.CalibrationDatasets) > 0 {
		ids := make([]string, len(r.CalibrationDatasets))
		for i, d := range r.CalibrationDatasets {
			ids[i] = d.ID
		}
		half := ""
		if r.CalibrationHalf > 0 {
			half = fmt.Sprintf(" (half %d of the rows)", r.CalibrationHalf)
		}
		fmt.Fprintf(w, "\ncalibrated on %s%s:", strings.Join(ids, ", "), half)
		for _, c := range r.Calibration {
			fmt.Fprintf(w, " %s/%s %s (%d)", c.Kind, c.Region, c.Action, c.N)
		}
		fmt.Fprintln(w)
	}
}

// BeyondGrid counts the steps a recipe priced beyond the largest value its
// tables measured on an axis (a batch above the largest measured batch, a
// context above the largest measured context): predictions far outside
// the grid, extrapolated by the linear form.
type BeyondGrid struct {
	N int `json:"n"`
	// ByAxis counts them per table axis (a step may count on several).
	ByAxis map[string]int `json:"by_axis"`
}

// BeyondAxes names the table axes on which f lies beyond the largest
// measured node of the tables that price it (the kind's own, or the prefill
// and decode tables of a composed mixed step), by more than the table's
// snapping tolerance. A decode step's longest context counts against the
// largest measured context per request: the attention kernel waits for
// the longest request. Nil inside, and for a model with no tables.
func BeyondAxes(m fpm.FPM, f fpm.Features) []string {
	r, ok := m.(*fpm.Recipe)
	if !ok {
		return nil
	}
	k := r.Kind(f.Kind())
	if k == nil {
		return nil
	}
	kinds := []*fpm.RecipeKind{k}
	if k.Compose != nil {
		kinds = []*fpm.RecipeKind{r.Kind("prefill"), r.Kind("decode")}
	}
	var out []string
	for _, k := range kinds {
		if k == nil || k.Table == nil {
			continue
		}
		for _, a := range k.Table.Axes {
			fn, err := fpm.Coord(a.Coord)
			if err != nil || len(a.Nodes) < 2 {
				continue // a single node is a condition of the table, not a measured range
			}
			x, top := fn(f), a.Nodes[len(a.Nodes)-1]*(1+k.Table.Tol)
			if mk := f.DecodeMaxKVTokens; a.Coord == fpm.CoordKVPerRequest && mk > x {
				x = mk // NaN (unknown) compares false and keeps the mean
			}
			if x > top && !slices.Contains(out, a.Coord) {
				out = append(out, a.Coord)
			}
		}
	}
	return out
}

// countBeyond counts d's rows that m prices beyond its grid (nil when
// none is).
func countBeyond(m fpm.FPM, d *Data) *BeyondGrid {
	b := &BeyondGrid{ByAxis: map[string]int{}}
	for _, f := range d.Features {
		axes := BeyondAxes(m, f)
		if len(axes) > 0 {
			b.N++
		}
		for _, a := range axes {
			b.ByAxis[a]++
		}
	}
	if b.N == 0 {
		return nil
	}
	return b
}

// Warning says how many of n steps lie beyond the grid.
func (b *BeyondGrid) Warning(n int) string {
	parts := make([]string, 0, len(b.ByAxis))
	for _, a := range sortedKeys(b.ByAxis) {
		parts = append(parts, fmt.Sprintf("%s %d", a, b.ByAxis[a]))
	}
	return fmt.Sprintf("%d of %d steps lie beyond the largest value the model's grid measured (%s): their predictions extrapolate",
		b.N, n, strings.Join(parts, ", "))
}

// CoverageTolerance is how far, in percentage points, measured coverage
// may stray from the nominal level before eval warns.
const CoverageTolerance = 5

// Warning says when the overall coverage is outside nominal ± CoverageTolerance
// ("" inside, or with no rows).
func (r *IntervalReport) Warning() string {
	nominal := 100 * r.Level
	if r.Overall.N == 0 || math.Abs(r.Overall.Pct-nominal) <= CoverageTolerance {
		return ""
	}
	side := "too narrow"
	if r.Overall.Pct > nominal {
		side = "too wide"
	}
	return fmt.Sprintf("the %.0f%% prediction intervals covered %.1f%% of the %d steps scored (outside %.0f ± %d points): they are %s for this data",
		nominal, r.Overall.Pct, r.Overall.N, nominal, CoverageTolerance, side)
}

// designExtent is the measured design of a kind's training rows idx over
// its table's axes (fpm.Extent; nil without a table): its held-out
// residuals widen with a step's distance outside it.
func designExtent(d *Data, idx []int, t *fpm.Table) *fpm.Extent {
	rows := make([]fpm.Features, len(idx))
	for j, i := range idx {
		rows[j] = d.Features[i]
	}
	return fpm.NewExtent(t, rows)
}
