package fpm

import (
	"fmt"
	"math"
	"sort"
)

// opTable is one measured latency table over positive numeric axes (GEMM:
// n, k, m; attention: head_dim, kv heads, heads, sequence, batch), stored
// nested: the level of axis i maps each measured value of that axis to the
// sub-table of the remaining axes, so a ragged grid (AIConfigurator's
// attention tables stop at smaller sequence lengths for larger batches)
// needs no filling in.
//
// A lookup interpolates axis by axis in log space: between two measured
// values a and b of an axis the latency is exp((1−w)·ln L(a) + w·ln L(b))
// with w = ln(x/a)/ln(b/a), exact at the measured points, monotone between
// them when the two neighbours are, and exact wherever latency is a power
// of the coordinate (linear in tokens, quadratic in sequence length). Past
// the last measured value of an axis it holds the measured point's
// efficiency and lets the physical cost carry the growth:
// L(x) = L(edge)·sol(x)/sol(edge), sol being the op's speed-of-light time
// (max of FLOPs and bytes over the hardware's peaks), as AIConfigurator's
// perf_interp does past its collected range; such a lookup is flagged as
// extrapolated.
type opTable struct {
	keys []float64
	subs []*opTable // nil at the last axis
	ns   []float64  // latencies at the last axis
}

// opTableBuilder collects the rows of one table before they are sorted.
type opTableBuilder struct {
	table string   // for errors: database and table name
	axes  []string // axis names, outermost first
	root  map[float64]any
}

func newOpTableBuilder(table string, axes []string) *opTableBuilder {
	return &opTableBuilder{table: table, axes: axes, root: map[float64]any{}}
}

// add records row's latency (ms) at c. It refuses a coordinate or a
// latency a log-space lookup cannot use, naming the row and the axis. A
// second row at the same coordinates keeps the faster (the kernel a
// framework would pick).
func (b *opTableBuilder) add(row int, c opCoords, ms float64) error {
	for i, a := range b.axes {
		if !(c[i] > 0) || math.IsInf(c[i], 0) {
			return fmt.Errorf("%s row %d: %s = %v: must be > 0", b.table, row, a, c[i])
		}
	}
	if !(ms > 0) || math.IsInf(ms, 0) {
		return fmt.Errorf("%s row %d: latency = %v: must be a positive number of milliseconds", b.table, row, ms)
	}
	ns := ms * 1e6
	m := b.root
	last := len(b.axes) - 1
	for _, x := range c[:last] {
		next, ok := m[x].(map[float64]any)
		if !ok {
			next = map[float64]any{}
			m[x] = next
		}
		m = next
	}
	if old, ok := m[c[last]]; !ok || ns < old.(float64) {
		m[c[last]] = ns
	}
	return nil
}

func (b *opTableBuilder) build() *opTable { return buildLevel(b.root, len(b.axes)) }

// built is build, or nil for a builder that saw no rows.
func (b *opTableBuilder) built() *opTable {
	if len(b.root) == 0 {
		return nil
	}
	return b.build()
}

func buildLevel(m map[float64]any, axes int) *opTable {
	t := &opTable{keys: make([]float64, 0, len(m))}
	for k := range m {
		t.keys = append(t.keys, k)
	}
	sort.Float64s(t.keys)
	for _, k := range t.keys {
		if axes == 1 {
			t.ns = append(t.ns, m[k].(float64))
		} else {
			t.subs = append(t.subs, buildLevel(m[k].(map[float64]any), axes-1))
		}
	}
	return t
}

// opCoords is a lookup's coordinates, one per axis (at most five; unused
// trailing axes are ignored). Passed by value so that a lookup allocates
// nothing.
type opCoords [5]float64

// solver is an op's speed-of-light time at given coordinates (any
// positive unit: only ratios are used).
type solver interface{ sol(c opCoords) float64 }

// lookup prices q (one coordinate per axis, all > 0).
func (t *opTable) lookup(q opCoords, s solver) (ns float64, extrapolated bool) {
	return t.at(&q, 0, s)
}

func (t *opTable) at(q *opCoords, d int, s solver) (float64, bool) {
	x := q[d]
	n := len(t.keys)
	i := sort.SearchFloat64s(t.keys, x) // first key >= x
	switch {
	case i < n && t.keys[i] == x:
		return t.value(i, q, d, s)
	case i == 0 || i == n:
		e := 0
		if i == n {
			e = n - 1
		}
		q[d] = t.keys[e]
		v, _ := t.value(e, q, d, s)
		edge := s.sol(*q)
		q[d] = x
		return v * s.sol(*q) / edge, true
	}
	lo, x0 := t.value(i-1, q, d, s)
	hi, x1 := t.value(i, q, d, s)
	w := math.Log(x/t.keys[i-1]) / math.Log(t.keys[i]/t.keys[i-1])
	return math.Exp((1-w)*math.Log(lo) + w*math.Log(hi)), x0 || x1
}

// value is entry i of this level at q (q[d] is not read below level d).
func (t *opTable) value(i int, q *opCoords, d int, s solver) (float64, bool) {
	if t.subs == nil {
		return t.ns[i], false
	}
	return t.subs[i].at(q, d+1, s)
}
