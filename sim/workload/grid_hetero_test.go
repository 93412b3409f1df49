package workload

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSpreadContexts(t *testing.T) {
	cases := []struct {
		b, mean int
		s       Spread
		want    []int
	}{
		{5, 100, Spread{SpreadRamp, 1.5}, []int{50, 75, 100, 125, 150}},
		{2, 100, Spread{SpreadRamp, 2}, []int{0, 200}}, // below 1: refused
		{4, 100, Spread{SpreadRamp, 1}, []int{100, 100, 100, 100}},
		{16, 1000, Spread{SpreadTail, 4}, []int{572, 572, 572, 572, 572, 572, 571, 571, 571, 571, 571, 571, 571, 571, 4000, 4000}},
		{9, 100, Spread{SpreadTail, 3}, []int{43, 43, 43, 43, 43, 43, 42, 300, 300}},
		{3, 100, Spread{SpreadTail, 3}, []int{0, 0, 300}}, // the long one takes the whole mean
	}
	for _, c := range cases {
		got, ok := spreadContexts(c.b, c.mean, c.s)
		if slices.Min(c.want) < 1 {
			assert.False(t, ok, "%d × %d %s", c.b, c.mean, c.s)
			continue
		}
		require.True(t, ok, "%d × %d %s", c.b, c.mean, c.s)
		assert.Equal(t, c.want, got, "%d × %d %s", c.b, c.mean, c.s)
		sum := 0
		for _, v := range got {
			sum += v
		}
		assert.InDelta(t, c.mean, float64(sum)/float64(c.b), 0.5, "the mean is kept")
		assert.Equal(t, int(float64(c.mean)*c.s.MaxRatio+0.5), slices.Max(got), "the longest is max_ratio × mean")
	}
}

func heteroGrid(policy string) GridConfig {
	c := baseGrid()
	c.Policy = policy
	c.DecodeBatchSizes, c.DecodeContexts, c.PrefillTokens = []int{8}, []int{128}, []int{256}
	c.Ragged = RaggedPoints{BatchSizes: []int{12, 40}, Contexts: []int{500, 3000},
		Spreads: []Spread{{SpreadRamp, 1.5}, {SpreadTail, 2.5}}}
	c.Mixed = MixedPoints{PrefillTokens: []int{512, 2040}, PrefillContexts: []int{0, 1000},
		DecodeBatchSizes: []int{0, 4, 48}, DecodeContexts: []int{700}}
	return c
}

func TestGridRaggedPoints(t *testing.T) {
	for _, policy := range []string{PolicySteadyStateSecondStep, PolicyAdmissionStep} {
		t.Run(policy, func(t *testing.T) {
			pts, err := BuildGrid(heteroGrid(policy))
			require.NoError(t, err)
			var ragged []Point
			for _, p := range pts {
				if slices.Contains(p.SampleReasons, ReasonRagged) {
					ragged = append(ragged, p)
				}
			}
			// 2 batches × 2 means × 2 spreads, less B=40 at mean 3000:
			// 120,000 tokens exceed the 4000 blocks of 16.
			require.Len(t, ragged, 6)
			for _, p := range ragged {
				assert.Equal(t, PointDecode, p.Type)
				assert.Equal(t, p.BatchSize, len(p.ContextPerReq))
				assert.Greater(t, slices.Max(p.ContextPerReq), slices.Min(p.ContextPerReq), "a spread")
				assert.Equal(t, policy, p.Plan.Policy)
				assert.Zero(t, p.Plan.Deferred)
				want := 0
				if policy == PolicySteadyStateSecondStep {
					want = 1
				}
				assert.Equal(t, want, p.Plan.MeasuredStep)
				if p.BatchSize == 12 {
					assert.Equal(t, 16, p.ExpectedCaptureSize, "B=12 pads to the graph of 16")
					assert.Equal(t, 4, p.PaddingTokens)
				}
			}
		})
	}
}

func TestGridMixedPoints(t *testing.T) {
	cases := []struct {
		policy   string
		measured int
		deferred int
	}{
		{PolicySteadyStateSecondStep, 1, 1},
		{PolicyAdmissionStep, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.policy, func(t *testing.T) {
			pts, err := BuildGrid(heteroGrid(c.policy))
			require.NoError(t, err)
			var mixed, atContext []Point
			for _, p := range pts {
				switch {
				case p.Type == PointMixed:
					mixed = append(mixed, p)
				case p.Type == PointPrefill && p.PrefillContextPerReq != nil:
					atContext = append(atContext, p)
				}
			}
			// chunks {512, 2040} × contexts {0, 1000} × B {4, 48}, less
			// B=48 with the 2040 chunk (2088 tokens > the budget of 2048).
			assert.Len(t, mixed, 6)
			assert.Len(t, atContext, 4, "B=0: each chunk alone at contexts 0 and 1000")
			for _, p := range mixed {
				b := len(p.ContextPerReq)
				require.Equal(t, b+1, p.BatchSize)
				assert.Equal(t, c.measured, p.Plan.MeasuredStep)
				assert.Equal(t, c.deferred, p.Plan.Deferred)
				assert.Contains(t, p.SampleReasons, ReasonMixed)
				assert.LessOrEqual(t, b+p.TotalPrefillTokens, 2048)
				arr := p.Arrivals("m-", 5)
				require.Len(t, arr, b+1)
				chunk := arr[b]
				assert.Equal(t, "m-"+ChunkID, chunk.ID)
				assert.Equal(t, 1, chunk.OutputTokens)
				assert.Equal(t, p.PrefillContextPerReq[0], chunk.PrecomputedTokens)
				assert.Equal(t, p.PrefillContextPerReq[0]+p.PrefillTokensPerReq[0], chunk.PromptTokens)
				for _, a := range arr[:b] {
					assert.Equal(t, c.measured+1, a.OutputTokens)
					assert.Equal(t, 1, a.PromptTokens-a.PrecomputedTokens, "a decode computes one token when admitted")
				}
			}
			for _, p := range atContext {
				assert.Equal(t, PolicySingleStep, p.Plan.Policy)
				assert.Equal(t, 1, p.BatchSize)
				assert.Zero(t, p.Plan.Deferred)
			}
		})
	}
}

func TestGridHeteroValidation(t *testing.T) {
	cases := []struct {
		name string
		edit func(*GridConfig)
		want string
	}{
		{"decode mode", func(c *GridConfig) { c.Mode = ModeDecode }, "ragged and mixed points run in Mode=agg only"},
		{"ragged of one", func(c *GridConfig) { c.Ragged.BatchSizes = []int{1, 8} }, "Ragged.BatchSizes[0]=1"},
		{"ragged over seqs", func(c *GridConfig) { c.Ragged.BatchSizes = []int{65} }, "Ragged.BatchSizes[0]=65"},
		{"no spreads", func(c *GridConfig) { c.Ragged.Spreads = nil }, "Ragged.Spreads is empty"},
		{"no contexts", func(c *GridConfig) { c.Ragged.Contexts = nil }, "Ragged.Contexts is empty"},
		{"wide ramp", func(c *GridConfig) { c.Ragged.Spreads = []Spread{{SpreadRamp, 3}} }, "a ramp's max_ratio must be in [1, 2]"},
		{"flat tail", func(c *GridConfig) { c.Ragged.Spreads = []Spread{{SpreadTail, 1}} }, "a tail's max_ratio must be > 1"},
		{"shape", func(c *GridConfig) { c.Ragged.Spreads = []Spread{{"lognormal", 2}} }, `unknown shape "lognormal"`},
		{"ragged none fits", func(c *GridConfig) { c.Ragged.Contexts = []int{6000} }, "no ragged point fits"},
		{"mixed no decodes axis", func(c *GridConfig) { c.Mixed.DecodeBatchSizes = nil }, "Mixed.DecodeBatchSizes is empty"},
		{"mixed chunk over budget", func(c *GridConfig) { c.Mixed.PrefillTokens = []int{2049} }, "Mixed.PrefillTokens[0]=2049 exceeds"},
		{"mixed batch over seqs", func(c *GridConfig) { c.Mixed.DecodeBatchSizes = []int{64} }, "Mixed.DecodeBatchSizes[0]=64"},
		{"mixed negative context", func(c *GridConfig) { c.Mixed.PrefillContexts = []int{-1} }, "Mixed.PrefillContexts[0]=-1"},
		{"mixed none fits", func(c *GridConfig) { c.Mixed.PrefillContexts = []int{8000} }, "no mixed point fits"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := heteroGrid(PolicySteadyStateSecondStep)
			tc.edit(&c)
			_, err := BuildGrid(c)
			require.ErrorContains(t, err, tc.want)
		})
	}
	// Without the new axes the grid is what it was.
	c := heteroGrid(PolicySteadyStateSecondStep)
	plain := c
	plain.Ragged, plain.Mixed = RaggedPoints{}, MixedPoints{}
	all, err := BuildGrid(c)
	require.NoError(t, err)
	base, err := BuildGrid(plain)
	require.NoError(t, err)
	require.Equal(t, base, all[:len(base)], "the new points come after the grid's own")
}
