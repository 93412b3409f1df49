package catalog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParamCountsAgainstModelCards checks the total and active
// parameters of supported checkpoints against their Hugging Face model
// cards (huggingface.co/<repo>), within 2%. Cards that state the active
// count without the embeddings are marked: the LM head and the embedding
// table are taken off ours for them.
func TestParamCountsAgainstModelCards(t *testing.T) {
	tests := []struct {
		config        string  // under testdata/aiconfigurator
		total, active float64 // billions, as the card states them
		activeNoEmb   bool
	}{
		{"meta-llama--Meta-Llama-3.1-8B", 8.03, 8.03, false},               // card: 8B (8.03B in the safetensors index)
		{"meta-llama--Meta-Llama-3.1-70B", 70.6, 70.6, false},              // card: 70B (70.6B)
		{"meta-llama--Meta-Llama-3.1-405B", 405, 405, false},               // card: 405B
		{"Qwen--Qwen3-32B", 32.8, 32.8, false},                             // card: 32.8B
		{"Qwen--Qwen3-8B", 8.2, 8.2, false},                                // card: 8.2B
		{"Qwen--Qwen3-30B-A3B", 30.5, 3.3, false},                          // card: 30.5B total, 3.3B activated
		{"Qwen--Qwen3-235B-A22B", 235, 22, false},                          // card: 235B total, 22B activated
		{"Qwen--Qwen3-Coder-480B-A35B-Instruct", 480, 35, false},           // card: 480B total, 35B activated
		{"deepseek-ai--DeepSeek-V3", 671, 37, false},                       // card: 671B total, 37B activated (685B with the MTP module)
		{"mistralai--Mixtral-8x7B-v0.1", 46.7, 12.9, false},                // card: 46.7B total, 12.9B active
		{"mistralai--Mixtral-8x22B-v0.1", 141, 39, false},                  // card: 141B total, 39B active
		{"meta-llama--Llama-4-Scout-17B-16E-Instruct", 109, 17, false},     // card: 109B total (with the vision encoder), 17B active
		{"meta-llama--Llama-4-Maverick-17B-128E-Instruct", 400, 17, false}, // card: 400B total, 17B active
		{"MiniMaxAI--MiniMax-M2.7", 230, 10, true},                         // card: 230B total, 10B activated
		{"zai-org--GLM-5", 744, 40, true},                                  // card: 744B total, 40B active
		{"google--gemma-4-26B-A4B", 25.2, 3.8, false},                      // card: 25.2B total, 3.8B active
		{"nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 31.6, 3.6, false},  // card: 31.6B total, 3.6B active with embeddings
		{"nvidia--Nemotron-H-56B-Base-8K", 56, 56, false},                  // card: 56B
		{"nvidia--Llama-3_3-Nemotron-Super-49B-v1", 49, 49, false},         // card: 49B
	}
	for _, tc := range tests {
		t.Run(tc.config, func(t *testing.T) {
			s, err := LoadModelConfig("testdata/aiconfigurator/" + tc.config + "_config.json")
			require.NoError(t, err)
			active := float64(s.ActiveParamCount())
			if tc.activeNoEmb {
				active -= 2 * float64(s.Vocab) * float64(s.Hidden)
			}
			assert.InEpsilon(t, tc.total*1e9, float64(s.ParamCount()), 0.02, "total")
			assert.InEpsilon(t, tc.active*1e9, active, 0.02, "active")
		})
	}
	// Weight bytes of checkpoints against their files' sizes.
	for _, tc := range []struct {
		config string
		gb     float64
	}{
		{"meta-llama--Meta-Llama-3.1-8B", 16.06}, // 4 safetensors shards, bf16
		{"nvidia--MiniMax-M2.7-NVFP4", 131},      // nvfp4 experts (4.5 bits), bf16 attention
	} {
		s, err := LoadModelConfig("testdata/aiconfigurator/" + tc.config + "_config.json")
		require.NoError(t, err)
		assert.InEpsilon(t, tc.gb*1e9, float64(s.WeightBytes()), 0.03, tc.config)
	}
}
