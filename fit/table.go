package fit

import (
	"fmt"
	"github.com/steplab/steplab/fpm"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
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
	// OffGrid counts the rows left out of the table: off its conditions,
	// or on lines of the grid measured less than the rest (see
	// BuildTable); the kind's linear form still fits them.
	OffGrid int    `json:"off_grid_rows,omitempty"`
	Reason  string `json:"not_a_grid,omitempty"`
	// rows are the rows in the table (of the idx given), node[a][k] the
	// node index of rows[k] on axis a.
	rows []int
	node [][]int
}

// BuildTable builds an interpolation table over the named coordinates
// (fpm.Coord) from the rows idx of d. Coordinates within snapRel of each
// other snap to one node (the median of the values it merged, as
// BuildGrid does); a node's time is the median of its repeats and its
// standard error the bootstrap standard error of that median (0 for a
// single repeat; the bootstrap is seeded by seed and the node).
//
// A coordinate written NAME=VALUE is a condition: the table takes only the
// rows whose NAME lies within snapRel of VALUE, and its axis has that one
// node, so the steps off it are outside the hull (kv_max_ratio=1: a table
// of uniform decode batches that prices no ragged one). The other rows
// count as off the grid.
//
// The rows must look like a benchmark grid: at most MaxTableNodes per
// axis, at least MinTableFill of the rectangle measured, and two
// neighbouring nodes measured (something to interpolate between). A
// benchmark that adds a few points off its grid (uniform batches at a
// batch size and context of their own) leaves its rectangle mostly empty;
// so while less than MinTableFill of the rectangle, or of a line (every
// node at one value of one axis), is measured, the sparsest line is left
// out with its rows (gridLines; TableStats.OffGrid), as long as more than
// half of the rows stay. Otherwise the table is nil and TableStats.Reason
// says why.
func BuildTable(d *Data, idx []int, coords []string, snapRel float64, seed uint64) (*fpm.Table, *TableStats, error) {
	st := &TableStats{Coords: coords, Rows: len(idx)}
	if len(coords) > fpm.MaxTableAxes {
		return nil, nil, fmt.Errorf("fit: table over %d coordinates: at most %d", len(coords), fpm.MaxTableAxes)
	}
	if len(coords) == 0 || len(idx) == 0 {
		st.Reason = "no coordinates or no rows"
		return nil, st, nil
	}
	names, fns, on, err := tableConditions(d, idx, coords, snapRel)
	if err != nil {
		return nil, nil, err
	}
	st.OffGrid = len(idx) - len(on)
	idx = on
	onConds := len(idx)
	if len(idx) == 0 {
		st.Reason = "no rows meet the table's conditions"
		return nil, st, nil
	}
	st.Coords = names
	nodes, ids, ok := st.snapAxes(d, idx, names, fns, snapRel)
	if !ok {
		return nil, st, nil
	}
	axes, cells := st.keepGridLines(idx, names, nodes, ids)
	t := st.medians(d, axes, cells, snapRel, seed)
	switch {
	case st.Measured < 2:
		st.Reason = "fewer than two measured nodes"
	case float64(st.Measured) < MinTableFill*float64(cells):
		st.Reason = fmt.Sprintf("%d of %d nodes measured (a grid fills at least %.0f%%)", st.Measured, cells, 100*MinTableFill)
	case 2*st.Rows < onConds:
		st.Reason = fmt.Sprintf("only %d of %d rows lie on the lines of a grid", st.Rows, onConds)
	case !st.segment(t.Ns):
		st.Reason = "no two neighbouring nodes measured: nothing to interpolate between"
	}
	if st.Reason != "" {
		return nil, st, nil
	}
	if err := t.Validate(); err != nil {
		return nil, nil, fmt.Errorf("fit: table: %w", err)
	}
	return t, st, nil
}

// tableConditions resolves the coordinates (fpm.Coord) of a table's axes,
// their names without conditions, and the rows of idx that meet every
// NAME=VALUE condition.
func tableConditions(d *Data, idx []int, coords []string, snapRel float64) ([]string, []fpm.TermFunc, []int, error) {
	names := make([]string, len(coords))
	fns := make([]fpm.TermFunc, len(coords))
	on := slices.Clone(idx)
	for a, c := range coords {
		name, value, cond := strings.Cut(c, "=")
		fn, err := fpm.Coord(name)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("fit: table: %w", err)
		}
		names[a], fns[a] = name, fn
		if !cond {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, nil, fmt.Errorf("fit: table: condition %q: want NAME=NUMBER", c)
		}
		on = slices.DeleteFunc(on, func(i int) bool {
			x := fn(d.Features[i])
			return !(math.Abs(x-v) <= snapRel*math.Abs(v))
		})
	}
	return names, fns, on, nil
}

// snapAxes snaps each axis's coordinates of the rows idx to nodes
// (nodes[a]; ids[a][k] is row k's node), refusing (false, with
// st.Reason) an axis of more than MaxTableNodes nodes.
func (st *TableStats) snapAxes(d *Data, idx []int, names []string, fns []fpm.TermFunc, snapRel float64) (nodes [][]float64, ids [][]int, ok bool) {
	nodes = make([][]float64, len(names))
	ids = make([][]int, len(names))
	for a, c := range names {
		vals := make([]float64, len(idx))
		for k, i := range idx {
			vals[k] = fns[a](d.Features[i])
		}
		nodes[a], ids[a] = snap(vals, snapRel)
		st.Nodes = append(st.Nodes, len(nodes[a]))
		if len(nodes[a]) > MaxTableNodes {
			st.Reason = fmt.Sprintf("%d distinct values of %s (a benchmark grid has at most %d)", len(nodes[a]), c, MaxTableNodes)
			return nil, nil, false
		}
	}
	return nodes, ids, true
}

// keepGridLines leaves out the sparse lines of the grid (gridLines) and
// their rows (counted off the grid), and returns the axes of the nodes
// kept and the number of cells they span; st.rows and st.node are the
// rows kept and their nodes.
func (st *TableStats) keepGridLines(idx []int, names []string, nodes [][]float64, ids [][]int) ([]fpm.TableAxis, int) {
	keep := gridLines(ids, st.Nodes)
	axes := make([]fpm.TableAxis, len(names))
	remap := make([][]int, len(names))
	cells := 1
	st.Nodes = st.Nodes[:0]
	for a, c := range names {
		remap[a] = make([]int, len(nodes[a]))
		var kept []float64
		for v, ok := range keep[a] {
			remap[a][v] = -1
			if ok {
				remap[a][v] = len(kept)
				kept = append(kept, nodes[a][v])
			}
		}
		axes[a] = fpm.TableAxis{Coord: c, Nodes: kept}
		st.Nodes = append(st.Nodes, len(kept))
		st.node = append(st.node, nil)
		cells *= len(kept)
	}
rows:
	for k, i := range idx {
		for a := range names {
			if remap[a][ids[a][k]] < 0 {
				st.OffGrid++
				continue rows
			}
		}
		st.rows = append(st.rows, i)
		for a := range names {
			st.node[a] = append(st.node[a], remap[a][ids[a][k]])
		}
	}
	st.Rows = len(st.rows)
	return axes, cells
}

// medians is the table of each cell's median time and its standard error
// (SE nil when every cell has one repeat), -1 where no row lies; it counts
// the measured and missing cells in st.
func (st *TableStats) medians(d *Data, axes []fpm.TableAxis, cells int, snapRel float64, seed uint64) *fpm.Table {
	groups := make([][]float64, cells)
	for k, i := range st.rows {
		groups[st.flat(k)] = append(groups[st.flat(k)], d.Y[i])
	}
	t := &fpm.Table{Axes: axes, Ns: make([]float64, cells), Tol: snapRel}
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
	if anySE {
		t.SE = se
	}
	return t
}

// gridLines returns, per axis, the nodes the table keeps: all of them
// when at least MinTableFill of the rectangle and of every line is
// measured, else what is left after dropping, one at a time, the line with
// the smallest share of its nodes measured (ties: the one whose measured
// nodes lie on the sparsest crossing lines, then the earlier axis and
// node), until they are, or until no axis has two nodes left. ids[a][k] is
// row k's node on axis a, n[a] the nodes of axis a.
func gridLines(ids [][]int, n []int) [][]bool {
	keep := make([][]bool, len(n))
	count := slices.Clone(n)
	for a := range n {
		keep[a] = make([]bool, n[a])
		for v := range keep[a] {
			keep[a][v] = true
		}
	}
	// The measured nodes, as tuples of node indices.
	seen := map[string]bool{}
	var measured [][]int
	for k := range ids[0] {
		tuple := make([]int, len(ids))
		for a := range ids {
			tuple[a] = ids[a][k]
		}
		if key := fmt.Sprint(tuple); !seen[key] {
			seen[key] = true
			measured = append(measured, tuple)
		}
	}
	for {
		cells, in := 1, 0
		for _, c := range count {
			cells *= c
		}
		lines := make([][]int, len(n)) // measured nodes per line
		for a := range n {
			lines[a] = make([]int, n[a])
		}
		for _, tuple := range measured {
			if inside(tuple, keep) {
				in++
				for a, v := range tuple {
					lines[a][v]++
				}
			}
		}
		if in == 0 || float64(in) >= MinTableFill*float64(cells) && sparsest(lines, keep, cells, count) >= MinTableFill {
			return keep
		}
		// The sparsest line goes; of equally sparse ones, the one whose
		// measured nodes lie on the sparsest crossing lines (points off
		// the grid sit on lines of their own).
		share := func(a, v int) float64 { return float64(lines[a][v]) / float64(cells/count[a]) }
		ba, bv, best, bestCross := -1, -1, math.Inf(1), math.Inf(1)
		for a := range n {
			if count[a] < 2 {
				continue
			}
			for v, ok := range keep[a] {
				if !ok || share(a, v) > best {
					continue
				}
				var cross float64
				var m int
				for _, tuple := range measured {
					if tuple[a] != v || !inside(tuple, keep) {
						continue
					}
					for b, w := range tuple {
						if b != a && count[b] > 1 {
							cross += share(b, w)
							m++
						}
					}
				}
				if m > 0 {
					cross /= float64(m)
				}
				if share(a, v) < best || cross < bestCross {
					ba, bv, best, bestCross = a, v, share(a, v), cross
				}
			}
		}
		if ba < 0 {
			return keep
		}
		keep[ba][bv] = false
		count[ba]--
	}
}

// sparsest is the smallest share measured of a kept line of an axis
// with two nodes or more (1 when there is none).
func sparsest(lines [][]int, keep [][]bool, cells int, count []int) float64 {
	out := 1.0
	for a := range lines {
		if count[a] < 2 {
			continue
		}
		for v, ok := range keep[a] {
			if ok {
				out = math.Min(out, float64(lines[a][v])/float64(cells/count[a]))
			}
		}
	}
	return out
}

func inside(tuple []int, keep [][]bool) bool {
	for a, v := range tuple {
		if !keep[a][v] {
			return false
		}
	}
	return true
}

// segment reports whether two neighbouring nodes of some axis are both
// measured: a grid has somewhere to interpolate (a step on the segment
// between them is inside the hull). ns holds the node times, row-major,
// negative if missing.
func (st *TableStats) segment(ns []float64) bool {
	stride := 1
	for a := len(st.Nodes) - 1; a >= 0; a-- {
		n := st.Nodes[a]
		for c := range ns {
			if c/stride%n < n-1 && ns[c] >= 0 && ns[c+stride] >= 0 {
				return true
			}
		}
		stride *= n
	}
	return false
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
	median = fpm.SortedQuantile(ys, 0.5)
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
		m := fpm.SortedQuantile(buf, 0.5)
		sum += m
		sq += m * m
	}
	mean := sum / reps
	return median, math.Sqrt(math.Max(0, sq/reps-mean*mean))
}
