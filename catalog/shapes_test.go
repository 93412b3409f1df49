package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShapeSizes(t *testing.T) {
	tests := []struct {
		s          Shape
		params     float64 // published parameter count
		weightsGB  float64 // per GPU, bf16
		kvPerToken int64   // per GPU
	}{
		{llama8B, 8.03e9, 16.06, 2 * 32 * 8 * 128 * 2},
		{llama70B, 70.55e9, 141.1, 2 * 80 * 8 * 128 * 2},
		{llama70B.WithTP(4), 70.55e9, 141.1 / 4, 2 * 80 * 2 * 128 * 2},
		{llama70B.WithTP(8), 70.55e9, 141.1 / 8, 2 * 80 * 1 * 128 * 2},
		{qwen7B, 7.62e9, 15.23, 2 * 28 * 4 * 128 * 2},
		{tiny, 2*(4*64*16*2+2*64*2*16+3*64*128+2*64) + 256*64 + 64, 0, 2 * 2 * 2 * 16 * 2},
	}
	for _, tc := range tests {
		t.Run(tc.s.Name, func(t *testing.T) {
			require.NoError(t, tc.s.Validate())
			assert.InEpsilon(t, tc.params, float64(tc.s.ParamCount()), 0.005, "parameter count")
			if tc.weightsGB > 0 {
				assert.InEpsilon(t, tc.weightsGB, float64(tc.s.WeightBytes())/1e9, 0.01, "weights per GPU")
			}
			assert.Equal(t, tc.kvPerToken, tc.s.KVBytesPerToken())
			assert.Less(t, tc.s.StreamedWeightBytes(), tc.s.WeightBytes()+1)
		})
	}
	// The tiny shape ties its embeddings: its weights are exactly its
	// parameters in bf16, and the LM head streams the whole table.
	assert.Equal(t, 2*tiny.ParamCount(), tiny.WeightBytes())
	assert.Equal(t, tiny.WeightBytes(), tiny.StreamedWeightBytes())
	// Untied: the embedding table is gathered, not streamed.
	assert.InEpsilon(t, 16.06e9-2*128256*4096, float64(llama8B.StreamedWeightBytes()), 0.01)
}

func TestShapeTPReplicatesKVHeads(t *testing.T) {
	// Llama-3.1-8B has 8 KV heads: at TP=16 each rank keeps one replicated
	// head, so per-GPU KV stops shrinking past TP=8.
	s8 := llama8B.WithTP(8)
	s16 := llama8B.WithTP(16)
	require.NoError(t, s16.Validate())
	assert.Equal(t, 1, s16.KVHeadsPerGPU())
	assert.Equal(t, s8.KVBytesPerToken(), s16.KVBytesPerToken())
	assert.Less(t, s16.WeightBytes(), s8.WeightBytes())
	// An fp8 KV cache halves the KV bytes.
	fp8 := llama8B
	fp8.KVDType = DTypeFP8
	assert.Equal(t, llama8B.KVBytesPerToken()/2, fp8.KVBytesPerToken())
}

func TestShapeLookupTP(t *testing.T) {
	tests := []struct {
		in     string
		name   string
		tp     int
		layers int
	}{
		{"Llama-3.1-8B", "Llama-3.1-8B", 1, 32},
		{"llama-3.1-8b", "Llama-3.1-8B", 1, 32},
		{"Llama-3.1-70B", "Llama-3.1-70B", 1, 80},
		{"Llama-3.1-70B-TP4", "Llama-3.1-70B-TP4", 4, 80},
		{"llama-3.1-70b-tp8", "Llama-3.1-70B-TP8", 8, 80},
		{"Llama-3.1-8B-TP2", "Llama-3.1-8B-TP2", 2, 32},
		{"Qwen2.5-7B", "Qwen2.5-7B", 1, 28},
		{"tiny", "tiny", 1, 2},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			s, err := builtin.LookupModel(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.name, s.Name)
			assert.Equal(t, tc.tp, s.TP)
			assert.Equal(t, tc.layers, s.Layers)
		})
	}
	for _, bad := range []struct{ in, msg string }{
		{"GPT-4", "unknown model"},
		{"Llama-3.1-8B-TPx", "unknown model"},
		{"Llama-3.1-8B-TP3", "not divisible by TP=3"},
		{"Llama-3.1-8B-TP0", "must be >= 1"},
	} {
		t.Run(bad.in, func(t *testing.T) {
			_, err := builtin.LookupModel(bad.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), bad.msg)
		})
	}
}

func TestShapeWithTPRenames(t *testing.T) {
	assert.Equal(t, "Llama-3.1-70B-TP8", llama70B.WithTP(4).WithTP(8).Name)
	assert.Equal(t, "Llama-3.1-70B", llama70B.WithTP(4).WithTP(1).Name)
	assert.Equal(t, llama70B, llama70B.WithTP(8).WithTP(1))
}

func TestShapeValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*Shape)
		msg  string
	}{
		{"zero layers", func(s *Shape) { s.Layers = 0 }, "layers must be > 0"},
		{"zero vocab", func(s *Shape) { s.Vocab = 0 }, "vocab must be > 0"},
		{"negative tp", func(s *Shape) { s.TP = -2 }, "tp must be >= 0"},
		{"heads not divisible", func(s *Shape) { s.TP = 3 }, "not divisible by TP=3"},
		{"gqa mismatch", func(s *Shape) { s.KVHeads = 5 }, "not a multiple"},
		{"negative intermediate", func(s *Shape) { s.Intermediate = -1 }, "intermediate must be >= 0"},
		{"dense layers without a width", func(s *Shape) {
			s.Intermediate, s.MoE = 0, MoE{Experts: 8, TopK: 2, ExpertIntermediate: 64, DenseLayers: 1}
		}, "intermediate is 0 but moe.dense_layers is 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := llama8B
			tc.mut(&s)
			err := s.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

// A shape without MLPs (width 0) is valid: the attention-only part of a
// mixture of experts that a cluster prices beside its experts; it has the
// attention's parameters only.
func TestShapeWithoutMLP(t *testing.T) {
	s := llama8B
	s.Intermediate = 0
	require.NoError(t, s.Validate())
	assert.Equal(t, llama8B.ParamCount()-int64(3*4096*14336*32), s.ParamCount())
}

func TestShapeJSONRoundTrip(t *testing.T) {
	for _, s := range []Shape{llama8B, llama70B.WithTP(8), qwen7B, tiny} {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		var back Shape
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, s, back)
	}
	b, _ := json.Marshal(llama8B)
	assert.Contains(t, string(b), `"kv_heads":8`)
	assert.Contains(t, string(b), `"intermediate":14336`)
}
