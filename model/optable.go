package model

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
	axes int
	root map[float64]any // nested maps; the last level holds float64
}

func newOpTableBuilder(axes int) *opTableBuilder {
	return &opTableBuilder{axes: axes, root: map[float64]any{}}
}

// add records a measured latency at coords; a second row at the same
// coordinates keeps the faster (the better kernel a framework would pick).
func (b *opTableBuilder) add(coords []float64, ns float64) {
	m := b.root
	for i, c := range coords {
		if i == len(coords)-1 {
			if old, ok := m[c]; !ok || ns < old.(float64) {
				m[c] = ns
			}
			return
		}
		next, ok := m[c].(map[float64]any)
		if !ok {
			next = map[float64]any{}
			m[c] = next
		}
		m = next
	}
}

func (b *opTableBuilder) build() *opTable { return buildLevel(b.root, b.axes) }

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

// solFunc is an op's speed-of-light time at the given coordinates (any
// positive unit: only ratios are used).
type solFunc func(coords []float64) float64

// lookup prices q (one coordinate per axis, all > 0). q is used as
// scratch and restored.
func (t *opTable) lookup(q []float64, sol solFunc) (ns float64, extrapolated bool) {
	return t.at(q, 0, sol)
}

func (t *opTable) at(q []float64, d int, sol solFunc) (float64, bool) {
	x := q[d]
	n := len(t.keys)
	i := sort.SearchFloat64s(t.keys, x) // first key >= x
	switch {
	case i < n && t.keys[i] == x:
		return t.value(i, q, d, sol)
	case i == 0 || i == n:
		e := 0
		if i == n {
			e = n - 1
		}
		q[d] = t.keys[e]
		v, _ := t.value(e, q, d, sol)
		edge := sol(q)
		q[d] = x
		return v * sol(q) / edge, true
	}
	lo, x0 := t.value(i-1, q, d, sol)
	hi, x1 := t.value(i, q, d, sol)
	w := math.Log(x/t.keys[i-1]) / math.Log(t.keys[i]/t.keys[i-1])
	return math.Exp((1-w)*math.Log(lo) + w*math.Log(hi)), x0 || x1
}

// value is entry i of this level at q (q[d] is not read below level d).
func (t *opTable) value(i int, q []float64, d int, sol solFunc) (float64, bool) {
	if t.subs == nil {
		return t.ns[i], false
	}
	return t.subs[i].at(q, d+1, sol)
}

// span is the measured range of the first axis.
func (t *opTable) span() (lo, hi float64) { return t.keys[0], t.keys[len(t.keys)-1] }

// checkPositive refuses a coordinate or latency a log-space lookup cannot
// use, naming the table and the axis.
func checkPositive(table string, axes []string, coords []float64, ns float64) error {
	for i, c := range coords {
		if !(c > 0) || math.IsInf(c, 0) {
			return fmt.Errorf("%s: %s = %v: must be > 0", table, axes[i], c)
		}
	}
	if !(ns > 0) || math.IsInf(ns, 0) {
		return fmt.Errorf("%s: latency = %v: must be a positive number of milliseconds", table, ns)
	}
	return nil
}
