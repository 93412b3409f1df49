package fpm

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBasisRefusesUnknownAndDuplicate(t *testing.T) {
	_, err := NewBasis([]string{"const", "bogus"})
	require.ErrorContains(t, err, `unknown term "bogus"`)
	_, err = NewBasis([]string{"const", "const"})
	require.ErrorContains(t, err, `"const" named twice`)
	_, err = NewBasis(nil)
	require.Error(t, err)
	require.Len(t, DefaultTerms, 8)
	for _, n := range KnownTerms() {
		_, err := Term(n)
		require.NoError(t, err)
	}
}

func TestLinearMixedIsPrefillPlusMarginalDecode(t *testing.T) {
	m, err := NewLinear(DefaultTerms, []float64{4e6, 50, 2, 0.01, 3e4, 1.2, 1e4, 3})
	require.NoError(t, err)
	pre := Features{PrefillTokens: 2048, PrefillKVTokens: 1024, PrefillAttn: 2048 * (1024 + 1024), PrefillRequests: 1}
	dec := Features{DecodeRequests: 64, DecodeKVTokens: 64 * 3000, PaddedBatch: 64}
	mixed := pre
	mixed.DecodeRequests, mixed.DecodeKVTokens, mixed.PaddedBatch = dec.DecodeRequests, dec.DecodeKVTokens, dec.PaddedBatch
	const fixed = 4e6
	require.InDelta(t, m.PredictNs(pre)+(m.PredictNs(dec)-fixed), m.PredictNs(mixed), 1e-6)
	var sum float64
	for _, c := range m.Contributions(mixed) {
		sum += c
	}
	require.InDelta(t, m.PredictNs(mixed), sum, 1e-6)
	_, err = NewLinear([]string{"const"}, []float64{math.NaN()})
	require.Error(t, err)
	_, err = NewLinear([]string{"const"}, []float64{1, 2})
	require.Error(t, err)
}

func TestResidualQuantileIntervals(t *testing.T) {
	res := make([]float64, 1001)
	for i := range res {
		res[i] = -0.1 + 0.2*float64(i)/1000 // uniform on [-0.1, 0.1]
	}
	q, err := NewResidualQuantiles(ScaleRelative, res, nil, "training")
	require.NoError(t, err)
	m, _ := NewLinear([]string{"const"}, []float64{1000})
	m.Residuals = q
	mid, lo, hi := m.PredictIntervalNs(Features{}, 0.9)
	require.Equal(t, 1000.0, mid)
	require.InDelta(t, 1000*(1-0.09), lo, 1e-6)
	require.InDelta(t, 1000*(1+0.09), hi, 1e-6)
	// Absolute scale, and no residuals at all.
	qa, err := NewResidualQuantiles(ScaleAbsolute, []float64{-5, 5}, []float64{0, 1}, "")
	require.NoError(t, err)
	lo, hi = qa.Interval(100, 1)
	require.Equal(t, [2]float64{95, 105}, [2]float64{lo, hi})
	var none *ResidualQuantiles
	lo, hi = none.Interval(7, 0.9)
	require.Equal(t, [2]float64{7, 7}, [2]float64{lo, hi})
	_, err = NewResidualQuantiles("weird", res, nil, "")
	require.Error(t, err)
	_, err = NewResidualQuantiles(ScaleRelative, nil, nil, "")
	require.Error(t, err)
	require.Equal(t, 2.5, SortedQuantile([]float64{1, 2, 3, 4}, 0.5))
}
