package fpm

import (
	"fmt"
	"math"
)

// MaxTableAxes bounds the dimension of a Table (2^axes corners a lookup).
const MaxTableAxes = 6

// TableAxis is one axis of a Table: a coordinate (see Coord) and its
// nodes, strictly ascending.
type TableAxis struct {
	Coord string    `json:"coord"`
	Nodes []float64 `json:"nodes"`
}

// Table is multilinear interpolation over benchmark coordinates: the
// generalisation of Grid to any named coordinates (a decode benchmark is
// the table over decode_requests × kv_per_request, a prefill benchmark
// over prefill_tokens × prefill_requests).
//
// Its hull is its cell coverage: a step is inside when every coordinate is
// within the axis range (widened by Tol at both ends) and every node of the
// cell around it that carries weight was measured. A 2-D benchmark rarely
// fills its rectangle (a large batch at a long context does not fit in the
// KV cache), so per-axis ranges would call the unmeasured corner inside;
// cell coverage does not. A step on a node line needs only the nodes on
// that line.
type Table struct {
	Axes []TableAxis `json:"axes"`
	// Ns holds the node times in ns, row-major (the last axis varies
	// fastest); a node never measured is negative (JSON has no NaN).
	Ns []float64 `json:"ns"`
	// SE is each node's standard error in ns (the bootstrap of its
	// repeats; 0 for a single repeat); nil for none.
	SE []float64 `json:"se,omitempty"`
	// Tol is the relative tolerance at the ends of each axis: the
	// snapping tolerance of the build, so that a steady decode step
	// reading one token more than its benchmark point is still inside.
	Tol float64 `json:"tol,omitempty"`

	funcs   []TermFunc
	strides []int
}

// Validate checks the axes (known coordinates, strictly ascending finite
// nodes), the shape of Ns and SE, and that at least one node was measured;
// it also resolves the coordinates, so a validated table is ready to use.
func (t *Table) Validate() error {
	if len(t.Axes) == 0 || len(t.Axes) > MaxTableAxes {
		return fmt.Errorf("fpm: table: %d axes: want 1..%d", len(t.Axes), MaxTableAxes)
	}
	if !(t.Tol >= 0 && t.Tol < 1) {
		return fmt.Errorf("fpm: table: tol %v: want [0, 1)", t.Tol)
	}
	n := 1
	funcs := make([]TermFunc, len(t.Axes))
	for i, a := range t.Axes {
		fn, err := Coord(a.Coord)
		if err != nil {
			return fmt.Errorf("fpm: table axis %d: %w", i, err)
		}
		funcs[i] = fn
		if err := checkAxis(a.Coord, a.Nodes, false); err != nil {
			return err
		}
		n *= len(a.Nodes)
	}
	if len(t.Ns) != n {
		return fmt.Errorf("fpm: table: %d times for %d nodes", len(t.Ns), n)
	}
	if t.SE != nil && len(t.SE) != n {
		return fmt.Errorf("fpm: table: %d standard errors for %d nodes", len(t.SE), n)
	}
	measured := false
	for i, v := range t.Ns {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("fpm: table: time %v at node %d", v, i)
		}
		measured = measured || v >= 0
		if t.SE != nil && !(t.SE[i] >= 0) {
			return fmt.Errorf("fpm: table: standard error %v at node %d", t.SE[i], i)
		}
	}
	if !measured {
		return fmt.Errorf("fpm: table: no measured node")
	}
	t.funcs = funcs
	t.strides = make([]int, len(t.Axes))
	s := 1
	for i := len(t.Axes) - 1; i >= 0; i-- {
		t.strides[i] = s
		s *= len(t.Axes[i].Nodes)
	}
	return nil
}

// Coords lists the table's coordinates in axis order.
func (t *Table) Coords() []string {
	out := make([]string, len(t.Axes))
	for i, a := range t.Axes {
		out[i] = a.Coord
	}
	return out
}

// Lookup interpolates the step's time and its standard error. inside is
// false when the step is outside the hull (see Table); ns and se are then
// not computed.
func (t *Table) Lookup(f Features) (ns, se float64, inside bool) {
	var seg [MaxTableAxes]int
	var frac [MaxTableAxes]float64
	for d, a := range t.Axes {
		x := t.funcs[d](f)
		nodes := a.Nodes
		lo, hi := nodes[0], nodes[len(nodes)-1]
		if !(x >= lo*(1-t.Tol) && x <= hi*(1+t.Tol)) { // NaN (unknown) is outside too
			return 0, 0, false
		}
		if len(nodes) == 1 {
			continue
		}
		x = clamp(x, lo, hi)
		i := 0 // the segment nodes[i] <= x <= nodes[i+1]: axes are short, a scan beats a search
		for i < len(nodes)-2 && x > nodes[i+1] {
			i++
		}
		seg[d], frac[d] = i, (x-nodes[i])/(nodes[i+1]-nodes[i])
	}
	var v2 float64
	for c := 0; c < 1<<len(t.Axes); c++ {
		w, k := 1.0, 0
		for d := range t.Axes {
			i, u := seg[d], frac[d]
			if c>>d&1 == 1 {
				if len(t.Axes[d].Nodes) == 1 {
					w = 0
					break
				}
				i++
			} else {
				u = 1 - u
			}
			w *= u
			k += i * t.strides[d]
		}
		if w == 0 {
			continue
		}
		v := t.Ns[k]
		if v < 0 {
			return 0, 0, false
		}
		ns += w * v
		if t.SE != nil {
			v2 += w * w * t.SE[k] * t.SE[k]
		}
	}
	return ns, math.Sqrt(v2), true
}

// clamp is math.Max(lo, math.Min(hi, x)) without the NaN handling, which
// shows in a lookup that runs once a step.
func clamp(x, lo, hi float64) float64 {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}
