package fpm

import (
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A model whose intervals would all have zero width reports none
// (IntervalLevel 0) and says why (NoUncertainty).
func TestNoUncertainty(t *testing.T) {
	lin := func(cov [][]float64, res *ResidualQuantiles) *Linear {
		m, err := NewLinear([]string{TermConst}, []float64{1e6})
		require.NoError(t, err)
		m.CoefCov, m.Residuals = cov, res
		return m
	}
	res := &ResidualQuantiles{Scale: ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-0.1, 0, 0.1}}
	hw, err := catalog.LookupHardware("H200")
	require.NoError(t, err)
	sh, err := catalog.LookupModel("Llama-3.1-8B")
	require.NoError(t, err)
	for _, c := range []struct {
		name  string
		m     FPM
		level float64 // IntervalLevel(m, 0)
		note  string  // part of NoUncertainty(m, "m.json"); "" none
	}{
		{"linear, no residuals or covariance", lin(nil, nil), 0, "the model m.json is a model that records no residuals"},
		{"linear with residuals", lin(nil, res), DefaultLevel, ""},
		{"linear with a covariance", lin([][]float64{{1e8}}, nil), DefaultLevel, ""},
		{"grid without residuals", &Grid{}, 0, "records no residuals"},
		{"recipe without residuals", &Recipe{Level: 0.8, Kinds: []RecipeKind{{Kind: "decode"}}}, 0, "records no residuals"},
		{"recipe with residuals", &Recipe{Level: 0.8, Kinds: []RecipeKind{{Kind: "decode", Residuals: map[string]*ResidualQuantiles{RegionAll: res}}}}, 0.8, ""},
		{"roofline prior", NewRoofline(hw, sh).Prepare(), 0, "is a prior with no prediction intervals"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.level, IntervalLevel(c.m, 0))
			note := NoUncertainty(c.m, "m.json")
			if c.note == "" {
				assert.Empty(t, note)
				return
			}
			assert.Contains(t, note, c.note)
			assert.Contains(t, note, "no uncertainty recorded")
		})
	}
}

// A step outside the measured design gets an interval widened by 1 +
// its distance in grid spacings; one inside keeps its own.
func TestExtentWidens(t *testing.T) {
	tab := &Table{Axes: []TableAxis{{Coord: TermDecodeRequests, Nodes: []float64{1, 2, 4}}, {Coord: CoordKVPerRequest, Nodes: []float64{512, 1024, 2048}},
		{Coord: CoordKVMaxRatio, Nodes: []float64{1}}}}
	step := func(b, mean, longest float64) Features {
		return Features{DecodeRequests: b, DecodeKVTokens: b * mean, DecodeMaxKVTokens: longest}
	}
	e := NewExtent(tab, []Features{step(1, 512, 512), step(4, 2048, 2048)})
	require.NotNil(t, e)
	require.NoError(t, e.validate())
	for _, c := range []struct {
		name string
		f    Features
		dist float64
	}{
		{"inside", step(2, 1024, 1024), 0},
		{"one batch spacing above", step(8, 1024, 1024), 1},
		{"two context spacings above", step(2, 8192, 8192), 2},
		{"longest twice the mean: priced by the split-KV term, not widened", step(2, 1024, 2048), 0},
		{"below the smallest batch", step(0.5, 1024, 1024), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.InDelta(t, c.dist, e.Distance(c.f), 1e-9)
			lo, hi := e.Widen(c.f, 10, 9, 12)
			assert.InDelta(t, 10-(1+c.dist), lo, 1e-9)
			assert.InDelta(t, 10+2*(1+c.dist), hi, 1e-9)
		})
	}
	assert.Zero(t, (*Extent)(nil).Distance(step(64, 1e5, 1e5)), "no extent: no widening")
	assert.Nil(t, NewExtent(nil, []Features{step(1, 512, 512)}))
}
