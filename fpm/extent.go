package fpm

import "math"

// Extent is the measured design of a recipe kind: per table coordinate,
// the range its training rows took, and the log spacing of the table's
// nodes at each end. A held-out edge grid line measures the error of
// extrapolating one spacing past the measured range; Distance counts how
// many spacings a step lies outside what was measured, and the kind's
// grid-held-out residual deviations grow linearly with it (Widen): an
// assumption, that extrapolation error grows in proportion to the
// distance, which the interval coverage on traffic tests
// (docs/fitting.md).
type Extent struct {
	Axes []ExtentAxis `json:"axes"`
}

// ExtentAxis is one coordinate's measured range. LoUnit and HiUnit are the
// log spacings of the nodes at the bottom and top of the range.
type ExtentAxis struct {
	Coord  string  `json:"coord"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	LoUnit float64 `json:"lo_unit"`
	HiUnit float64 `json:"hi_unit"`

	fn TermFunc
}

// ratioAxes are condition axes that are not an extrapolation of the grid:
// kv_max_ratio (longest over mean context) is priced by the decode
// attention term's walk of the kernel's programs (DecodeWalk), whose
// coefficient a uniform grid identifies, so a ragged batch inside the
// grid's batch and context range is not widened.
var ratioAxes = map[string]bool{CoordKVMaxRatio: true}

// NewExtent is the extent of rows (a kind's training features) over the
// axes of table t, nil when t is nil or no axis has a spacing.
func NewExtent(t *Table, rows []Features) *Extent {
	if t == nil || len(rows) == 0 {
		return nil
	}
	units := map[string][2]float64{}
	for _, a := range t.Axes {
		if n := len(a.Nodes); n >= 2 && a.Nodes[0] > 0 {
			units[a.Coord] = [2]float64{math.Log(a.Nodes[1] / a.Nodes[0]), math.Log(a.Nodes[n-1] / a.Nodes[n-2])}
		}
	}
	e := &Extent{}
	for _, a := range t.Axes {
		u, ok := units[a.Coord]
		if ratioAxes[a.Coord] {
			continue
		}
		fn, err := Coord(a.Coord)
		if !ok || err != nil {
			continue
		}
		ax := ExtentAxis{Coord: a.Coord, Min: math.Inf(1), Max: math.Inf(-1), LoUnit: u[0], HiUnit: u[1], fn: fn}
		for _, f := range rows {
			if x := fn(f); x > 0 {
				ax.Min, ax.Max = math.Min(ax.Min, x), math.Max(ax.Max, x)
			}
		}
		if ax.Min <= ax.Max {
			e.Axes = append(e.Axes, ax)
		}
	}
	if len(e.Axes) == 0 {
		return nil
	}
	return e
}

// validate resolves the coordinates (an artifact read back).
func (e *Extent) validate() error {
	for i := range e.Axes {
		fn, err := Coord(e.Axes[i].Coord)
		if err != nil {
			return err
		}
		e.Axes[i].fn = fn
	}
	return nil
}

// Distance is how many grid spacings f lies outside the measured ranges,
// summed over the axes (0 inside, and for a nil extent).
func (e *Extent) Distance(f Features) float64 {
	if e == nil {
		return 0
	}
	d := 0.0
	for _, a := range e.Axes {
		x := a.fn(f)
		switch {
		case !(x > 0):
		case x > a.Max && a.HiUnit > 0:
			d += math.Log(x/a.Max) / a.HiUnit
		case x < a.Min && a.LoUnit > 0:
			d += math.Log(a.Min/x) / a.LoUnit
		}
	}
	return d
}

// Widen scales the interval [lo, hi] around mid by 1 + Distance(f).
func (e *Extent) Widen(f Features, mid, lo, hi float64) (float64, float64) {
	k := 1 + e.Distance(f)
	return math.Max(0, mid-k*(mid-lo)), mid + k*(hi-mid)
}
