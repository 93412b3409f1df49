package catalog

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHFConfigFamilies checks what each family's config implies beyond
// the common fields.
func TestHFConfigFamilies(t *testing.T) {
	t.Run("DeepSeek-V3: MLA latent KV, dense first layers, shared expert, fp8 weights", func(t *testing.T) {
		s := mustShape("DeepSeek-V3")
		assert.Equal(t, MLA{QLoraRank: 1536, KVLoraRank: 512, QKNopeHeadDim: 128, QKRopeHeadDim: 64, VHeadDim: 128}, s.MLA)
		assert.Equal(t, MoE{Experts: 256, TopK: 8, ExpertIntermediate: 2048, SharedExperts: 1, SharedIntermediate: 2048, DenseLayers: 3}, s.MoE)
		// One latent of 512 and a rotary key of 64 per layer, bf16: not
		// 2·128 heads·128 as GQA would be.
		assert.Equal(t, int64(61*(512+64)*2), s.KVBytesPerToken())
		// The latent is replicated on every TP rank.
		assert.Equal(t, s.KVBytesPerToken(), s.WithTP(8).KVBytesPerToken())
		assert.Equal(t, DTypeFP8, s.WeightDType)
		assert.Equal(t, DTypeBF16, s.DType)
	})
	t.Run("gpt-oss: alternating sliding window, mxfp4 experts", func(t *testing.T) {
		s := mustShape("gpt-oss-20b")
		assert.Equal(t, 12, s.SlidingLayers)
		assert.Equal(t, 128, s.SlidingWindow)
		assert.Equal(t, MoE{Experts: 32, TopK: 4, ExpertIntermediate: 2880, DType: DTypeMXFP4}, s.MoE)
		// Only the 12 full-attention layers grow with the context.
		assert.Equal(t, int64(12*2*8*64*2), s.KVBytesPerToken())
		assert.Equal(t, int64(12*128*2*8*64*2), s.SlidingKVBytesPerRequest())
		// mxfp4 experts: the checkpoint is ~13 GB, not the 42 GB of bf16.
		assert.InDelta(t, 13.8e9, float64(s.WeightBytes()), 0.5e9)
		assert.Contains(t, strings.Join(s.Notes, "\n"), "torch_dtype absent: bf16 assumed")
	})
	t.Run("Gemma 2: explicit head_dim, tied embeddings by default, every other layer slides", func(t *testing.T) {
		s := mustShape("gemma-2-9b-it")
		assert.Equal(t, 256, s.HeadDim, "not hidden/heads = 224")
		assert.True(t, s.TiedEmbeddings)
		assert.Equal(t, 21, s.SlidingLayers)
		assert.Contains(t, strings.Join(s.Notes, "\n"), "tie_word_embeddings absent: true")
	})
	t.Run("Qwen2: q/k/v biases; Qwen3-MoE: explicit head_dim, all layers sparse", func(t *testing.T) {
		assert.True(t, qwen7B.QKVBias)
		assert.Zero(t, qwen7B.SlidingLayers, "use_sliding_window false")
		s := mustShape("Qwen3-30B-A3B")
		assert.Equal(t, 128, s.HeadDim)
		assert.Equal(t, MoE{Experts: 128, TopK: 8, ExpertIntermediate: 768}, s.MoE)
		assert.False(t, s.QKVBias)
	})
	t.Run("Phi-3: every layer slides: sized as full attention", func(t *testing.T) {
		s := mustShape("Phi-3-mini-4k-instruct")
		assert.Equal(t, s.Layers, s.SlidingLayers)
		assert.Equal(t, int64(32*2*32*96*2), s.KVBytesPerToken())
		assert.Zero(t, s.SlidingKVBytesPerRequest())
	})
	t.Run("Gemma 3: the decoder under text_config, 5 of 6 layers slide", func(t *testing.T) {
		s, err := ParseHFConfig("gemma-3-12b", []byte(`{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
			"torch_dtype": "bfloat16", "text_config": {"model_type": "gemma3_text", "hidden_size": 3840, "intermediate_size": 15360,
			"num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "num_hidden_layers": 48, "vocab_size": 262208,
			"sliding_window": 1024, "sliding_window_pattern": 6}, "vision_config": {"hidden_size": 1152}}`))
		require.NoError(t, err)
		assert.Equal(t, 48, s.Layers)
		assert.Equal(t, 40, s.SlidingLayers)
		assert.Equal(t, 1024, s.SlidingWindow)
		assert.True(t, s.TiedEmbeddings)
		assert.Equal(t, DTypeBF16, s.DType, "the wrapper's torch_dtype")
		// The language model of Gemma 3 12B: ~11.8B of its 12.2B (the rest
		// is the vision tower, not modelled).
		assert.InDelta(t, 11.8e9, float64(s.ParamCount()), 0.2e9)
	})
	t.Run("Gemma 3 12B as published: head_dim and vocab_size are Gemma3TextConfig's defaults", func(t *testing.T) {
		s, err := ParseHFConfig("gemma-3-12b-it", []byte(`{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
			"torch_dtype": "bfloat16", "text_config": {"model_type": "gemma3_text", "hidden_size": 3840, "intermediate_size": 15360,
			"num_attention_heads": 16, "num_hidden_layers": 48, "num_key_value_heads": 8, "sliding_window": 1024,
			"rope_scaling": {"factor": 8.0, "rope_type": "linear"}}, "vision_config": {"hidden_size": 1152}}`))
		require.NoError(t, err)
		assert.Equal(t, 256, s.HeadDim, "not hidden/heads = 240")
		assert.Equal(t, 262208, s.Vocab)
		notes := strings.Join(s.Notes, "\n")
		assert.Contains(t, notes, "head_dim absent: 256 (the Gemma3ForConditionalGeneration default)")
		assert.Contains(t, notes, "vocab_size absent: 262208")
	})
	t.Run("Python JSON: Infinity and NaN outside strings read as null", func(t *testing.T) {
		s, err := ParseHFConfig("m", []byte(`{"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
			"num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9, "time_step_limit": [0.0, Infinity], "x": -Infinity,
			"y": NaN, "name": "NaN and Infinity stay in strings \" Infinity"}`))
		require.NoError(t, err)
		assert.Equal(t, 1, s.Layers)
	})
	t.Run("Nemotron-H: Mamba-2, attention and MLP blocks; a constant state per request", func(t *testing.T) {
		s, err := LoadModelConfig("testdata/aiconfigurator/nvidia--Nemotron-H-56B-Base-8K_config.json")
		require.NoError(t, err)
		mamba := s.stackCount(func(l Layer) bool { return l.Attention == AttnMamba2 })
		attn := s.stackCount(func(l Layer) bool { return l.Attention == AttnFull })
		assert.Equal(t, []int{54, 10, 118}, []int{mamba, attn, s.Layers})
		assert.Equal(t, int64(10*2*8*128*2), s.KVBytesPerToken(), "only the attention blocks grow with the context")
		// Mamba-2 state: 256 heads × 64 × 256 in bf16 (no mamba_ssm_cache_dtype), plus the conv state.
		assert.Greater(t, s.StateBytesPerRequest(), int64(54*256*64*256*2))
		assert.Less(t, s.StateBytesPerRequest(), int64(54*256*64*256*2*11/10))
		assert.Zero(t, s.SlidingKVBytesPerRequest())
		// The KV capacity sets aside 256 requests' states.
		b200, _ := LookupHardware("B200")
		tp4 := s.WithTP(4)
		blocks, err := KVBlocks(b200, tp4, 16, 0.9, 0)
		require.NoError(t, err)
		free := 0.9*b200.MemBytes() - float64(tp4.WeightBytes()+ActivationReserveBytes(tp4)) - 256*float64(tp4.StateBytesPerRequest())
		assert.Equal(t, int(free/float64(16*tp4.KVBytesPerToken())), blocks)
	})
	t.Run("MiniMax-M2.7 NVFP4: nvfp4 experts, bf16 attention, fp8 KV cache", func(t *testing.T) {
		s, err := LoadModelConfig("testdata/aiconfigurator/nvidia--MiniMax-M2.7-NVFP4_config.json")
		require.NoError(t, err)
		assert.Equal(t, []string{DTypeBF16, DTypeNVFP4, DTypeNVFP4, DTypeFP8}, []string{s.MixerDType(), s.LinearDType(), s.ExpertDType(), s.KVCacheDType()})
		assert.Equal(t, MoE{Experts: 256, TopK: 8, ExpertIntermediate: 1536}, s.MoE, "experts at the weight dtype")
		b200, _ := LookupHardware("B200")
		h100, _ := LookupHardware("H100")
		assert.Equal(t, DTypeNVFP4, s.GEMMDTypeOf(b200, DTypeNVFP4))
		assert.Equal(t, DTypeBF16, s.GEMMDTypeOf(h100, DTypeNVFP4), "no fp4 tensor cores: weight-only")
		assert.True(t, s.QKNormAcrossHeads, "use_qk_norm with qk_norm_type per_layer: one norm over every head")
		assert.False(t, llama8B.QKNormAcrossHeads)
	})
	t.Run("Llama: derived head_dim is a note", func(t *testing.T) {
		assert.Equal(t, []string{"head_dim absent: 128 (= hidden_size/num_attention_heads)"}, llama8B.Notes)
		assert.Equal(t, "LlamaForCausalLM", llama8B.Architecture)
	})
}

// TestHFConfigDenseLayers: which layers of an MoE are dense.
func TestHFConfigDenseLayers(t *testing.T) {
	const common = `"hidden_size": 64, "num_hidden_layers": 10, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9,
		"num_experts_per_tok": 2, "moe_intermediate_size": 4`
	tests := []struct {
		name, cfg string
		dense     int
	}{
		// Sparse where i+1 is even (1, 3, 5, 7, 9), less the listed 1 and 3
		// (4 is dense anyway, 3 is listed twice): 3 sparse, 7 dense.
		{"Qwen sparse step and mlp_only_layers", `{"architectures": ["Qwen3MoeForCausalLM"], ` + common +
			`, "num_experts": 4, "decoder_sparse_step": 2, "mlp_only_layers": [1, 3, 3, 4]}`, 7},
		// Sparse from layer 3 on where i is even: 4, 6, 8.
		{"DeepSeek first_k_dense_replace and moe_layer_freq", `{"architectures": ["DeepseekV3ForCausalLM"], ` + common +
			`, "n_routed_experts": 4, "first_k_dense_replace": 3, "moe_layer_freq": 2,
			"kv_lora_rank": 8, "qk_nope_head_dim": 4, "qk_rope_head_dim": 4, "v_head_dim": 4}`, 7},
		{"DeepSeek every layer past the first", `{"architectures": ["DeepseekV3ForCausalLM"], ` + common +
			`, "n_routed_experts": 4, "first_k_dense_replace": 1,
			"kv_lora_rank": 8, "qk_nope_head_dim": 4, "qk_rope_head_dim": 4, "v_head_dim": 4}`, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseHFConfig("m", []byte(tc.cfg))
			require.NoError(t, err)
			assert.Equal(t, tc.dense, s.MoE.DenseLayers)
		})
	}
}

func TestHFConfigDerivedAndDefaulted(t *testing.T) {
	s, err := ParseHFConfig("bare", []byte(`{"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4,
		"num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 1000, "torch_dtype": "float32"}`))
	require.NoError(t, err)
	assert.Equal(t, "LlamaForCausalLM", s.Architecture, "model_type dispatches without architectures")
	assert.Equal(t, 8, s.KVHeads)
	assert.Equal(t, 64, s.HeadDim)
	assert.Equal(t, DTypeBF16, s.DType)
	notes := strings.Join(s.Notes, "\n")
	for _, n := range []string{"num_key_value_heads absent: 8", "head_dim absent: 64", "tie_word_embeddings absent: false", "torch_dtype float32: served in bf16"} {
		assert.Contains(t, notes, n)
	}
}

func TestHFConfigQuantization(t *testing.T) {
	base := `{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
		"num_key_value_heads": 4, "head_dim": 64, "intermediate_size": 1024, "vocab_size": 1000, "tie_word_embeddings": false,
		"torch_dtype": "bfloat16", "quantization_config": %s}`
	tests := []struct {
		quant, weights, note string
	}{
		{`{"quant_method": "fp8", "fmt": "e4m3"}`, DTypeFP8, "quantization_config: weights fp8"},
		{`{"quant_method": "mxfp4"}`, DTypeMXFP4, "weights mxfp4 (attention mxfp4"},
		{`{"quant_method": "awq", "bits": 4}`, DTypeINT4, "weights int4"},
		{`{"quant_method": "gptq", "bits": 4, "modules_to_not_convert": ["self_attn"]}`, DTypeINT4, "attention bf16, mlp int4"},
		{`{"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 4, "type": "float"}, "input_activations": {"num_bits": 4, "type": "float"}}}}`,
			DTypeNVFP4, "weights nvfp4"},
		{`{"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_scheme": {"num_bits": 8, "type": "float"}}`, DTypeFP8, "kv cache fp8"},
	}
	for _, tc := range tests {
		s, err := ParseHFConfig("q", []byte(strings.Replace(base, "%s", tc.quant, 1)))
		require.NoError(t, err, tc.quant)
		assert.Equal(t, tc.weights, s.WeightDType, tc.quant)
		assert.Contains(t, strings.Join(s.Notes, "\n"), tc.note)
	}
}

func TestHFConfigErrors(t *testing.T) {
	tests := []struct {
		name, cfg string
		want      []string
	}{
		{"unsupported architecture", `{"architectures": ["MambaForCausalLM"], "hidden_size": 1}`,
			[]string{`unsupported architecture "MambaForCausalLM"`, "DeepseekV3ForCausalLM", "GptOssForCausalLM", "LlamaForCausalLM"}},
		{"unsupported model_type", `{"model_type": "rwkv"}`, []string{`model_type "rwkv"`}},
		{"missing layers", `{"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9}`,
			[]string{"num_hidden_layers: missing"}},
		{"heads do not divide hidden", `{"architectures": ["LlamaForCausalLM"], "hidden_size": 100, "num_hidden_layers": 1, "num_attention_heads": 3, "intermediate_size": 8, "vocab_size": 9}`,
			[]string{"head_dim absent", "not a multiple"}},
		{"MoE without experts", `{"architectures": ["MixtralForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9}`,
			[]string{"MixtralForCausalLM: expert count"}},
		{"MLA without ranks", `{"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9}`,
			[]string{"kv_lora_rank"}},
		{"layer_types length", `{"architectures": ["GptOssForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9,
			"sliding_window": 8, "layer_types": ["sliding_attention"], "num_local_experts": 4, "num_experts_per_tok": 2}`, []string{"layer_types has 1 entries for 2 layers"}},
		{"bad dtype", `{"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9, "torch_dtype": "int3"}`,
			[]string{`unknown dtype "int3"`}},
		{"not json", `{"architectures": [`, []string{"not a config.json"}},
		{"unknown quantization", `{"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9,
			"quantization_config": {"quant_method": "bitnet"}}`, []string{`quant_method "bitnet": unknown quantization, not priced`}},
		{"unknown modelopt algo", `{"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9,
			"quantization_config": {"quant_method": "modelopt", "quant_algo": "INT2"}}`, []string{`quant_algo "INT2": unknown quantization`}},
		{"moe_layer_freq list length", `{"architectures": ["MiniMaxM3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9,
			"num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 4, "moe_layer_freq": [0, 1, 1]}`, []string{"moe_layer_freq has 3 entries for 2 layers"}},
		{"bad hybrid pattern", `{"architectures": ["NemotronHForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9,
			"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 4, "hybrid_override_pattern": "MX"}`, []string{`hybrid_override_pattern[1]: 'X'`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHFConfig("m", []byte(tc.cfg))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "config.json of m: ")
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestShapeWithDTypes(t *testing.T) {
	s, err := llama8B.WithDTypes("fp8", "fp8")
	require.NoError(t, err)
	assert.Equal(t, DTypeFP8, s.WeightDType)
	assert.Equal(t, DTypeFP8, s.KVDType)
	assert.Equal(t, llama8B.KVBytesPerToken()/2, s.KVBytesPerToken())
	// Linear weights halve; embeddings and norms stay bf16.
	emb := float64(2 * llama8B.Vocab * llama8B.Hidden)
	assert.InDelta(t, (float64(llama8B.WeightBytes())-emb*2)/2+emb*2, float64(s.WeightBytes()), 1e6)
	assert.Len(t, llama8B.Notes, 1, "the receiver's notes are not touched")
	assert.Len(t, s.Notes, 3)

	fp16, err := llama8B.WithDTypes("float16", "auto")
	require.NoError(t, err)
	assert.Equal(t, DTypeFP16, fp16.DType)
	assert.Empty(t, fp16.KVDType)
	same, err := llama8B.WithDTypes("", "")
	require.NoError(t, err)
	assert.Equal(t, llama8B, same)
	// fp8 weights override an mxfp4 checkpoint's experts.
	oss, err := mustShape("gpt-oss-20b").WithDTypes("fp8", "")
	require.NoError(t, err)
	assert.Empty(t, oss.MoE.DType)
	// nvfp4 everywhere (a scenario's weight_dtype: nvfp4): 4.5 bits per
	// linear weight; on an H100 priced weight-only, which is noted.
	mm, err := LoadModelConfig("testdata/aiconfigurator/MiniMaxAI--MiniMax-M2.7_config.json")
	require.NoError(t, err)
	nv, err := mm.WithDTypes("nvfp4", "fp8")
	require.NoError(t, err)
	assert.Equal(t, []string{DTypeNVFP4, DTypeNVFP4, DTypeNVFP4}, []string{nv.MixerDType(), nv.LinearDType(), nv.ExpertDType()})
	assert.InEpsilon(t, 0.5625/1.0, float64(nv.WeightBytes()-int64(2*2*nv.Vocab*nv.Hidden))/float64(mm.WeightBytes()-int64(2*2*mm.Vocab*mm.Hidden)), 0.01,
		"fp8 (with its block scales priced as 1 byte) to nvfp4")
	h100, _ := LookupHardware("H100")
	b200, _ := LookupHardware("B200")
	assert.Empty(t, PrecisionNotes(b200, nv))
	assert.Contains(t, strings.Join(PrecisionNotes(h100, nv), "\n"), "experts weights nvfp4: H100-SXM has no nvfp4 tensor cores; priced weight-only, GEMMs at bf16")
	for _, bad := range [][2]string{{"int3", ""}, {"", "mxfp4"}, {"", "nvfp4"}} {
		_, err := llama8B.WithDTypes(bad[0], bad[1])
		assert.Error(t, err, "%v", bad)
	}
}

// FuzzParseHFConfig: any input is a shape that validates or an error,
// never a panic. The seed corpus is the built-in configs.
func FuzzParseHFConfig(f *testing.F) {
	addSeedFiles(f, "data/models/*/config.json")
	configs, err := filepath.Glob("testdata/aiconfigurator/*_config.json")
	require.NoError(f, err)
	for _, p := range configs {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{"model_type": "qwen3_moe", "num_experts": 0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseHFConfig("fuzz", b)
		if err != nil {
			return
		}
		require.NoError(t, s.Validate())
		assert.Positive(t, s.ParamCount())
		assert.Positive(t, s.KVBytesPerToken())
	})
}

// FuzzParseHardwareSpec: any input is a valid Hardware or an error, never
// a panic. The seed corpus is the built-in spec files.
func FuzzParseHardwareSpec(f *testing.F) {
	addSeedFiles(f, "data/hardware/*.yaml")
	f.Add([]byte(userSpec))
	f.Fuzz(func(t *testing.T, b []byte) {
		hw, err := ParseHardwareSpec("fuzz.yaml", b)
		if err != nil {
			return
		}
		require.NoError(t, hw.Validate())
		assert.Positive(t, hw.MemBytes())
	})
}

// FuzzParseHFCheckpoint: a config with any hf_quant_config.json is a
// shape that validates or an error, never a panic.
func FuzzParseHFCheckpoint(f *testing.F) {
	quants, err := filepath.Glob("testdata/aiconfigurator/*_hf_quant_config.json")
	require.NoError(f, err)
	for _, q := range quants {
		cb, err := os.ReadFile(strings.Replace(q, "_hf_quant_config.json", "_config.json", 1))
		require.NoError(f, err)
		qb, err := os.ReadFile(q)
		require.NoError(f, err)
		f.Add(cb, qb)
	}
	f.Fuzz(func(t *testing.T, config, quant []byte) {
		s, err := ParseHFCheckpoint("fuzz", config, quant)
		if err != nil {
			return
		}
		require.NoError(t, s.Validate())
		assert.Positive(t, s.WeightBytes())
	})
}

// addSeedFiles adds the built-in catalogue files matching pattern to a
// fuzz target's seed corpus.
func addSeedFiles(f *testing.F, pattern string) {
	files, err := fs.Glob(builtinFS, pattern)
	require.NoError(f, err)
	require.NotEmpty(f, files)
	for _, p := range files {
		b, err := fs.ReadFile(builtinFS, p)
		require.NoError(f, err)
		f.Add(b)
	}
}
