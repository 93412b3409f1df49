package fpm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func testGrid() *Grid {
	return &Grid{
		Decode: &DecodeGrid{
			Batch:        []float64{1, 8, 64},
			KVPerRequest: []float64{128, 1024, 8192},
			Ns: [][]float64{
				{5e6, 5.2e6, 6e6},
				{5.5e6, 6e6, 9e6},
				{8e6, 10e6, 30e6},
			},
		},
		Prefill: &PrefillGrid{Tokens: []float64{128, 512, 2048, 8192}, Ns: []float64{6e6, 9e6, 20e6, 90e6}},
	}
}

func dec(b, kvPer float64) Features {
	return Features{DecodeRequests: b, DecodeKVTokens: b * kvPer, PaddedBatch: b}
}

func TestGridExactAtNodes(t *testing.T) {
	g := testGrid()
	require.NoError(t, g.Validate())
	for i, b := range g.Decode.Batch {
		for j, k := range g.Decode.KVPerRequest {
			ns, lk := g.Predict(dec(b, k))
			require.True(t, lk.InDomain())
			require.InDelta(t, g.Decode.Ns[i][j], ns, 1e-6, "node (%g,%g)", b, k)
		}
	}
	for i, tok := range g.Prefill.Tokens {
		ns, lk := g.Predict(Features{PrefillTokens: tok, PrefillRequests: 1})
		require.True(t, lk.InDomain())
		require.InDelta(t, g.Prefill.Ns[i], ns, 1e-6)
	}
}

func TestGridLinearBetweenNodes(t *testing.T) {
	g := testGrid()
	// Along the batch axis at a kv node: linear.
	for _, frac := range []float64{0.1, 0.25, 0.5, 0.9} {
		b := 8 + frac*(64-8)
		want := 6e6 + frac*(10e6-6e6)
		require.InDelta(t, want, g.PredictNs(dec(b, 1024)), 1e-3)
	}
	// Centre of a cell: mean of its four corners (bilinear).
	ns := g.PredictNs(dec(4.5, 576))
	require.InDelta(t, (5e6+5.2e6+5.5e6+6e6)/4, ns, 1e-3)
	// Bilinear: linear along any axis-parallel line inside a cell.
	a, m, c := g.PredictNs(dec(20, 2000)), g.PredictNs(dec(30, 2000)), g.PredictNs(dec(40, 2000))
	require.InDelta(t, (a+c)/2, m, 1e-3)
	// Prefill: linear in tokens.
	require.InDelta(t, 9e6+0.5*(20e6-9e6), g.PredictNs(Features{PrefillTokens: 1280, PrefillRequests: 1}), 1e-3)
}

func TestGridLogAxesAndSqrt(t *testing.T) {
	g := testGrid()
	g.Decode.LogAxes = true
	// Geometric midpoint of 1 and 8 along batch (kv at node 128).
	require.InDelta(t, (5e6+5.5e6)/2, g.PredictNs(dec(2.8284271247461903, 128)), 1e-3)
	// sqrt interpolation is exact for (a + b·x)².
	p := &PrefillGrid{Tokens: []float64{0, 100, 1000}, Interp: InterpSqrt}
	f := func(x float64) float64 { v := 2000 + 3*x; return v * v }
	for _, x := range p.Tokens {
		p.Ns = append(p.Ns, f(x))
	}
	g2 := &Grid{Prefill: p}
	require.NoError(t, g2.Validate())
	require.InDelta(t, f(550), g2.PredictNs(Features{PrefillTokens: 550, PrefillRequests: 1}), 1e-3)
}

func TestGridOutsideDomain(t *testing.T) {
	g := testGrid()
	ns, lk := g.Predict(dec(128, 8192))
	require.Equal(t, 30e6, ns)
	require.Equal(t, []string{"batch"}, lk.Clamped)
	ns, lk = g.Predict(dec(0.5, 50))
	require.Equal(t, 5e6, ns)
	require.ElementsMatch(t, []string{"batch", "kv_per_request"}, lk.Clamped)
	ns, lk = g.Predict(Features{PrefillTokens: 16384, PrefillRequests: 1})
	require.Equal(t, 90e6, ns)
	require.Equal(t, []string{"prefill_tokens"}, lk.Clamped)

	g.Outside = OutsideLinear
	ns, lk = g.Predict(dec(120, 8192)) // slope (30-9)/(64-8) per request beyond 64
	require.InDelta(t, 30e6+56*(30e6-9e6)/56, ns, 1e-3)
	require.False(t, lk.InDomain())
	ns = g.PredictNs(Features{PrefillTokens: 14336, PrefillRequests: 1})
	require.InDelta(t, 90e6+6144*(70e6/6144), ns, 1e-3)
}

func TestGridMixedMarginalDecode(t *testing.T) {
	g := testGrid()
	f := Features{PrefillTokens: 504, PrefillRequests: 1, DecodeRequests: 8, DecodeKVTokens: 8 * 8192}
	// prefill(504+8) + [decode(8, 8192) − decode(8, 128)]
	require.InDelta(t, 9e6+(9e6-5.5e6), g.PredictNs(f), 1e-3)
	// At the KV floor the decode work adds nothing beyond its GEMM tokens.
	f.DecodeKVTokens = 8 * 128
	require.InDelta(t, 9e6, g.PredictNs(f), 1e-3)
	require.Equal(t, 0.0, g.PredictNs(Features{}))
}

func TestGridMissingCells(t *testing.T) {
	g := testGrid()
	g.Decode.Ns[1][1] = -1
	require.NoError(t, g.Validate())
	ns, lk := g.Predict(dec(4.5, 576))
	require.True(t, lk.Missing)
	require.InDelta(t, (5e6+5.2e6+5.5e6)/3, ns, 1e-3)
	ns, lk = g.Predict(dec(8, 1024)) // exactly on the missing node
	require.True(t, lk.Missing)
	require.Greater(t, ns, 0.0)
	noDec := &Grid{Prefill: g.Prefill}
	_, lk = noDec.Predict(dec(8, 1024))
	require.True(t, lk.Missing)
}

func TestGridValidate(t *testing.T) {
	for name, mut := range map[string]func(g *Grid){
		"empty":      func(g *Grid) { g.Decode, g.Prefill = nil, nil },
		"descending": func(g *Grid) { g.Decode.Batch = []float64{8, 1, 64} },
		"shape":      func(g *Grid) { g.Decode.Ns = g.Decode.Ns[:2] },
		"outside":    func(g *Grid) { g.Outside = "extrapolate-wildly" },
		"interp":     func(g *Grid) { g.Prefill.Interp = "cubic" },
		"prefill":    func(g *Grid) { g.Prefill.Ns[0] = -1 },
		"log0":       func(g *Grid) { g.Decode.LogAxes = true; g.Decode.KVPerRequest[0] = 0 },
	} {
		g := testGrid()
		mut(g)
		require.Error(t, g.Validate(), name)
	}
}

func TestGridInterval(t *testing.T) {
	g := testGrid()
	q, _ := NewResidualQuantiles(ScaleRelative, []float64{-0.05, 0.05}, []float64{0, 1}, "repeats")
	g.Residuals = q
	mid, lo, hi := g.PredictIntervalNs(dec(8, 1024), 1)
	require.Equal(t, 6e6, mid)
	require.InDelta(t, 5.7e6, lo, 1e-3)
	require.InDelta(t, 6.3e6, hi, 1e-3)
	var _ IntervalFPM = g
	var _ IntervalFPM = &Linear{}
}
