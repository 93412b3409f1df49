package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// hfConfig holds the fields of a Hugging Face config.json steplab reads.
// Pointers tell an absent field from a zero one.
type hfConfig struct {
	Architectures     []string `json:"architectures"`
	ModelType         string   `json:"model_type"`
	HiddenSize        int      `json:"hidden_size"`
	NumHiddenLayers   int      `json:"num_hidden_layers"`
	NumAttentionHeads int      `json:"num_attention_heads"`
	NumKeyValueHeads  *int     `json:"num_key_value_heads"`
	HeadDim           *int     `json:"head_dim"`
	IntermediateSize  int      `json:"intermediate_size"`
	VocabSize         int      `json:"vocab_size"`
	TieWordEmbeddings *bool    `json:"tie_word_embeddings"`
	AttentionBias     *bool    `json:"attention_bias"`
	TorchDType        string   `json:"torch_dtype"`
	DType             string   `json:"dtype"`
	Quantization      *struct {
		QuantMethod string `json:"quant_method"`
		Fmt         string `json:"fmt"`
	} `json:"quantization_config"`
	// Sliding-window attention.
	SlidingWindow        *int     `json:"sliding_window"`
	UseSlidingWindow     *bool    `json:"use_sliding_window"`
	MaxWindowLayers      *int     `json:"max_window_layers"`
	LayerTypes           []string `json:"layer_types"`
	SlidingWindowPattern *int     `json:"sliding_window_pattern"`
	// MoE.
	NumLocalExperts              int   `json:"num_local_experts"`
	NumExperts                   int   `json:"num_experts"`
	NRoutedExperts               int   `json:"n_routed_experts"`
	NumExpertsPerTok             int   `json:"num_experts_per_tok"`
	MoEIntermediateSize          int   `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize int   `json:"shared_expert_intermediate_size"`
	NSharedExperts               int   `json:"n_shared_experts"`
	FirstKDenseReplace           int   `json:"first_k_dense_replace"`
	MoELayerFreq                 *int  `json:"moe_layer_freq"`
	DecoderSparseStep            *int  `json:"decoder_sparse_step"`
	MLPOnlyLayers                []int `json:"mlp_only_layers"`
	// MLA.
	QLoraRank     *int `json:"q_lora_rank"`
	KVLoraRank    int  `json:"kv_lora_rank"`
	QKNopeHeadDim int  `json:"qk_nope_head_dim"`
	QKRopeHeadDim int  `json:"qk_rope_head_dim"`
	VHeadDim      int  `json:"v_head_dim"`
	// Multimodal wrappers (Gemma 3) nest the decoder here.
	TextConfig json.RawMessage `json:"text_config"`
}

// hfFamily is what an architecture implies beyond its config's fields.
type hfFamily struct {
	// tiedDefault is the transformers default of tie_word_embeddings.
	tiedDefault bool
	// qkvBias: the q, k and v projections always carry biases (Qwen2).
	qkvBias bool
	// sliding says which layers slide when the config sets a window and
	// lists no layer_types.
	sliding func(c *hfConfig) int
	// moe fills the MoE fields (nil: dense).
	moe func(c *hfConfig) (MoE, error)
	mla bool
	// textConfig: the decoder's fields are under text_config.
	textConfig bool
}

// Sliding-window rules of the families without layer_types.
var (
	slideNone = func(*hfConfig) int { return 0 }
	// slideAll: a set sliding_window applies to every layer (Mistral 7B
	// v0.1, Phi-3 mini).
	slideAll = func(c *hfConfig) int { return c.NumHiddenLayers }
	// slideQwen2: with use_sliding_window, layers from max_window_layers on.
	slideQwen2 = func(c *hfConfig) int {
		if c.UseSlidingWindow == nil || !*c.UseSlidingWindow {
			return 0
		}
		from := c.NumHiddenLayers
		if c.MaxWindowLayers != nil {
			from = *c.MaxWindowLayers
		}
		return max(0, c.NumHiddenLayers-from)
	}
	// slideGemma2: even layers slide.
	slideGemma2 = func(c *hfConfig) int { return (c.NumHiddenLayers + 1) / 2 }
	// slideGemma3: all but every sliding_window_pattern-th layer (6).
	slideGemma3 = func(c *hfConfig) int {
		p := 6
		if c.SlidingWindowPattern != nil && *c.SlidingWindowPattern > 0 {
			p = *c.SlidingWindowPattern
		}
		return c.NumHiddenLayers - c.NumHiddenLayers/p
	}
)

// MoE field sets.
var (
	// moeMixtral: num_local_experts of intermediate_size (Mixtral, gpt-oss).
	moeMixtral = func(c *hfConfig) (MoE, error) {
		return MoE{Experts: c.NumLocalExperts, TopK: c.NumExpertsPerTok, ExpertIntermediate: c.IntermediateSize}, nil
	}
	// moeQwen: num_experts of moe_intermediate_size, dense where
	// mlp_only_layers or decoder_sparse_step say; Qwen2-MoE adds one
	// shared expert.
	moeQwen = func(c *hfConfig) (MoE, error) {
		step, err := atLeastOne(c.DecoderSparseStep, "decoder_sparse_step")
		if err != nil {
			return MoE{}, err
		}
		// Sparse: every step-th layer (i+1 a multiple of step) not listed
		// in mlp_only_layers.
		n := c.NumHiddenLayers
		sparse := n / step
		var listed []int
		for _, i := range c.MLPOnlyLayers {
			if i >= 0 && i < n && (i+1)%step == 0 && !slices.Contains(listed, i) {
				listed = append(listed, i)
			}
		}
		dense := n - (sparse - len(listed))
		m := MoE{Experts: c.NumExperts, TopK: c.NumExpertsPerTok, ExpertIntermediate: c.MoEIntermediateSize, DenseLayers: dense}
		if c.SharedExpertIntermediateSize > 0 {
			m.SharedExperts, m.SharedIntermediate = 1, c.SharedExpertIntermediateSize
		}
		return m, nil
	}
	// moeDeepSeek: n_routed_experts and n_shared_experts of
	// moe_intermediate_size, dense for the first first_k_dense_replace
	// layers and off the moe_layer_freq grid.
	moeDeepSeek = func(c *hfConfig) (MoE, error) {
		freq, err := atLeastOne(c.MoELayerFreq, "moe_layer_freq")
		if err != nil {
			return MoE{}, err
		}
		// Sparse: the layers from first_k_dense_replace on whose index is
		// a multiple of moe_layer_freq.
		n := c.NumHiddenLayers
		multiples := func(x int) int { return (max(x, 0) + freq - 1) / freq } // of freq in [0, x)
		dense := n - (multiples(n) - multiples(min(c.FirstKDenseReplace, n)))
		m := MoE{Experts: c.NRoutedExperts, TopK: c.NumExpertsPerTok, ExpertIntermediate: c.MoEIntermediateSize, DenseLayers: dense}
		if c.NSharedExperts > 0 {
			m.SharedExperts, m.SharedIntermediate = c.NSharedExperts, c.MoEIntermediateSize
		}
		return m, nil
	}
)

// atLeastOne reads an optional layer period: 1 when absent, an error
// naming key when below 1.
func atLeastOne(p *int, key string) (int, error) {
	if p == nil {
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
		"Gemma3ForCausalLM":              {tiedDefault: true, sliding: slideGemma3},
		"Gemma3ForConditionalGeneration": {tiedDefault: true, sliding: slideGemma3, textConfig: true},
		"Phi3ForCausalLM":                {sliding: slideAll},
		"MixtralForCausalLM":             {sliding: slideAll, moe: moeMixtral},
		"Qwen2MoeForCausalLM":            {qkvBias: true, sliding: slideQwen2, moe: moeQwen},
		"Qwen3MoeForCausalLM":            {sliding: slideQwen2, moe: moeQwen},
		"DeepseekV2ForCausalLM":          {sliding: slideNone, moe: moeDeepSeek, mla: true},
		"DeepseekV3ForCausalLM":          {sliding: slideNone, moe: moeDeepSeek, mla: true},
		"GptOssForCausalLM":              {sliding: slideNone, moe: moeMixtral},
	}
	hfModelTypes = map[string]string{
		"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
		"qwen3": "Qwen3ForCausalLM", "gemma": "GemmaForCausalLM", "gemma2": "Gemma2ForCausalLM",
		"gemma3_text": "Gemma3ForCausalLM", "gemma3": "Gemma3ForConditionalGeneration", "phi3": "Phi3ForCausalLM",
		"mixtral": "MixtralForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
		"deepseek_v2": "DeepseekV2ForCausalLM", "deepseek_v3": "DeepseekV3ForCausalLM", "gpt_oss": "GptOssForCausalLM",
	}
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
	s, err := parseHFConfig(name, data)
	if err != nil {
		return Shape{}, fmt.Errorf("model: config.json of %s: %w", name, err)
	}
	return s, nil
}

func parseHFConfig(name string, data []byte) (Shape, error) {
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return Shape{}, fmt.Errorf("not a config.json: %w", err)
	}
	arch := ""
	if len(c.Architectures) > 0 {
		arch = c.Architectures[0]
	} else if a, ok := hfModelTypes[c.ModelType]; ok {
		arch = a
	}
	fam, ok := hfArchitectures[arch]
	if !ok {
		what := fmt.Sprintf("architecture %q", arch)
		if arch == "" {
			what = fmt.Sprintf("model_type %q (no architectures)", c.ModelType)
		}
		return Shape{}, fmt.Errorf("unsupported %s: steplab reads %s", what, strings.Join(SupportedArchitectures(), ", "))
	}
	top := c
	if fam.textConfig {
		if len(c.TextConfig) == 0 {
			return Shape{}, fmt.Errorf("%s: text_config: missing (the decoder's fields are read from it)", arch)
		}
		c = hfConfig{}
		if err := json.Unmarshal(top.TextConfig, &c); err != nil {
			return Shape{}, fmt.Errorf("text_config: %w", err)
		}
		if c.TorchDType == "" && c.DType == "" {
			c.TorchDType, c.DType = top.TorchDType, top.DType
		}
		if c.TieWordEmbeddings == nil {
			c.TieWordEmbeddings = top.TieWordEmbeddings
		}
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"intermediate_size", c.IntermediateSize}, {"vocab_size", c.VocabSize}} {
		if f.v <= 0 {
			return Shape{}, fmt.Errorf("%s: missing or not positive (got %d)", f.key, f.v)
		}
	}
	s := Shape{Name: name, Architecture: arch, Layers: c.NumHiddenLayers, Hidden: c.HiddenSize, Heads: c.NumAttentionHeads,
		Intermediate: c.IntermediateSize, Vocab: c.VocabSize, TP: 1, QKVBias: fam.qkvBias}
	note := func(format string, a ...any) { s.Notes = append(s.Notes, fmt.Sprintf(format, a...)) }

	if c.NumKeyValueHeads != nil {
		s.KVHeads = *c.NumKeyValueHeads
	} else {
		s.KVHeads = s.Heads
		note("num_key_value_heads absent: %d (= num_attention_heads, multi-head attention)", s.KVHeads)
	}
	switch {
	case fam.mla:
		if c.KVLoraRank <= 0 || c.QKRopeHeadDim <= 0 || c.QKNopeHeadDim <= 0 || c.VHeadDim <= 0 {
			return Shape{}, fmt.Errorf("%s: kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim must be > 0 (MLA)", arch)
		}
		s.MLA = MLA{KVLoraRank: c.KVLoraRank, QKNopeHeadDim: c.QKNopeHeadDim, QKRopeHeadDim: c.QKRopeHeadDim, VHeadDim: c.VHeadDim}
		if c.QLoraRank != nil {
			s.MLA.QLoraRank = *c.QLoraRank
		}
		s.HeadDim = c.QKNopeHeadDim + c.QKRopeHeadDim
	case c.HeadDim != nil && *c.HeadDim > 0:
		s.HeadDim = *c.HeadDim
	default:
		if c.HiddenSize%c.NumAttentionHeads != 0 {
			return Shape{}, fmt.Errorf("head_dim absent and hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
		}
		s.HeadDim = c.HiddenSize / c.NumAttentionHeads
		note("head_dim absent: %d (= hidden_size/num_attention_heads)", s.HeadDim)
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
	if err := hfDTypes(&s, &c, note); err != nil {
		return Shape{}, err
	}
	if err := hfSliding(&s, &c, fam, note); err != nil {
		return Shape{}, err
	}
	if fam.moe != nil {
		m, err := fam.moe(&c)
		if err != nil {
			return Shape{}, err
		}
		if m.Experts <= 0 || m.TopK <= 0 || m.ExpertIntermediate <= 0 {
			return Shape{}, fmt.Errorf("%s: expert count, num_experts_per_tok and expert width must be > 0, got %d, %d, %d",
				arch, m.Experts, m.TopK, m.ExpertIntermediate)
		}
		m.DType = s.MoE.DType // set by a quantization_config
		s.MoE = m
	}
	if err := s.validate(); err != nil {
		return Shape{}, err
	}
	return s, nil
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
	q := c.Quantization
	if q == nil {
		return nil
	}
	switch strings.ToLower(q.QuantMethod) {
	case "fp8":
		s.WeightDType = DTypeFP8
		note("quantization_config fp8: linear weights fp8, embeddings and norms %s", s.DType)
	case "mxfp4":
		if c.NumLocalExperts > 0 || c.NumExperts > 0 || c.NRoutedExperts > 0 {
			s.MoE.DType = DTypeMXFP4
			note("quantization_config mxfp4: routed experts mxfp4 (4.25 bits), other weights %s", s.DType)
		} else {
			s.WeightDType = DTypeMXFP4
			note("quantization_config mxfp4: linear weights mxfp4 (4.25 bits)")
		}
	default:
		note("quantization_config %q is not modelled: weights priced at %s", q.QuantMethod, s.DType)
	}
	return nil
}

// hfSliding reads the sliding-window layout: layer_types when listed,
// else the family's rule for a set sliding_window.
func hfSliding(s *Shape, c *hfConfig, fam hfFamily, note func(string, ...any)) error {
	if c.SlidingWindow == nil || *c.SlidingWindow <= 0 {
		return nil
	}
	n := 0
	if len(c.LayerTypes) > 0 {
		if len(c.LayerTypes) != c.NumHiddenLayers {
			return fmt.Errorf("layer_types has %d entries for %d layers", len(c.LayerTypes), c.NumHiddenLayers)
		}
		for _, t := range c.LayerTypes {
			switch t {
			case "sliding_attention":
				n++
			case "full_attention":
			default:
				return fmt.Errorf("layer_types: %q: steplab reads sliding_attention and full_attention", t)
			}
		}
	} else {
		n = fam.sliding(c)
	}
	if n == 0 {
		return nil
	}
	s.SlidingWindow, s.SlidingLayers = *c.SlidingWindow, n
	if n == s.Layers {
		note("every layer slides over %d tokens: the KV cache is sized as full attention (an upper bound past the window)", s.SlidingWindow)
	} else {
		note("%d of %d layers slide over %d tokens: their KV (at most the window per request) is read per request, not sized per token", n, s.Layers, s.SlidingWindow)
	}
	return nil
}

// LoadModelConfig reads a config.json, or a directory holding one, into a
// shape named after its directory (the file's name for a *.json that is
// not config.json).
func LoadModelConfig(path string) (Shape, error) {
	file, name := path, ""
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file, name = filepath.Join(path, "config.json"), filepath.Base(filepath.Clean(path))
	} else if filepath.Base(path) == "config.json" {
		name = filepath.Base(filepath.Dir(filepath.Clean(path)))
	} else {
		name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	b, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && file != path {
			return Shape{}, fmt.Errorf("model: %s holds no config.json", path)
		}
		return Shape{}, fmt.Errorf("model: %w", err)
	}
	s, err := ParseHFConfig(name, b)
	if err != nil {
		return Shape{}, err
	}
	s.File = file
	return s, nil
}
