package fit

import (
	"fmt"
	"github.com/steplab/steplab/fpm"
	"math"
	"sort"
)

// GridOptions configures BuildGrid.
type GridOptions struct {
	// SnapRel merges axis coordinates within this relative distance of each
	// other into one node (default 0.02): a steady decode step at context c
	// reads c+1 tokens on the next step, and such drift must not make a new
	// grid line. The node sits at the median of the values it merged.
	SnapRel float64
	// LogAxes interpolates the decode grid in log coordinates.
	LogAxes bool
	// PrefillInterp is fpm.InterpLinear (default) or fpm.InterpSqrt.
	PrefillInterp string
	// Outside is fpm.OutsideClamp (default) or fpm.OutsideLinear.
	Outside string
}

// GridStats says what BuildGrid did with the rows.
type GridStats struct {
	DecodeRows, PrefillRows int
	// SkippedMixed counts mixed steps: they are not benchmark coordinates
	// of either grid (the grid prices them by composition).
	SkippedMixed int
	DecodeCells  int // measured cells
	MissingCells int // cells of the rectangle never measured
	// MaxRepeats is the largest number of rows behind one node.
	MaxRepeats int
}

// BuildGrid builds an interpolating grid model from benchmark rows: decode
// steps at (batch, KV tokens per request) and prefill steps at prefill
// tokens. Each node's time is the median of the rows (repeats) at that
// coordinate, robust to a straggler repeat. The residual quantiles are the
// relative deviations of the repeats from their node's median (source
// "repeats": measurement noise, not interpolation error; cross-validate for
// that). A decode grid needs at least one decode row, a prefill grid one
// prefill row; with neither the build fails.
func BuildGrid(d *Data, opt GridOptions) (*fpm.Grid, *GridStats, error) {
	if d.Len() == 0 {
		return nil, nil, dataErr(ErrEmptySelection, "no rows to build a grid from")
	}
	if opt.SnapRel <= 0 {
		opt.SnapRel = 0.02
	}
	st := &GridStats{}
	var decB, decK, decY, preT, preY []float64
	for i, f := range d.Features {
		y := d.Y[i]
		if math.IsNaN(y) || math.IsInf(y, 0) || y <= 0 {
			e := dataErr(ErrBadTarget, fmt.Sprintf("timing is %v ns", y))
			e.Row, e.StepID = i, d.StepID(i)
			return nil, nil, e
		}
		switch d.Kind(i) {
		case "decode":
			if f.DecodeRequests <= 0 {
				continue
			}
			decB = append(decB, f.DecodeRequests)
			decK = append(decK, f.DecodeKVTokens/f.DecodeRequests)
			decY = append(decY, y)
		case "prefill":
			preT = append(preT, f.PrefillTokens)
			preY = append(preY, y)
		default:
			st.SkippedMixed++
		}
	}
	st.DecodeRows, st.PrefillRows = len(decY), len(preY)
	if len(decY) == 0 && len(preY) == 0 {
		return nil, nil, dataErr(ErrEmptySelection, fmt.Sprintf("no decode or prefill rows (%d mixed rows are not grid coordinates)", st.SkippedMixed))
	}
	g := &fpm.Grid{Outside: opt.Outside}
	var resid []float64
	if len(decY) > 0 {
		bAxis, bIdx := snap(decB, opt.SnapRel)
		kAxis, kIdx := snap(decK, opt.SnapRel)
		cells := make([][][]float64, len(bAxis))
		for i := range cells {
			cells[i] = make([][]float64, len(kAxis))
		}
		for r := range decY {
			c := &cells[bIdx[r]][kIdx[r]]
			*c = append(*c, decY[r])
		}
		dg := &fpm.DecodeGrid{Batch: bAxis, KVPerRequest: kAxis, LogAxes: opt.LogAxes, Ns: make([][]float64, len(bAxis))}
		for i := range cells {
			dg.Ns[i] = make([]float64, len(kAxis))
			for j, ys := range cells[i] {
				if len(ys) == 0 {
					dg.Ns[i][j] = -1
					st.MissingCells++
					continue
				}
				st.DecodeCells++
				dg.Ns[i][j] = nodeMedian(ys, &resid, st)
			}
		}
		g.Decode = dg
	}
	if len(preY) > 0 {
		tAxis, tIdx := snap(preT, opt.SnapRel)
		groups := make([][]float64, len(tAxis))
		for r := range preY {
			groups[tIdx[r]] = append(groups[tIdx[r]], preY[r])
		}
		pg := &fpm.PrefillGrid{Tokens: tAxis, Ns: make([]float64, len(tAxis)), Interp: opt.PrefillInterp}
		for i, ys := range groups {
			pg.Ns[i] = nodeMedian(ys, &resid, st)
		}
		g.Prefill = pg
	}
	if st.MaxRepeats > 1 {
		q, err := fpm.NewResidualQuantiles(fpm.ScaleRelative, resid, nil, "repeats")
		if err == nil {
			g.Residuals = q
		}
	}
	if err := g.Validate(); err != nil {
		return nil, nil, fmt.Errorf("fit: grid: %w", err)
	}
	return g, st, nil
}

func nodeMedian(ys []float64, resid *[]float64, st *GridStats) float64 {
	st.MaxRepeats = max(st.MaxRepeats, len(ys))
	sort.Float64s(ys)
	m := fpm.SortedQuantile(ys, 0.5)
	if len(ys) > 1 {
		for _, y := range ys {
			*resid = append(*resid, (y-m)/m)
		}
	}
	return m
}

// snap clusters values into axis nodes: sorted distinct values are merged
// while within rel of the cluster's first value; each node is its
// cluster's median. It returns the axis and each value's node index.
func snap(vals []float64, rel float64) (axis []float64, idx []int) {
	order := make([]int, len(vals))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return vals[order[a]] < vals[order[b]] })
	idx = make([]int, len(vals))
	var cluster []float64
	start := math.NaN()
	flush := func() {
		if len(cluster) > 0 {
			axis = append(axis, fpm.SortedQuantile(cluster, 0.5))
			cluster = cluster[:0]
		}
	}
	for _, i := range order {
		v := vals[i]
		if len(cluster) == 0 || v > start*(1+rel) && v-start > 0.5 {
			flush()
			start = v
		}
		cluster = append(cluster, v)
		idx[i] = len(axis)
	}
	flush()
	return axis, idx
}
