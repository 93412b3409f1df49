package catalog

import "sort"

// ArchitectureSupport is what steplab prices of one config.json
// architecture: the layer kinds it reads and what it approximates
// (docs/catalog.md#architectures).
type ArchitectureSupport struct {
	Architecture string `json:"architecture"`
	// Layers are the token-mixer and MLP kinds the architecture's configs
	// give (Layer.Attention, Layer.MLP) and how the config says them.
	Layers string `json:"layers"`
	// Approximations are what the roofline and the memory model price
	// differently from the real kernels ("" when nothing beyond the
	// prior's own simplifications).
	Approximations string `json:"approximations,omitempty"`
}

// archDocs describe the architectures of hfArchitectures; a wrapper
// whose text_config names one of them is priced as its language model.
var archDocs = map[string][2]string{
	"LlamaForCausalLM":               {"full + dense", ""},
	"MistralForCausalLM":             {"full or sliding (sliding_window on every layer) + dense", "every layer sliding: KV sized as full attention"},
	"Qwen2ForCausalLM":               {"full, sliding from max_window_layers + dense", ""},
	"Qwen3ForCausalLM":               {"full + dense (also Qwen3-VL's language model)", "the vision encoder is a what-if stage (docs/whatif.md#vision-encoders)"},
	"GemmaForCausalLM":               {"full + dense", ""},
	"Gemma2ForCausalLM":              {"full, sliding on even layers + dense", ""},
	"Gemma3ForCausalLM":              {"full, sliding on 5 of 6 layers + dense; Gemma3TextConfig defaults", ""},
	"Gemma3ForConditionalGeneration": {"as Gemma3ForCausalLM, under text_config", "the vision encoder is a what-if stage (docs/whatif.md#vision-encoders)"},
	"Gemma4ForCausalLM":              {"full (global_head_dim, num_global_key_value_heads), sliding (layer_types) + dense, or moe with the dense MLP beside it", "attention_k_eq_v is priced as separate K and V; per-layer input embeddings are not priced"},
	"Phi3ForCausalLM":                {"full or sliding + dense", ""},
	"MixtralForCausalLM":             {"full or sliding + moe", ""},
	"Qwen2MoeForCausalLM":            {"full + moe with a shared expert, dense by decoder_sparse_step and mlp_only_layers", ""},
	"Qwen3MoeForCausalLM":            {"full + moe (also Qwen3-VL-MoE's language model)", "the vision encoder is a what-if stage (docs/whatif.md#vision-encoders)"},
	"Qwen3NextForCausalLM":           {"linear (gated delta net) and full with an output gate, by layer_types or full_attention_interval + moe", "the delta rule's recurrent FLOPs are not priced, only its state's bytes"},
	"Qwen3_5ForCausalLM":             {"linear (gated delta net) and gated full attention by layer_types + dense", "as Qwen3NextForCausalLM"},
	"Qwen3_5MoeForCausalLM":          {"linear (gated delta net) and gated full attention by layer_types + moe with a shared expert", "as Qwen3NextForCausalLM"},
	"DeepseekV2ForCausalLM":          {"mla + moe with shared experts, first_k_dense_replace and moe_layer_freq", ""},
	"DeepseekV3ForCausalLM":          {"mla + moe (also Kimi-K2.x's language model)", "the multi-token-prediction layer is not priced"},
	"DeepseekV32ForCausalLM":         {"dsa (MLA over the index_topk keys the indexer selects) + moe", "the indexer's keys are priced at fp8 with a 4-byte scale"},
	"DeepseekV4ForCausalLM":          {"sliding (compress ratio 0), dsa over keys compressed by the smallest ratio, full over the others (compress_ratios) + moe", "attention is one shared K=V head of head_dim with q_lora and grouped o_lora projections; the compressor, hyper-connections and the sliding window beside each compressed layer are not priced apart"},
	"GlmMoeDsaForCausalLM":           {"dsa (MLA with the index_topk indexer) + moe", "as DeepseekV32ForCausalLM"},
	"Glm4MoeForCausalLM":             {"full + moe with shared experts", ""},
	"KimiLinearForCausalLM":          {"linear (KDA) and mla by linear_attn_config.full_attn_layers + moe of routed_expert_hidden_size", "KDA is priced as a gated delta net of num_heads × head_dim"},
	"GptOssForCausalLM":              {"full, sliding by layer_types + moe", "attention sinks and expert biases are not counted"},
	"MiniMaxM2ForCausalLM":           {"full + moe", ""},
	"MiniMaxM3ForCausalLM":           {"full, dsa over GQA heads (sparse_attention_config: top-k blocks × block size) + dense (dense_intermediate_size) or moe by moe_layer_freq list", "the sparse layers' indexer is priced as DeepSeek's"},
	"MiniMaxM3SparseForCausalLM":     {"as MiniMaxM3ForCausalLM (MiniMax-M3's multimodal language model)", "the vision encoder is a what-if stage (docs/whatif.md#vision-encoders)"},
	"Llama4ForCausalLM":              {"chunked (attention_chunk_size, on RoPE layers) and full (every 4th) + moe with a shared expert (interleave_moe_layer_step) or dense (intermediate_size_mlp)", "a chunk is held and read as a window of chunk-size tokens"},
	"Llama4ForConditionalGeneration": {"as Llama4ForCausalLM, under text_config", "the vision encoder is a what-if stage (docs/whatif.md#vision-encoders)"},
	"MiMoForCausalLM":                {"full + dense (Qwen2 layout)", "the multi-token-prediction layer is not priced"},
	"MiMoV2FlashForCausalLM":         {"full and sliding with their own heads and widths (hybrid_layer_pattern, swa_*) + dense or moe by moe_layer_freq list", "attention sinks are not counted"},
	"Step3p7FlashForCausalLM":        {"full and sliding by layer_types + dense (first_k_dense_replace) or moe with a shared expert", ""},
	"NemotronHForCausalLM":           {"mamba2, full, MLP-only and MoE-only blocks (hybrid_override_pattern or layers_block_type); relu² MLPs of two matrices; latent MoE (moe_latent_size)", "the Mamba-2 scan's FLOPs are not priced, only its state's bytes"},
	"DeciLMForCausalLM":              {"full with per-block KV heads, or none; dense of per-block width (block_configs ffn_mult), or none", "a block replaced by a linear layer is priced as skipped"},
}

// Architectures lists the supported architectures with what is priced
// of each, sorted by name.
func Architectures() []ArchitectureSupport {
	out := make([]ArchitectureSupport, 0, len(hfArchitectures))
	for a := range hfArchitectures {
		d := archDocs[a]
		out = append(out, ArchitectureSupport{Architecture: a, Layers: d[0], Approximations: d[1]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Architecture < out[j].Architecture })
	return out
}
