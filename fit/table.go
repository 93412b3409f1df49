package fit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/steplab/steplab/model"
)

// Limits on what BuildTable accepts as a benchmark grid.
const (
	// MaxTableNodes is the most nodes an axis may have: a benchmark sweeps
	// a few values per axis; rows with more distinct values are scattered
	// traffic, which the linear form fits instead.
	MaxTableNodes = 64
	// MinTableFill is the smallest fraction of the rectangle's nodes that
	// must be measured.
	MinTableFill = 0.5
)

// TableStats says what BuildTable made of the rows, or why they are not a
// grid (Reason).
type TableStats struct {
	Coords     []string `json:"coords"`
	Nodes      []int    `json:"nodes"` // per axis
	Rows       int      `json:"rows"`
	Measured   int      `json:"measured_nodes"`
	Missing    int      `json:"missing_nodes"`
	MaxRepeats int      `json:"max_repeats"`
	Reason     string   `json:"not_a_grid,omitempty"`
	// node[a][k] is the node index of row k on axis a.
	node [][]int
}

// BuildTable builds an interpolation table over the named coordinates
// (model.Coord) from the rows idx of d. Coordinates within snapRel of each
// other snap to one node (the median of the values it merged, as
// BuildGrid does); a node's time is the median of its repeats and its
// standard error the bootstrap standard error of that median (0 for a
// single repeat; the bootstrap is seeded by seed and the node). The rows
// must look like a benchmark grid: at most MaxTableNodes per axis, at
// least two measured nodes, and at least MinTableFill of the rectangle
// measured; otherwise the table is nil and TableStats.Reason says why.
func BuildTable(d *Data, idx []int, coords []string, snapRel float64, seed uint64) (*model.Table, *TableStats, error) {
	st := &TableStats{Coords: coords, Rows: len(idx)}
	if len(coords) > model.MaxTableAxes {
		return nil, nil, fmt.Errorf("fit: table over %d coordinates: at most %d", len(coords), model.MaxTableAxes)
	}
	if len(coords) == 0 || len(idx) == 0 {
		st.Reason = "no coordinates or no rows"
		return nil, st, nil
	}
	axes := make([]model.TableAxis, len(coords))
	cells := 1
	for a, c := range coords {
		fn, err := model.Coord(c)
		if err != nil {
			return nil, nil, fmt.Errorf("fit: table: %w", err)
		}
		vals := make([]float64, len(idx))
		for k, i := range idx {
			vals[k] = fn(d.Features[i])
		}
		nodes, id := snap(vals, snapRel)
		axes[a] = model.TableAxis{Coord: c, Nodes: nodes}
		st.node = append(st.node, id)
		st.Nodes = append(st.Nodes, len(nodes))
		cells *= len(nodes)
		if len(nodes) > MaxTableNodes {
			st.Reason = fmt.Sprintf("%d distinct values of %s (a benchmark grid has at most %d)", len(nodes), c, MaxTableNodes)
			return nil, st, nil
		}
	}
	groups := make([][]float64, cells)
	for k, i := range idx {
		groups[st.flat(k)] = append(groups[st.flat(k)], d.Y[i])
	}
	t := &model.Table{Axes: axes, Ns: make([]float64, cells), Tol: snapRel}
	se := make([]float64, cells)
	anySE := false
	for c, ys := range groups {
		if len(ys) == 0 {
			t.Ns[c] = -1
			st.Missing++
			continue
		}
		st.Measured++
		st.MaxRepeats = max(st.MaxRepeats, len(ys))
		t.Ns[c], se[c] = medianSE(ys, seed, uint64(c))
		anySE = anySE || se[c] > 0
	}
	switch {
	case st.Measured < 2:
		st.Reason = "fewer than two measured nodes"
	case float64(st.Measured) < MinTableFill*float64(cells):
		st.Reason = fmt.Sprintf("%d of %d nodes measured (a grid fills at least %.0f%%)", st.Measured, cells, 100*MinTableFill)
	}
	if st.Reason != "" {
		return nil, st, nil
	}
	if anySE {
		t.SE = se
	}
	if err := t.Validate(); err != nil {
		return nil, nil, fmt.Errorf("fit: table: %w", err)
	}
	return t, st, nil
}

// flat is the row-major node index of row k.
func (st *TableStats) flat(k int) int {
	c := 0
	for a, id := range st.node {
		c = c*st.Nodes[a] + id[k]
	}
	return c
}

// medianSE returns the median of ys (sorted in place) and the standard
// error of the median over 200 bootstrap resamples of ys (0 for one
// value).
func medianSE(ys []float64, seed, stream uint64) (median, se float64) {
	sort.Float64s(ys)
	median = model.SortedQuantile(ys, 0.5)
	if len(ys) < 2 {
		return median, 0
	}
	const reps = 200
	rng := rand.New(rand.NewPCG(seed, 0x7ab1e0000+stream))
	buf := make([]float64, len(ys))
	var sum, sq float64
	for r := 0; r < reps; r++ {
		for i := range buf {
			buf[i] = ys[rng.IntN(len(ys))]
		}
		sort.Float64s(buf)
		m := model.SortedQuantile(buf, 0.5)
		sum += m
		sq += m * m
	}
	mean := sum / reps
	return median, math.Sqrt(math.Max(0, sq/reps-mean*mean))
}
