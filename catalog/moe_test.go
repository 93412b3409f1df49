package catalog

import (
	"math"
	"math/rand/v2"
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
