package catalog

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// hfConfig holds the fields of a Hugging Face config.json steplab reads.
// Pointers tell an absent field from a zero one.
type hfConfig struct {
	Architectures     []string        `json:"architectures"`
	ModelType         string          `json:"model_type"`
	HiddenSize        int             `json:"hidden_size"`
	NumHiddenLayers   int             `json:"num_hidden_layers"`
	NumAttentionHeads int             `json:"num_attention_heads"`
	NumKeyValueHeads  *int            `json:"num_key_value_heads"`
	HeadDim           *int            `json:"head_dim"`
	IntermediateSize  int             `json:"intermediate_size"`
	VocabSize         int             `json:"vocab_size"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings"`
	AttentionBias     *bool           `json:"attention_bias"`
	UseQKNorm         bool            `json:"use_qk_norm"`
	QKNormType        string          `json:"qk_norm_type"`
	TorchDType        string          `json:"torch_dtype"`
	DType             string          `json:"dtype"`
	Quantization      json.RawMessage `json:"quantization_config"`
	// Sliding-window attention.
	SlidingWindow        *int     `json:"sliding_window"`
	UseSlidingWindow     *bool    `json:"use_sliding_window"`
	MaxWindowLayers      *int     `json:"max_window_layers"`
	LayerTypes           []string `json:"layer_types"`
	SlidingWindowPattern *int     `json:"sliding_window_pattern"`
	// MoE.
	NumLocalExperts              int             `json:"num_local_experts"`
	NumExperts                   int             `json:"num_experts"`
	NRoutedExperts               int             `json:"n_routed_experts"`
	NumExpertsPerTok             int             `json:"num_experts_per_tok"`
	MoEIntermediateSize          int             `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize int             `json:"shared_expert_intermediate_size"`
	NSharedExperts               int             `json:"n_shared_experts"`
	FirstKDenseReplace           int             `json:"first_k_dense_replace"`
	MoELayerFreq                 json.RawMessage `json:"moe_layer_freq"`
	DecoderSparseStep            *int            `json:"decoder_sparse_step"`
	MLPOnlyLayers                []int           `json:"mlp_only_layers"`
	// MLA.
	QLoraRank     *int `json:"q_lora_rank"`
	KVLoraRank    int  `json:"kv_lora_rank"`
	QKNopeHeadDim int  `json:"qk_nope_head_dim"`
	QKRopeHeadDim int  `json:"qk_rope_head_dim"`
	VHeadDim      int  `json:"v_head_dim"`
	// Multimodal wrappers (Gemma 3) nest the decoder here.
	TextConfig json.RawMessage `json:"text_config"`
	hfStackFields
	// hfQuant is the hf_quant_config.json beside the config, if any.
	hfQuant []byte
}

// hfFamily is what an architecture implies beyond its config's fields.
type hfFamily struct {
	// tiedDefault is the transformers default of tie_word_embeddings.
	tiedDefault bool
	// qkvBias: the q, k and v projections always carry biases (Qwen2).
	qkvBias bool
	// sliding says which layers slide when the config sets a window and
	// lists no layer_types.
	sliding func(c *hfConfig, i int) bool
	// moe fills the MoE fields (nil: dense).
	moe func(c *hfConfig) (MoE, error)
	mla bool
	// textConfig: the decoder's fields are under text_config.
	textConfig bool
	// defaults are the transformers defaults of fields a config may
	// leave out (Gemma 3's head_dim 256, not hidden/heads).
	defaults map[string]any
}

// Sliding-window rules of the families without layer_types: whether
// layer i slides when the config sets a window.
var (
	slideNone = func(*hfConfig, int) bool { return false }
	// slideAll: a set sliding_window applies to every layer (Mistral 7B
	// v0.1, Phi-3 mini).
	slideAll = func(*hfConfig, int) bool { return true }
	// slideQwen2: with use_sliding_window, layers from max_window_layers on.
	slideQwen2 = func(c *hfConfig, i int) bool {
		if c.UseSlidingWindow == nil || !*c.UseSlidingWindow {
			return false
		}
		return c.MaxWindowLayers == nil || i >= *c.MaxWindowLayers
	}
	// slideGemma2: even layers slide.
	slideGemma2 = func(_ *hfConfig, i int) bool { return i%2 == 0 }
	// slideGemma3: all but every sliding_window_pattern-th layer (6).
	slideGemma3 = func(c *hfConfig, i int) bool {
		p := 6
		if c.SlidingWindowPattern != nil && *c.SlidingWindowPattern > 0 {
			p = *c.SlidingWindowPattern
		}
		return (i+1)%p != 0
	}
)

// MoE field sets: where the routed experts' width is.
var (
	// moeMixtral: num_local_experts of intermediate_size (Mixtral, gpt-oss,
	// MiniMax-M2, Llama 4 with its shared expert).
	moeMixtral = func(c *hfConfig) (MoE, error) {
		m := MoE{Experts: c.experts(), TopK: c.topK(), ExpertIntermediate: c.IntermediateSize}
		m.SharedExperts, m.SharedIntermediate = c.shared()
		return m, nil
	}
	// moeRouted: experts of moe_intermediate_size with their shared
	// experts (Qwen, DeepSeek and the families after them).
	moeRouted = func(c *hfConfig) (MoE, error) {
		m := MoE{Experts: c.experts(), TopK: c.topK(), ExpertIntermediate: cmp.Or(c.MoEIntermediateSize, c.IntermediateSize)}
		m.SharedExperts, m.SharedIntermediate = c.shared()
		return m, nil
	}
)

// atLeastOne reads an optional layer period: 1 when absent, an error
// naming key when below 1.
func atLeastOne(p *int, key string) (int, error) {
	if p == nil || *p == 0 && key == "interleave_moe_layer_step" {
		return 1, nil
	}
	if *p < 1 {
		return 0, fmt.Errorf("%s %d: must be >= 1", key, *p)
	}
	return *p, nil
}

// hfArchitectures are the supported architectures (config.json's
// architectures[0]); hfModelTypes the same families by model_type, for a
// config without architectures.
var (
	hfArchitectures = map[string]hfFamily{
		"LlamaForCausalLM":               {sliding: slideNone},
		"MistralForCausalLM":             {sliding: slideAll},
		"Qwen2ForCausalLM":               {qkvBias: true, sliding: slideQwen2},
		"Qwen3ForCausalLM":               {sliding: slideQwen2},
		"GemmaForCausalLM":               {tiedDefault: true, sliding: slideNone},
		"Gemma2ForCausalLM":              {tiedDefault: true, sliding: slideGemma2},
		"Gemma3ForCausalLM":              {tiedDefault: true, sliding: slideGemma3, defaults: gemma3Defaults},
		"Gemma3ForConditionalGeneration": {tiedDefault: true, sliding: slideGemma3, textConfig: true, defaults: gemma3Defaults},
		"Gemma4ForCausalLM":              {tiedDefault: true, sliding: slideNone, moe: moeRouted},
		"Phi3ForCausalLM":                {sliding: slideAll},
		"MixtralForCausalLM":             {sliding: slideAll, moe: moeMixtral},
		"Qwen2MoeForCausalLM":            {qkvBias: true, sliding: slideQwen2, moe: moeRouted},
		"Qwen3MoeForCausalLM":            {sliding: slideQwen2, moe: moeRouted},
		"Qwen3NextForCausalLM":           {sliding: slideNone, moe: moeRouted},
		"Qwen3_5ForCausalLM":             {sliding: slideNone},
		"Qwen3_5MoeForCausalLM":          {sliding: slideNone, moe: moeRouted},
		"DeepseekV2ForCausalLM":          {sliding: slideNone, moe: moeRouted, mla: true},
		"DeepseekV3ForCausalLM":          {sliding: slideNone, moe: moeRouted, mla: true},
		"DeepseekV32ForCausalLM":         {sliding: slideNone, moe: moeRouted, mla: true},
		"DeepseekV4ForCausalLM":          {sliding: slideNone, moe: moeRouted},
		"GlmMoeDsaForCausalLM":           {sliding: slideNone, moe: moeRouted, mla: true},
		"Glm4MoeForCausalLM":             {sliding: slideNone, moe: moeRouted},
		"KimiLinearForCausalLM":          {sliding: slideNone, moe: moeRouted, mla: true},
		"GptOssForCausalLM":              {sliding: slideNone, moe: moeMixtral},
		"MiniMaxM2ForCausalLM":           {sliding: slideNone, moe: moeMixtral},
		"MiniMaxM3ForCausalLM":           {sliding: slideNone, moe: moeRouted},
		"MiniMaxM3SparseForCausalLM":     {sliding: slideNone, moe: moeRouted},
		"Llama4ForCausalLM":              {sliding: slideNone, moe: moeMixtral},
		"Llama4ForConditionalGeneration": {sliding: slideNone, moe: moeMixtral, textConfig: true},
		"MiMoForCausalLM":                {qkvBias: true, sliding: slideQwen2},
		"MiMoV2FlashForCausalLM":         {sliding: slideNone, moe: moeRouted},
		"Step3p7FlashForCausalLM":        {sliding: slideNone, moe: moeRouted},
		"NemotronHForCausalLM":           {sliding: slideNone, moe: moeRouted},
		"DeciLMForCausalLM":              {sliding: slideNone},
	}
	hfModelTypes = map[string]string{
		"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
		"qwen3": "Qwen3ForCausalLM", "gemma": "GemmaForCausalLM", "gemma2": "Gemma2ForCausalLM",
		"gemma3_text": "Gemma3ForCausalLM", "gemma3": "Gemma3ForConditionalGeneration", "phi3": "Phi3ForCausalLM",
		"mixtral": "MixtralForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
		"deepseek_v2": "DeepseekV2ForCausalLM", "deepseek_v3": "DeepseekV3ForCausalLM", "gpt_oss": "GptOssForCausalLM",
		// The language models of multimodal wrappers, by their text_config's model_type.
		"qwen3_vl_text": "Qwen3ForCausalLM", "qwen3_vl_moe_text": "Qwen3MoeForCausalLM", "qwen3_5_text": "Qwen3_5ForCausalLM",
		"qwen3_5_moe_text": "Qwen3_5MoeForCausalLM", "qwen3_next": "Qwen3NextForCausalLM", "gemma4_text": "Gemma4ForCausalLM",
		"llama4_text": "Llama4ForCausalLM", "kimi_k2": "DeepseekV3ForCausalLM", "kimi_linear": "KimiLinearForCausalLM",
		"minimax_m3": "MiniMaxM3ForCausalLM", "minimax_m2": "MiniMaxM2ForCausalLM", "glm4_moe": "Glm4MoeForCausalLM",
		"glm_moe_dsa": "GlmMoeDsaForCausalLM", "deepseek_v32": "DeepseekV32ForCausalLM", "nemotron_h": "NemotronHForCausalLM",
	}
	// gemma3Defaults are Gemma3TextConfig's (transformers).
	gemma3Defaults = map[string]any{"vocab_size": 262208, "head_dim": 256, "num_key_value_heads": 4, "sliding_window": 4096}
)

// SupportedArchitectures lists the config.json architectures ParseHFConfig
// reads.
func SupportedArchitectures() []string {
	out := make([]string, 0, len(hfArchitectures))
	for a := range hfArchitectures {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// ParseHFConfig reads a Hugging Face config.json into a Shape named name
// (TP 1). It dispatches on architectures[0] (else model_type); an
// unsupported architecture is an error naming it and listing the supported
// ones. What the config leaves out and the shape needs is derived or
// assumed and recorded in Shape.Notes (head_dim = hidden/heads,
// num_key_value_heads = heads, the family's tie_word_embeddings default,
// the dtype), so a manifest carrying the notes says it.
func ParseHFConfig(name string, data []byte) (Shape, error) {
	return ParseHFCheckpoint(name, data, nil)
}

// ParseHFCheckpoint is ParseHFConfig with the checkpoint's
// hf_quant_config.json (ModelOpt; nil when it has none), which then says
// the precision of each part; a quantization_config contradicting it is
// an error naming both.
func ParseHFCheckpoint(name string, data, hfQuant []byte) (Shape, error) {
	s, err := parseHFConfig(name, data, hfQuant)
	if err != nil {
		return Shape{}, fmt.Errorf("model: config.json of %s: %w", name, err)
	}
	return s, nil
}

func parseHFConfig(name string, data, hfQuant []byte) (Shape, error) {
	var c hfConfig
	if err := json.Unmarshal(pythonJSON(data), &c); err != nil {
		return Shape{}, fmt.Errorf("not a config.json: %w", err)
	}
	arch := hfArch(&c)
	fam, ok := hfArchitectures[arch]
	var pre []string
	note := func(format string, a ...any) { pre = append(pre, fmt.Sprintf(format, a...)) }
	raw := pythonJSON(data)
	if top := c; (!ok || fam.textConfig) && len(top.TextConfig) > 0 {
		// A multimodal wrapper: price its language model.
		var t hfConfig
		if err := json.Unmarshal(pythonJSON(top.TextConfig), &t); err != nil {
			return Shape{}, fmt.Errorf("text_config: %w", err)
		}
		if !ok {
			lm := hfArch(&t)
			if fam, ok = hfArchitectures[lm]; ok {
				note("%s: the language model (%s) is priced; the vision encoder is not (a what-if vision_encoder stage prices it)", arch, lm)
			}
		}
		c, raw = t, pythonJSON(top.TextConfig)
		c.TorchDType, c.DType = cmp.Or(c.TorchDType, top.TorchDType), cmp.Or(c.DType, top.DType)
		if c.TieWordEmbeddings == nil {
			c.TieWordEmbeddings = top.TieWordEmbeddings
		}
		if len(c.Quantization) == 0 {
			c.Quantization = top.Quantization
		}
	} else if fam.textConfig {
		return Shape{}, fmt.Errorf("%s: text_config: missing (the decoder's fields are read from it)", arch)
	}
	if !ok {
		what := fmt.Sprintf("architecture %q", arch)
		if len(c.Architectures) == 0 {
			what = fmt.Sprintf("model_type %q (no architectures)", c.ModelType)
		}
		return Shape{}, fmt.Errorf("unsupported %s: steplab reads %s", what, strings.Join(SupportedArchitectures(), ", "))
	}
	if len(fam.defaults) > 0 {
		withDef, err := withDefaults(raw, fam.defaults, arch, note)
		if err != nil {
			return Shape{}, fmt.Errorf("text_config: %w", err)
		}
		q, tie, td, d := c.Quantization, c.TieWordEmbeddings, c.TorchDType, c.DType
		c = hfConfig{}
		if err := json.Unmarshal(withDef, &c); err != nil {
			return Shape{}, err
		}
		c.Quantization, c.TieWordEmbeddings, c.TorchDType, c.DType = q, tie, td, d
	}
	c.hfQuant = hfQuant
	s, err := hfShape(name, arch, &c, fam)
	if err != nil {
		return Shape{}, err
	}
	s.Notes = append(pre, s.Notes...)
	return s, nil
}

// hfArch is a config's architectures[0], else its model_type's.
func hfArch(c *hfConfig) string {
	if len(c.Architectures) > 0 {
		return c.Architectures[0]
	}
	return hfModelTypes[c.ModelType]
}

func hfShape(name, arch string, c *hfConfig, fam hfFamily) (Shape, error) {
	if err := hfBlockTypes(c); err != nil {
		return Shape{}, err
	}
	if fam.moe != nil && hfDense(c) {
		fam.moe = nil
	}
	inter := c.IntermediateSize
	if fam.moe != nil || len(c.BlockConfigs) > 0 {
		inter = 1 // MoE layers need no dense width; a dense layer's is checked by Validate
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"intermediate_size", inter}, {"vocab_size", c.VocabSize}} {
		if f.v <= 0 {
			return Shape{}, fmt.Errorf("%s: missing or not positive (got %d)", f.key, f.v)
		}
	}
	s := Shape{Name: name, Architecture: arch, Layers: c.NumHiddenLayers, Hidden: c.HiddenSize, Heads: c.NumAttentionHeads,
		Intermediate: c.denseWidth(), Vocab: c.VocabSize, TP: 1, QKVBias: fam.qkvBias, AttnOutputGate: c.AttnOutputGate}
	note := func(format string, a ...any) { s.Notes = append(s.Notes, fmt.Sprintf(format, a...)) }
	if c.MLPHiddenAct == "relu2" {
		s.MLPMatrices = 2
	}
	if err := hfAttention(&s, c, fam, arch, note); err != nil {
		return Shape{}, err
	}
	if c.TieWordEmbeddings != nil {
		s.TiedEmbeddings = *c.TieWordEmbeddings
	} else {
		s.TiedEmbeddings = fam.tiedDefault
		note("tie_word_embeddings absent: %v (the %s default)", fam.tiedDefault, arch)
	}
	if c.AttentionBias != nil && *c.AttentionBias {
		s.QKVBias = true
	}
	s.QKNormAcrossHeads = c.UseQKNorm && c.QKNormType == "per_layer"
	if fam.moe != nil {
		m, err := fam.moe(c)
		if err != nil {
			return Shape{}, err
		}
		if m.Experts <= 0 || m.TopK <= 0 || m.ExpertIntermediate <= 0 {
			return Shape{}, fmt.Errorf("%s: expert count, num_experts_per_tok and expert width must be > 0, got %d, %d, %d",
				arch, m.Experts, m.TopK, m.ExpertIntermediate)
		}
		m.Latent = cmp.Or(c.MoELatentSize, c.RoutedExpertHiddenSize)
		s.MoE = m
	}
	if err := hfConfigLayers(&s, c, fam, note); err != nil {
		return Shape{}, err
	}
	if err := hfDTypes(&s, c, note); err != nil {
		return Shape{}, err
	}
	if err := s.validate(); err != nil {
		return Shape{}, err
	}
	return s, nil
}

// hfAttention reads the attention geometry: KV heads, MLA ranks, the
// head width (derived and noted when absent).
func hfAttention(s *Shape, c *hfConfig, fam hfFamily, arch string, note func(string, ...any)) error {
	if c.NumKeyValueHeads != nil {
		s.KVHeads = *c.NumKeyValueHeads
	} else {
		s.KVHeads = s.Heads
		note("num_key_value_heads absent: %d (= num_attention_heads, multi-head attention)", s.KVHeads)
	}
	switch {
	case fam.mla:
		if c.KVLoraRank <= 0 || c.QKRopeHeadDim <= 0 || c.QKNopeHeadDim <= 0 || c.VHeadDim <= 0 {
			return fmt.Errorf("%s: kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim must be > 0 (MLA)", arch)
		}
		s.MLA = MLA{KVLoraRank: c.KVLoraRank, QKNopeHeadDim: c.QKNopeHeadDim, QKRopeHeadDim: c.QKRopeHeadDim, VHeadDim: c.VHeadDim}
		if c.QLoraRank != nil {
			s.MLA.QLoraRank = *c.QLoraRank
		}
		s.HeadDim = c.QKNopeHeadDim + c.QKRopeHeadDim
	case c.HeadDim != nil && *c.HeadDim > 0:
		s.HeadDim = *c.HeadDim
	case c.AttentionHeadDim > 0:
		s.HeadDim = c.AttentionHeadDim
	default:
		if c.HiddenSize%c.NumAttentionHeads != 0 {
			return fmt.Errorf("head_dim absent and hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
		}
		s.HeadDim = c.HiddenSize / c.NumAttentionHeads
		note("head_dim absent: %d (= hidden_size/num_attention_heads)", s.HeadDim)
	}
	return nil
}

// hfConfigLayers reads the per-layer stack. A stack the scalar fields
// can say (full or MLA attention with one sliding window, dense then
// MoE MLPs of the shape's widths) sets them and is not kept.
func hfConfigLayers(s *Shape, c *hfConfig, fam hfFamily, note func(string, ...any)) error {
	per, err := hfLayers(s, c, fam)
	if err != nil {
		return err
	}
	scalar, sliding, dense, win := true, 0, 0, slidingWindowOf(per)
	for _, l := range per {
		g := l
		g.Attention, g.Window, g.MLP = "", 0, ""
		kind := l.Attention == AttnFull || l.Attention == AttnMLA || l.Attention == AttnSliding && l.Window == win
		if g != (Layer{}) || !kind || l.MLP == MLPNone {
			scalar = false
		}
		if l.Attention == AttnSliding {
			sliding++
		}
		if l.MLP != MLPMoE {
			dense++
		}
	}
	if fam.moe != nil {
		s.MoE.DenseLayers = min(dense, s.Layers-1)
	}
	if !scalar || s.MoE.Latent > 0 || s.AttnOutputGate {
		s.Stack = compactStack(per)
		note("layers priced as a stack: %s", stackSummary(s.Stack))
		return nil
	}
	if sliding > 0 {
		s.SlidingWindow, s.SlidingLayers = slidingWindowOf(per), sliding
		if sliding == s.Layers {
			note("every layer slides over %d tokens: the KV cache is sized as full attention (an upper bound past the window)", s.SlidingWindow)
		} else {
			note("%d of %d layers slide over %d tokens: their KV (at most the window per request) is read per request, not sized per token", sliding, s.Layers, s.SlidingWindow)
		}
	}
	return nil
}

// slidingWindowOf is the first sliding layer's window.
func slidingWindowOf(per []Layer) int {
	for _, l := range per {
		if l.Attention == AttnSliding {
			return l.Window
		}
	}
	return 0
}

// stackSummary counts a stack's layers by attention and MLP kind
// ("40 full+moe, 20 linear+moe").
func stackSummary(st []Layer) string {
	counts := map[string]int{}
	var order []string
	for _, l := range st {
		k := l.Attention + "+" + l.MLP
		if l.Window > 0 || l.TopK > 0 {
			k = fmt.Sprintf("%s(%d)+%s", l.Attention, max(l.Window, l.TopK), l.MLP)
		}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k] += l.Count
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, ", ")
}

// hfDTypes reads torch_dtype (or dtype) and quantization_config.
func hfDTypes(s *Shape, c *hfConfig, note func(string, ...any)) error {
	raw := c.TorchDType
	if raw == "" {
		raw = c.DType
	}
	switch d, err := CanonicalDType(raw); {
	case raw == "":
		s.DType = DTypeBF16
		note("torch_dtype absent: bf16 assumed")
	case err != nil:
		return fmt.Errorf("torch_dtype: %w", err)
	case d == DTypeFP32:
		s.DType = DTypeBF16
		note("torch_dtype float32: served in bf16 (vLLM's dtype=auto downcasts float32 checkpoints)")
	case d == DTypeBF16 || d == DTypeFP16:
		s.DType = d
	default:
		return fmt.Errorf("torch_dtype %q: not an activation dtype (bf16, fp16 or fp32)", raw)
	}
	spec, err := readQuantizationConfig(c.Quantization)
	if err != nil {
		return err
	}
	if len(c.hfQuant) > 0 {
		var h hfQuantConfig
		if err := json.Unmarshal(c.hfQuant, &h); err != nil || h.Quantization == nil {
			return fmt.Errorf("hf_quant_config.json: not a ModelOpt quantization file (want a \"quantization\" object): %v", err)
		}
		hs, err := readModelOpt(*h.Quantization, "hf_quant_config.json")
		if err != nil {
			return err
		}
		if spec != nil && spec.algo != "" && hs.algo != "" && spec.algo != hs.algo {
			return fmt.Errorf("config.json quantization_config says %s but hf_quant_config.json says %s", spec.algo, hs.algo)
		}
		spec = &hs
	}
	if spec != nil {
		applyQuant(s, *spec, note)
	}
	if strings.EqualFold(c.ExpertDType, "fp4") && s.IsMoE() && (s.MoE.DType == "" || s.MoE.DType == DTypeFP8) {
		s.MoE.DType = DTypeMXFP4
		note("expert_dtype fp4: routed experts mxfp4")
	}
	return nil
}

// LoadModelConfig reads a config.json, or a directory holding one, into a
// shape named after its directory (the file's name for a *.json that is
// not config.json, less a _config suffix). The checkpoint's
// hf_quant_config.json beside it, if any, is read too (hfQuantPath).
func LoadModelConfig(path string) (Shape, error) {
	file, name, b, err := readConfigFile(path)
	if err != nil {
		return Shape{}, err
	}
	q, err := os.ReadFile(hfQuantPath(file))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Shape{}, fmt.Errorf("model: %w", err)
	}
	s, err := ParseHFCheckpoint(name, b, q)
	if err != nil {
		return Shape{}, err
	}
	s.File = file
	return s, nil
}

// readConfigFile reads the config.json path names (the file, or the
// checkpoint directory holding it) and the model name it gives: the
// directory's, or NAME of a NAME_config.json.
func readConfigFile(path string) (file, name string, data []byte, err error) {
	file = path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file, name = filepath.Join(path, "config.json"), filepath.Base(filepath.Clean(path))
	} else if filepath.Base(path) == "config.json" {
		name = filepath.Base(filepath.Dir(filepath.Clean(path)))
	} else {
		// NAME_config.json, as beside NAME_hf_quant_config.json, names NAME.
		name = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), "_config")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && file != path {
			return "", "", nil, fmt.Errorf("model: %s holds no config.json", path)
		}
		return "", "", nil, fmt.Errorf("model: %w", err)
	}
	return file, name, b, nil
}

// hfQuantPath is where a config's hf_quant_config.json lies: beside
// config.json, or NAME_hf_quant_config.json beside NAME_config.json.
func hfQuantPath(config string) string {
	dir, base := filepath.Split(config)
	if p, ok := strings.CutSuffix(base, "_config.json"); ok {
		return filepath.Join(dir, p+"_hf_quant_config.json")
	}
	return filepath.Join(dir, "hf_quant_config.json")
}
