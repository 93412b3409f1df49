package fit

import (
	"testing"

	"github.com/steplab/steplab/fpm"
	"github.com/stretchr/testify/require"
)

// bilinearTruth is a decode time that bilinear interpolation reproduces
// exactly: a + b·B + c·K + d·B·K (K = KV tokens per request).
func bilinearTruth(b, k float64) float64 { return 4e6 + 2e4*b + 50*k + 1.5*b*k }

// benchRows builds benchmark rows on a batch × context grid with repeats:
// three repeats per node (contexts k, k+1, k+2), one of them a straggler,
// plus prefill rows and one mixed row.
func benchRows() *Data {
	d := &Data{}
	for _, b := range []float64{1, 8, 32, 128} {
		for _, k := range []float64{512, 2048, 8192} {
			for r, excess := range []float64{0, 0, 0.5} { // two clean repeats, one straggler
				kk := k + float64(r) // steady steps read one more token each step
				f := fpm.Features{DecodeRequests: b, DecodeKVTokens: b * kk, PaddedBatch: b}
				d.Features = append(d.Features, f)
				d.Y = append(d.Y, bilinearTruth(b, k)*(1+excess))
				d.Kinds = append(d.Kinds, "decode")
			}
		}
	}
	for _, tok := range []float64{256, 1024, 4096} {
		for r := 0; r < 3; r++ {
			d.Features = append(d.Features, fpm.Features{PrefillTokens: tok, PrefillRequests: 1})
			d.Y = append(d.Y, 5e6+80*tok+float64(r)*1e3)
			d.Kinds = append(d.Kinds, "prefill")
		}
	}
	d.Features = append(d.Features, fpm.Features{PrefillTokens: 100, PrefillRequests: 1, DecodeRequests: 4, DecodeKVTokens: 400})
	d.Y = append(d.Y, 1e7)
	d.Kinds = append(d.Kinds, "mixed")
	return d
}

// Must-show (d): the grid is exact at its nodes (the median of the
// repeats, ignoring the straggler repeat) and linear between them.
func TestBuildGridExactAtNodesLinearBetween(t *testing.T) {
	d := benchRows()
	g, st, err := BuildGrid(d, GridOptions{})
	require.NoError(t, err)
	require.Equal(t, []float64{1, 8, 32, 128}, g.Decode.Batch)
	require.Equal(t, []float64{513, 2049, 8193}, g.Decode.KVPerRequest, "contexts k, k+1, k+2 snap to one node at their median")
	require.Equal(t, 12, st.DecodeCells)
	require.Equal(t, 0, st.MissingCells)
	require.Equal(t, 1, st.SkippedMixed)
	require.Equal(t, 3, st.MaxRepeats)
	require.NotNil(t, g.Residuals)
	require.Equal(t, "repeats", g.Residuals.Source)

	// Nodes: the median of the repeats (0, 0, +50%) is the clean time.
	for _, b := range g.Decode.Batch {
		for _, k := range []float64{512, 2048, 8192} {
			ns, lk := g.Predict(fpm.Features{DecodeRequests: b, DecodeKVTokens: b * (k + 1)})
			require.True(t, lk.InDomain())
			require.InDelta(t, bilinearTruth(b, k), ns, 1e-6, "node B=%g K=%g", b, k)
		}
	}
	// Between nodes: bilinear interpolation reproduces a bilinear function.
	node := func(k float64) float64 { return k - 1 } // axis node k+1 holds truth at k
	for _, q := range [][2]float64{{4, 1000}, {20, 5000}, {100, 600}, {1.5, 8000}} {
		b, kv := q[0], q[1]
		ns := g.PredictNs(fpm.Features{DecodeRequests: b, DecodeKVTokens: b * kv})
		require.InEpsilon(t, bilinearTruth(b, node(kv)), ns, 1e-9, "B=%g K=%g", b, kv)
	}
	// Prefill: medians at nodes, linear between.
	require.InDelta(t, 5e6+80*1024+1e3, g.PredictNs(fpm.Features{PrefillTokens: 1024, PrefillRequests: 1}), 1e-6)
	require.InDelta(t, 5e6+80*2560+1e3, g.PredictNs(fpm.Features{PrefillTokens: 2560, PrefillRequests: 1}), 1e-6)

	// Outside the domain: clamped and flagged.
	_, lk := g.Predict(fpm.Features{DecodeRequests: 512, DecodeKVTokens: 512 * 1000})
	require.Equal(t, []string{"batch"}, lk.Clamped)
}

func TestBuildGridMissingAndErrors(t *testing.T) {
	d := &Data{}
	for _, c := range [][2]float64{{1, 100}, {1, 1000}, {16, 100}} { // (16, 1000) never measured
		d.Features = append(d.Features, fpm.Features{DecodeRequests: c[0], DecodeKVTokens: c[0] * c[1]})
		d.Y = append(d.Y, 1e6*c[0]+c[1])
	}
	g, st, err := BuildGrid(d, GridOptions{LogAxes: true})
	require.NoError(t, err)
	require.Equal(t, 1, st.MissingCells)
	require.Nil(t, g.Prefill)
	require.Nil(t, g.Residuals, "no repeats, no residuals")
	require.Equal(t, -1.0, g.Decode.Ns[1][1])
	_, lk := g.Predict(fpm.Features{DecodeRequests: 16, DecodeKVTokens: 16 * 1000})
	require.True(t, lk.Missing)

	_, _, err = BuildGrid(&Data{}, GridOptions{})
	require.ErrorIs(t, err, ErrEmptySelection)
	mixedOnly := &Data{Features: []fpm.Features{{PrefillTokens: 5, PrefillRequests: 1, DecodeRequests: 1, DecodeKVTokens: 9}}, Y: []float64{1}}
	_, _, err = BuildGrid(mixedOnly, GridOptions{})
	require.ErrorIs(t, err, ErrEmptySelection)
	bad := &Data{Features: []fpm.Features{{DecodeRequests: 1}}, Y: []float64{-3}, StepIDs: []int64{77}}
	_, _, err = BuildGrid(bad, GridOptions{})
	require.ErrorIs(t, err, ErrBadTarget)
	require.ErrorContains(t, err, "step_id 77")
	_, _, err = BuildGrid(d, GridOptions{Outside: "wrap"})
	require.Error(t, err)
}

func TestSnap(t *testing.T) {
	axis, idx := snap([]float64{100, 101, 102, 200, 1, 2, 3}, 0.02)
	require.Equal(t, []float64{1, 2, 3, 101, 200}, axis)
	require.Equal(t, []int{3, 3, 3, 4, 0, 1, 2}, idx)
}
