package catalog

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
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

// TestRoutingUniform: without a skew every expert is picked with
// probability k/E and Reached is ExpectedExperts.
func TestRoutingUniform(t *testing.T) {
	r := Routing{Experts: 128, TopK: 8}
	require.NoError(t, r.Validate())
	p := r.PickProbs()
	require.Len(t, p, 128)
	for _, v := range p {
		assert.Equal(t, 8.0/128, v)
	}
	for _, tok := range []float64{1, 3, 16, 300} {
		assert.Equal(t, ExpectedExperts(128, 8, tok), r.Reached(p, tok))
	}
	assert.Zero(t, r.Reached(p, 0))
}

// TestRoutingSkewSampled: the mean-field top-k of tilted normal logits
// against top-k sampled from them (seeded), at the GPU worker's logit
// spread (0.02·√hidden, unit-RMS inputs): picks sum to k, the skew favours
// the first experts, and the experts a step reaches are within 4% of the
// sampled count and below the uniform one.
func TestRoutingSkewSampled(t *testing.T) {
	tests := []struct {
		name string
		r    Routing
	}{
		{"Qwen3-30B-A3B scale, skew 0.3", Routing{Experts: 128, TopK: 8, Skew: 0.3, LogitStd: 0.02 * math.Sqrt(2048)}},
		{"profile shape, skew 0.3", Routing{Experts: 16, TopK: 4, Skew: 0.3, LogitStd: 0.02 * math.Sqrt(256)}},
		{"strong skew", Routing{Experts: 64, TopK: 4, Skew: 1, LogitStd: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.r.Validate())
			p := tc.r.PickProbs()
			sum := 0.0
			for _, v := range p {
				sum += v
			}
			assert.InDelta(t, float64(tc.r.TopK), sum, 1e-6)
			assert.Greater(t, p[0], p[len(p)-1], "the tilt favours the first experts")
			sampled := sampledPicks(tc.r, 20000)
			for _, tok := range []float64{2, 8, 32, 128} {
				got, want := tc.r.Reached(p, tok), tc.r.Reached(sampled, tok)
				t.Logf("%g tokens: mean-field %.2f, sampled %.2f, uniform %.2f", tok, got, want, ExpectedExperts(tc.r.Experts, tc.r.TopK, tok))
				assert.InEpsilon(t, want, got, 0.04, "%g tokens: mean-field %.2f, sampled %.2f", tok, got, want)
				assert.Less(t, got, ExpectedExperts(tc.r.Experts, tc.r.TopK, tok), "a skewed router reaches fewer experts")
			}
		})
	}
}

// sampledPicks estimates PickProbs by drawing n tokens' logits and
// counting each expert's top-k picks.
func sampledPicks(r Routing, n int) []float64 {
	rng := rand.New(rand.NewPCG(1, 2))
	counts := make([]float64, r.Experts)
	logits := make([]float64, r.Experts)
	order := make([]int, r.Experts)
	for range n {
		for e := range logits {
			logits[e] = -r.Skew*math.Log1p(float64(e)) + r.LogitStd*rng.NormFloat64()
			order[e] = e
		}
		sort.Slice(order, func(i, j int) bool { return logits[order[i]] > logits[order[j]] })
		for _, e := range order[:r.TopK] {
			counts[e]++
		}
	}
	for e := range counts {
		counts[e] /= float64(n)
	}
	return counts
}

// TestRoutingValidate: what cannot be priced is refused, naming it.
func TestRoutingValidate(t *testing.T) {
	tests := []struct {
		r    Routing
		want string
	}{
		{Routing{Experts: 0, TopK: 8}, "top_k"},
		{Routing{Experts: 8, TopK: 9}, "top_k"},
		{Routing{Experts: 8, TopK: 2, Skew: -1}, "skew"},
		{Routing{Experts: 8, TopK: 2, Skew: math.NaN()}, "skew"},
		{Routing{Experts: 8, TopK: 2, Skew: 0.5}, "logit_std"},
	}
	for _, tc := range tests {
		assert.ErrorContains(t, tc.r.Validate(), tc.want, "%+v", tc.r)
	}
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
