package catalog

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKVBlocksFits(t *testing.T) {
	tests := []struct {
		hw             Hardware
		s              Shape
		minTok, maxTok int // plausible KV-cache capacity in tokens at util 0.9, block 16
	}{
		// vLLM logs ~450K tokens for Llama-3.1-8B on an H100 at 0.9.
		{h100, llama8B, 400_000, 500_000},
		{h200, llama8B, 800_000, 1_000_000},
		// 70B at TP=2 on H100 just fits, with little room for KV.
		{h100, llama70B.WithTP(2), 10_000, 60_000},
		{h200, llama70B.WithTP(8), 2_500_000, 3_200_000},
		// Qwen2.5-7B has 4 KV heads: about twice the tokens of Llama-3.1-8B.
		{h100, qwen7B, 900_000, 1_200_000},
	}
	for _, tc := range tests {
		t.Run(tc.hw.Name+"/"+tc.s.Name, func(t *testing.T) {
			n, err := KVBlocks(tc.hw, tc.s, 16, 0.9, 0)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, n*16, tc.minTok)
			assert.LessOrEqual(t, n*16, tc.maxTok)
			// The blocks and the reserve never exceed the budget.
			used := float64(n)*16*float64(tc.s.KVBytesPerToken()) + float64(tc.s.WeightBytes()+ActivationReserveBytes(tc.s))
			assert.LessOrEqual(t, used, 0.9*tc.hw.MemBytes())
		})
	}
}

func TestKVBlocksMonotone(t *testing.T) {
	prev := 0
	for _, u := range []float64{0.5, 0.7, 0.9, 0.95} {
		n, err := KVBlocks(h200, llama8B, 16, u, 0)
		require.NoError(t, err)
		assert.Greater(t, n, prev, "more memory utilization, more blocks")
		prev = n
	}
	n16, _ := KVBlocks(h200, llama8B, 16, 0.9, 0)
	n32, _ := KVBlocks(h200, llama8B, 32, 0.9, 0)
	assert.InDelta(t, n16/2, n32, 1, "blocks twice as large: half as many")
	n4, _ := KVBlocks(h200, llama70B.WithTP(4), 16, 0.9, 0)
	n8, _ := KVBlocks(h200, llama70B.WithTP(8), 16, 0.9, 0)
	assert.Greater(t, n8, n4, "more tensor parallelism, more KV room per GPU")
}

func TestKVBlocksRefusals(t *testing.T) {
	tests := []struct {
		name  string
		hw    Hardware
		s     Shape
		block int
		util  float64
		want  []string
		// noFit: a refusal for memory (ErrDoesNotFit), not of an argument.
		noFit bool
	}{
		{"70B on one H100", h100, llama70B, 16, 0.9,
			[]string{"Llama-3.1-70B does not fit on H100-SXM: it needs 141 GB of weights per GPU at TP=1, and the GPU has 86 GB (80 GiB)", "raise tensor parallel to 2 or more (tensor_parallel=2)"}, true},
		{"70B on one H200", h200, llama70B, 16, 0.9,
			[]string{"needs 141 GB of weights per GPU at TP=1", "does not fit on H200-SXM", "raise tensor parallel to 2 or more"}, true},
		{"70B TP2 on H100 at low util", h100, llama70B.WithTP(2), 16, 0.5,
			[]string{"at TP=2", "raise tensor parallel to 4 or more (tensor_parallel=4)"}, true},
		{"no room for KV", h100, llama8B, 16, 0.2,
			[]string{"leaves no memory for the KV cache", "set engine.gpu_memory_utilization=0.22 or tensor_parallel=2"}, true},
		{"zero block", h100, llama8B, 0, 0.9, []string{"block size must be > 0"}, false},
		{"util above 1", h100, llama8B, 16, 1.5, []string{"gpu_memory_utilization must be in (0, 1]"}, false},
		{"util zero", h100, llama8B, 16, 0, []string{"gpu_memory_utilization"}, false},
		{"bad shape", h100, Shape{Name: "x"}, 16, 0.9, []string{"layers must be > 0"}, false},
		{"bad hardware", Hardware{Name: "x"}, llama8B, 16, 0.9, []string{"memory_gb: missing"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := KVBlocks(tc.hw, tc.s, tc.block, tc.util, 0)
			require.Error(t, err)
			assert.Zero(t, n)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Equal(t, tc.noFit, errors.Is(err, ErrDoesNotFit))
		})
	}
}

// The values a refusal suggests are ones that work.
func TestKVBlocksSuggestionsFit(t *testing.T) {
	tests := []struct {
		name string
		s    Shape
		util float64
	}{
		{"70B at the suggested tensor_parallel=2", llama70B.WithTP(2), 0.9},
		{"8B at the suggested gpu_memory_utilization=0.22", llama8B, 0.22},
		{"8B at the suggested tensor_parallel=2", llama8B.WithTP(2), 0.2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := KVBlocks(h100, tc.s, 16, tc.util, 0)
			require.NoError(t, err)
			assert.Positive(t, n)
		})
	}
}

func TestActivationReserve(t *testing.T) {
	// About 2 GB for an 8B model: 1 GiB non-torch, ~0.74 GB of activations
	// at 8192 tokens, ~0.13 GB of logits.
	assert.InDelta(t, 1.94e9, float64(ActivationReserveBytes(llama8B)), 0.05e9)
	assert.Less(t, ActivationReserveBytes(llama70B.WithTP(8)), ActivationReserveBytes(llama70B))
	assert.Greater(t, ActivationReserveBytes(tiny), int64(1<<30))
}
