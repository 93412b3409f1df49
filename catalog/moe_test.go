package catalog

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExpectedExperts: k experts at T = 1, monotone in T, approaching E.
func TestExpectedExperts(t *testing.T) {
	tests := []struct{ e, k int }{{128, 8}, {256, 8}, {8, 2}, {32, 4}, {16, 16}}
	for _, tc := range tests {
		assert.InDelta(t, float64(tc.k), ExpectedExperts(tc.e, tc.k, 1), 1e-9, "E=%d k=%d", tc.e, tc.k)
		prev := 0.0
		for _, tok := range []float64{1, 2, 4, 16, 64, 256, 1024, 8192} {
			n := ExpectedExperts(tc.e, tc.k, tok)
			assert.GreaterOrEqual(t, n, prev, "monotone in tokens")
			assert.LessOrEqual(t, n, float64(tc.e))
			prev = n
		}
		assert.InDelta(t, float64(tc.e), ExpectedExperts(tc.e, tc.k, 8192), 1e-6, "a large step reads every expert")
	}
	// 128 experts, top-8: 16 tokens read ~82 (not 128, not 8).
	assert.InDelta(t, 128*(1-math.Pow(1-8.0/128, 16)), ExpectedExperts(128, 8, 16), 1e-9)
	assert.InDelta(t, 82.4, ExpectedExperts(128, 8, 16), 0.1)
	assert.Zero(t, ExpectedExperts(128, 8, 0))
	assert.Zero(t, ExpectedExperts(0, 8, 10))
}

// The dense part of a mixture of experts keeps the model's MLP parameters
// but the routed experts' (and the router's): Qwen3's MoE layers have no
// MLP besides the experts; DeepSeek-V3's shared expert and three dense
// layers average into one width.
func TestDenseShape(t *testing.T) {
	for _, name := range []string{"Qwen3-30B-A3B", "DeepSeek-V3", "Mixtral-8x7B-v0.1", "gpt-oss-20b"} {
		s, err := LookupModel(name)
		require.NoError(t, err)
		d := DenseShape(s)
		require.NoError(t, d.Validate(), name)
		assert.Zero(t, d.MoE, name)
		m := s.MoE
		h := float64(s.Hidden)
		routed := float64(s.MoELayers()) * (float64(m.Experts)*3*h*float64(m.ExpertIntermediate) + h*float64(m.Experts))
		// Rounding the width moves at most half a unit of it per layer.
		assert.InDelta(t, float64(s.ParamCount())-routed, float64(d.ParamCount()), 3*h*float64(s.Layers)/2+1, name)
		assert.Contains(t, d.Notes[len(d.Notes)-1], "priced without its", name)
	}
	// Layer stacks (hybrid attention, interleaved dense and MoE layers): the
	// same identity, each MoE layer keeping its shared experts exactly.
	for _, f := range []string{"Qwen--Qwen3.5-35B-A3B", "meta-llama--Llama-4-Maverick-17B-128E-Instruct", "deepseek-ai--DeepSeek-V3.2"} {
		s, err := LoadModelConfig(filepath.Join("testdata", "aiconfigurator", f+"_config.json"))
		require.NoError(t, err, f)
		require.NotEmpty(t, s.Stack, f)
		d := DenseShape(s)
		require.NoError(t, d.Validate(), f)
		assert.Zero(t, d.MoE, f)
		assert.Equal(t, s.Layers, d.Layers, f)
		m, h := s.MoE, float64(s.Hidden)
		routed := float64(s.MoELayers()) * (float64(m.Experts)*3*h*float64(m.ExpertIntermediate) + h*float64(m.Experts))
		assert.InDelta(t, float64(s.ParamCount())-routed, float64(d.ParamCount()), 1, f)
		assert.Less(t, d.WeightBytes(), s.WeightBytes(), f)
	}
	q, err := LookupModel("Qwen3-30B-A3B")
	require.NoError(t, err)
	assert.Zero(t, DenseShape(q).Intermediate, "no shared experts, no dense layers: no MLP left")
	llama, err := LookupModel("Llama-3.1-8B")
	require.NoError(t, err)
	assert.Equal(t, llama, DenseShape(llama), "a dense shape as it is")
}
