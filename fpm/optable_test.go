package fpm

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// linearCost is a speed of light proportional to the product of the
// coordinates (a GEMM's FLOPs are m·n·k).
type linearCost struct{ axes int }

func (c linearCost) sol(q opCoords) float64 {
	p := 1.0
	for _, x := range q[:c.axes] {
		p *= x
	}
	return p
}

// table2 builds a two-axis table from rows (x, y, ms).
func table2(t *testing.T, rows [][3]float64) *opTable {
	t.Helper()
	b := newOpTableBuilder("test", []string{"x", "y"})
	for i, r := range rows {
		require.NoError(t, b.add(i, opCoords{r[0], r[1]}, r[2]))
	}
	return b.build()
}

func TestOpTableLookup(t *testing.T) {
	// latency = x·y² ms on a 3×3 grid (x, y ∈ {1, 4, 16}): a power law, so
	// log-space interpolation is exact between the points too.
	var rows [][3]float64
	for _, x := range []float64{1, 4, 16} {
		for _, y := range []float64{1, 4, 16} {
			rows = append(rows, [3]float64{x, y, x * y * y})
		}
	}
	tab := table2(t, rows)
	sol := linearCost{2}
	cases := []struct {
		name   string
		x, y   float64
		wantMs float64
		ext    bool
	}{
		{"grid point", 4, 16, 4 * 256, false},
		{"grid corner", 1, 1, 1, false},
		{"between on x", 2, 4, 2 * 16, false},
		{"between on both", 8, 2, 8 * 4, false},
		// Past the grid the edge point is scaled by sol (x·y): linear in
		// y beyond 16, whatever the measured curvature.
		{"beyond y", 4, 32, 4 * 256 * 2, true},
		{"beyond x", 64, 4, 16 * 16 * 4, true},
		{"below x", 0.5, 4, 1 * 16 * 0.5, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns, ext := tab.lookup(opCoords{c.x, c.y}, sol)
			require.InDelta(t, c.wantMs*1e6, ns, 1e-6*c.wantMs*1e6)
			require.Equal(t, c.ext, ext)
		})
	}
}

// Between two measured points the lookup stays between their latencies
// and moves one way, whatever the curve (here a noisy, non-power law).
func TestOpTableMonotoneBetween(t *testing.T) {
	tab := table2(t, [][3]float64{{1, 1, 3}, {1, 8, 5}, {1, 64, 40}, {1, 512, 41}})
	prev := 0.0
	for y := 1.0; y <= 512; y *= 1.1 {
		ns, ext := tab.lookup(opCoords{1, y}, linearCost{2})
		require.False(t, ext)
		require.GreaterOrEqual(t, ns, prev, "y=%v", y)
		prev = ns
	}
}

// A ragged grid (a larger batch measured to shorter lengths) interpolates
// where both neighbours exist and extrapolates the short one past its end.
func TestOpTableRagged(t *testing.T) {
	tab := table2(t, [][3]float64{{1, 1, 1}, {1, 100, 100}, {10, 1, 10}, {10, 10, 100}})
	ns, ext := tab.lookup(opCoords{1, 50}, linearCost{2})
	require.InDelta(t, 50e6, ns, 1)
	require.False(t, ext)
	// x=10 stops at y=10: y=50 there is 10·10·(50/10) = 500 ms by sol.
	ns, ext = tab.lookup(opCoords{10, 50}, linearCost{2})
	require.InDelta(t, 500e6, ns, 1)
	require.True(t, ext)
	// Between x=1 and x=10 the extrapolated neighbour marks the result.
	_, ext = tab.lookup(opCoords{3, 50}, linearCost{2})
	require.True(t, ext)
}

func TestOpTableBuilder(t *testing.T) {
	b := newOpTableBuilder("db: gemm", []string{"n", "k", "m"})
	require.NoError(t, b.add(0, opCoords{4, 4, 1}, 2))
	require.NoError(t, b.add(1, opCoords{4, 4, 1}, 1.5), "a duplicate keeps the faster")
	ns, _ := b.build().lookup(opCoords{4, 4, 1}, linearCost{3})
	require.Equal(t, 1.5e6, ns)
	for _, c := range []struct {
		row  opCoords
		ms   float64
		want string
	}{
		{opCoords{4, 0, 1}, 1, "db: gemm row 7: k = 0: must be > 0"},
		{opCoords{4, 4, -2}, 1, "m = -2"},
		{opCoords{4, 4, math.Inf(1)}, 1, "m = +Inf"},
		{opCoords{4, 4, 1}, 0, "latency = 0"},
		{opCoords{4, 4, 1}, math.NaN(), "latency = NaN"},
	} {
		require.ErrorContains(t, b.add(7, c.row, c.ms), c.want)
	}
}
