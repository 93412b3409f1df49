package model

import (
	"testing"

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
	hw, err := LookupHardware("H200")
	require.NoError(t, err)
	sh, err := LookupModel("Llama-3.1-8B")
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
