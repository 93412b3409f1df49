package fpm

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// testTable is a 3×3 decode table over (batch, context per request) whose
// corner (64, 8192) was never measured (as a large batch at a long context
// does not fit in the KV cache).
func testTable() *Table {
	return &Table{
		Axes: []TableAxis{{Coord: TermDecodeRequests, Nodes: []float64{1, 8, 64}}, {Coord: CoordKVPerRequest, Nodes: []float64{128, 1024, 8192}}},
		Ns: []float64{
			5e6, 5.2e6, 6e6,
			5.5e6, 6e6, 9e6,
			8e6, 10e6, -1,
		},
		SE:  []float64{1e5, 1e5, 1e5, 1e5, 2e5, 1e5, 1e5, 1e5, 0},
		Tol: 0.02,
	}
}

func TestTableLookup(t *testing.T) {
	tb := testTable()
	require.NoError(t, tb.Validate())
	cases := []struct {
		name     string
		b, kv    float64
		inside   bool
		ns, se   float64
		tolerant bool
	}{
		{name: "node", b: 8, kv: 1024, inside: true, ns: 6e6, se: 2e5},
		{name: "on a batch line", b: 8, kv: 576, inside: true, ns: (5.5e6 + 6e6) / 2, se: math.Hypot(0.5e5, 1e5)},
		{name: "cell centre", b: 4.5, kv: 576, inside: true, ns: (5e6 + 5.2e6 + 5.5e6 + 6e6) / 4,
			se: math.Sqrt(3*0.0625*1e10 + 0.0625*4e10)},
		{name: "node line next to the missing corner", b: 64, kv: 1024, inside: true, ns: 10e6, se: 1e5},
		{name: "cell with the missing corner", b: 32, kv: 4096, inside: false},
		{name: "on the missing node", b: 64, kv: 8192, inside: false},
		{name: "beyond the batch axis", b: 128, kv: 1024, inside: false},
		{name: "below the context axis", b: 8, kv: 100, inside: false},
		{name: "within the end tolerance", b: 8, kv: 1040, inside: true, ns: 6e6 + (1040-1024)/(8192-1024.0)*3e6, tolerant: true},
		{name: "within the tolerance past the end", b: 8, kv: 126, inside: true, ns: 5.5e6, se: 1e5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns, se, in := tb.Lookup(Features{DecodeRequests: c.b, DecodeKVTokens: c.b * c.kv})
			require.Equal(t, c.inside, in)
			if !c.inside {
				return
			}
			require.InDelta(t, c.ns, ns, 1)
			if !c.tolerant {
				require.InDelta(t, c.se, se, 1)
			}
		})
	}
}

func TestTableValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Table)
		want string
	}{
		{"unknown coordinate", func(t *Table) { t.Axes[0].Coord = "batch" }, "unknown coordinate"},
		{"descending nodes", func(t *Table) { t.Axes[1].Nodes = []float64{128, 64, 8192} }, "ascending"},
		{"wrong size", func(t *Table) { t.Ns = t.Ns[:8] }, "8 times for 9 nodes"},
		{"nothing measured", func(t *Table) {
			for i := range t.Ns {
				t.Ns[i] = -1
			}
		}, "no measured node"},
		{"negative se", func(t *Table) { t.SE[0] = -1 }, "standard error"},
		{"no axes", func(t *Table) { t.Axes = nil }, "0 axes"},
		{"tolerance", func(t *Table) { t.Tol = 1 }, "tol"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := testTable()
			c.edit(tb)
			require.ErrorContains(t, tb.Validate(), c.want)
		})
	}
}

func TestIntervalSE(t *testing.T) {
	q, err := NewResidualQuantiles(ScaleRelative, []float64{-0.1, -0.05, 0, 0.05, 0.1, 0.2}, []float64{0.05, 0.5, 0.95}, "test")
	require.NoError(t, err)
	z := NormalQuantile(0.95)
	require.InDelta(t, 1.6449, z, 1e-4)
	lo0, hi0 := q.Interval(100, 0.9)
	lo, hi := q.IntervalSE(100, 0, 0.9)
	require.Equal(t, lo0, lo, "no standard error: the residual interval")
	require.Equal(t, hi0, hi)
	require.InDelta(t, 100*(1+q.Quantile(0.05)), lo, 1e-9)
	// A standard error adds in quadrature on both sides.
	lo, hi = q.IntervalSE(100, 5, 0.9)
	require.InDelta(t, 100-math.Hypot(100-lo0, z*5), lo, 1e-9)
	require.InDelta(t, 100+math.Hypot(hi0-100, z*5), hi, 1e-9)
	// No residuals: ±z·se, floored at 0.
	var none *ResidualQuantiles
	lo, hi = none.IntervalSE(10, 10, 0.9)
	require.Equal(t, 0.0, lo)
	require.InDelta(t, 10+z*10, hi, 1e-9)
	lo, hi = none.IntervalSE(10, 0, 0.9)
	require.Equal(t, [2]float64{10, 10}, [2]float64{lo, hi})
}

// A condition axis (one node) holds the table to the steps at its value:
// a table of uniform decode batches prices no ragged one, nor a step
// whose longest context is unknown.
func TestTableConditionAxis(t *testing.T) {
	tb := testTable()
	tb.Axes = append(tb.Axes, TableAxis{Coord: CoordKVMaxRatio, Nodes: []float64{1}})
	require.NoError(t, tb.Validate())
	uniform := dec(8, 1024)
	uniform.DecodeMaxKVTokens = 1024
	ns, _, in := tb.Lookup(uniform)
	require.True(t, in)
	require.Equal(t, 6e6, ns)
	for _, longest := range []float64{1500, math.NaN()} {
		f := uniform
		f.DecodeMaxKVTokens = longest
		_, _, in := tb.Lookup(f)
		require.False(t, in, "longest context %v", longest)
	}
	fn, err := Coord(CoordKVMaxRatio)
	require.NoError(t, err)
	require.Equal(t, 0.0, fn(Features{}), "no decode requests")
	require.Equal(t, 1.5, fn(Features{DecodeRequests: 2, DecodeKVTokens: 2000, DecodeMaxKVTokens: 1500}))
}
