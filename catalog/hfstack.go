package catalog

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// hfStackFields are the config.json fields that say what each layer is:
// its token mixer (layer_types, hybrid patterns, sparse attention) and
// its MLP (the MoE layer rules), and the widths of the later families.
type hfStackFields struct {
	NumExpertsPerToken              int      `json:"num_experts_per_token"`
	TopKExperts                     int      `json:"top_k_experts"`
	NumSharedExperts                int      `json:"num_shared_experts"`
	MoESharedExpertIntermediateSize int      `json:"moe_shared_expert_intermediate_size"`
	ShareExpertDim                  int      `json:"share_expert_dim"`
	SharedIntermediateSize          int      `json:"shared_intermediate_size"`
	DenseIntermediateSize           int      `json:"dense_intermediate_size"`
	IntermediateSizeMLP             int      `json:"intermediate_size_mlp"`
	InterleaveMoELayerStep          *int     `json:"interleave_moe_layer_step"`
	EnableMoEBlock                  *bool    `json:"enable_moe_block"`
	RoutedExpertHiddenSize          int      `json:"routed_expert_hidden_size"`
	LayersBlockType                 []string `json:"layers_block_type"`
	MoELatentSize                   int      `json:"moe_latent_size"`
	MLPHiddenAct                    string   `json:"mlp_hidden_act"`
	ExpertDType                     string   `json:"expert_dtype"` // DeepSeek-V4: "fp4" experts (mxfp4)

	AttentionChunkSize    int    `json:"attention_chunk_size"`
	NoRopeLayers          []int  `json:"no_rope_layers"`
	HybridOverridePattern string `json:"hybrid_override_pattern"`
	HybridLayerPattern    []int  `json:"hybrid_layer_pattern"`
	FullAttentionInterval int    `json:"full_attention_interval"`
	AttnOutputGate        bool   `json:"attn_output_gate"`
	AttentionHeadDim      int    `json:"attention_head_dim"`
	GlobalHeadDim         int    `json:"global_head_dim"`
	NumGlobalKVHeads      int    `json:"num_global_key_value_heads"`
	SWAHeads              int    `json:"swa_num_attention_heads"`
	SWAKVHeads            int    `json:"swa_num_key_value_heads"`
	SWAHeadDim            int    `json:"swa_head_dim"`
	SWAVHeadDim           int    `json:"swa_v_head_dim"`
	IndexTopK             int    `json:"index_topk"`
	IndexNHeads           int    `json:"index_n_heads"`
	IndexHeadDim          int    `json:"index_head_dim"`
	CompressRatios        []int  `json:"compress_ratios"`
	OLoraRank             int    `json:"o_lora_rank"`
	OGroups               int    `json:"o_groups"`
	SparseAttention       *struct {
		Use        *bool `json:"use_sparse_attention"`
		Freq       []int `json:"sparse_attention_freq"`
		IndexDim   int   `json:"sparse_index_dim"`
		IndexHeads int   `json:"sparse_num_index_heads"`
		TopKBlocks int   `json:"sparse_topk_blocks"`
		BlockSize  int   `json:"sparse_block_size"`
	} `json:"sparse_attention_config"`

	LinearNumValueHeads int `json:"linear_num_value_heads"`
	LinearNumKeyHeads   int `json:"linear_num_key_heads"`
	LinearKeyHeadDim    int `json:"linear_key_head_dim"`
	LinearValueHeadDim  int `json:"linear_value_head_dim"`
	LinearConvKernelDim int `json:"linear_conv_kernel_dim"`
	LinearAttnConfig    *struct {
		FullAttnLayers []int `json:"full_attn_layers"`
		NumHeads       int   `json:"num_heads"`
		HeadDim        int   `json:"head_dim"`
		ConvKernel     int   `json:"short_conv_kernel_size"`
	} `json:"linear_attn_config"`
	MambaNumHeads int `json:"mamba_num_heads"`
	MambaHeadDim  int `json:"mamba_head_dim"`
	NGroups       int `json:"n_groups"`
	SSMStateSize  int `json:"ssm_state_size"`
	ConvKernel    int `json:"conv_kernel"`
	// The recurrent state's dtype (vLLM's mamba_ssm_cache_dtype).
	SSMCacheDType string `json:"mamba_ssm_cache_dtype"`
	SSMDType      string `json:"mamba_ssm_dtype"`

	BlockConfigs []struct {
		Attention struct {
			NoOp              bool `json:"no_op"`
			ReplaceWithLinear bool `json:"replace_with_linear"`
			NHeadsInGroup     int  `json:"n_heads_in_group"`
		} `json:"attention"`
		FFN struct {
			NoOp              bool    `json:"no_op"`
			ReplaceWithLinear bool    `json:"replace_with_linear"`
			FFNMult           float64 `json:"ffn_mult"`
		} `json:"ffn"`
	} `json:"block_configs"`
}

func (c *hfConfig) experts() int {
	return cmp.Or(c.NumLocalExperts, c.NumExperts, c.NRoutedExperts)
}

func (c *hfConfig) topK() int {
	return cmp.Or(c.NumExpertsPerTok, c.NumExpertsPerToken, c.TopKExperts)
}

// shared is the shared experts and their width: Qwen's one of
// shared_expert_intermediate_size, DeepSeek's n_shared_experts of
// moe_intermediate_size (or the family's own width key), Llama 4's and
// Gemma 4's dense MLP beside the routed experts.
func (c *hfConfig) shared() (n, width int) {
	switch {
	case c.IntermediateSizeMLP > 0 || c.EnableMoEBlock != nil && *c.EnableMoEBlock:
		return 1, c.IntermediateSize
	case c.SharedExpertIntermediateSize > 0 && c.NSharedExperts == 0 && c.NumSharedExperts == 0:
		return 1, c.SharedExpertIntermediateSize
	}
	n = cmp.Or(c.NSharedExperts, c.NumSharedExperts)
	if n == 0 {
		return 0, 0
	}
	return n, cmp.Or(c.MoESharedExpertIntermediateSize, c.ShareExpertDim, c.SharedIntermediateSize, c.MoEIntermediateSize)
}

// denseWidth is the dense MLP layers' width.
func (c *hfConfig) denseWidth() int {
	return cmp.Or(c.DenseIntermediateSize, c.IntermediateSizeMLP, c.IntermediateSize)
}

// moeAt says whether layer i has routed experts: moe_layer_freq as a
// list, DeepSeek's first_k_dense_replace and moe_layer_freq, Qwen's
// decoder_sparse_step and mlp_only_layers, Llama 4's
// interleave_moe_layer_step; every layer otherwise.
func (c *hfConfig) moeAt() (func(i int) bool, error) {
	var list []int
	freq := 1
	if len(c.MoELayerFreq) > 0 && !bytes.Equal(c.MoELayerFreq, []byte("null")) {
		if err := json.Unmarshal(c.MoELayerFreq, &list); err != nil {
			var f int
			if err := json.Unmarshal(c.MoELayerFreq, &f); err != nil {
				return nil, fmt.Errorf("moe_layer_freq: want an integer or a list of 0/1 per layer, got %s", c.MoELayerFreq)
			}
			if f < 1 {
				return nil, fmt.Errorf("moe_layer_freq %d: must be >= 1", f)
			}
			freq, list = f, nil
		} else if len(list) != c.NumHiddenLayers {
			return nil, fmt.Errorf("moe_layer_freq has %d entries for %d layers", len(list), c.NumHiddenLayers)
		}
	}
	step, err := atLeastOne(c.DecoderSparseStep, "decoder_sparse_step")
	if err != nil {
		return nil, err
	}
	inter, err := atLeastOne(c.InterleaveMoELayerStep, "interleave_moe_layer_step")
	if err != nil {
		return nil, err
	}
	return func(i int) bool {
		if list != nil {
			return list[i] != 0
		}
		return i >= c.FirstKDenseReplace && i%freq == 0 && (i+1)%step == 0 && (i+1)%inter == 0 &&
			!slices.Contains(c.MLPOnlyLayers, i)
	}, nil
}

// hfLayers reads the kind of each layer into a stack of len(layers)
// runs, and the shape's state-mixer and indexer geometry.
func hfLayers(s *Shape, c *hfConfig, fam hfFamily) ([]Layer, error) {
	n := c.NumHiddenLayers
	per := make([]Layer, n)
	base := AttnFull
	if fam.mla {
		base = AttnMLA
	}
	mixers, err := hfMixers(s, c, base)
	if err != nil {
		return nil, err
	}
	if mixers == nil { // the family's sliding rule
		mixers = func(i int) Layer {
			if c.SlidingWindow != nil && *c.SlidingWindow > 0 && fam.sliding(c, i) {
				return Layer{Attention: AttnSliding, Window: *c.SlidingWindow}
			}
			return Layer{Attention: base}
		}
	}
	moeAt, err := c.moeAt()
	if err != nil {
		return nil, err
	}
	for i := range per {
		per[i] = mixers(i)
		if per[i].MLP != "" {
			continue
		}
		per[i].MLP = MLPDense
		if fam.moe != nil && moeAt(i) {
			per[i].MLP = MLPMoE
		}
	}
	if err := hfBlockConfigs(s, c, per); err != nil {
		return nil, err
	}
	return per, nil
}

// hfMixers returns each layer's token mixer (and, for the hybrid
// patterns that say it, its MLP); nil when the config lists none (the
// family's sliding rule applies).
func hfMixers(s *Shape, c *hfConfig, base string) (func(i int) Layer, error) {
	n := c.NumHiddenLayers
	win := 0
	if c.SlidingWindow != nil {
		win = *c.SlidingWindow
	}
	sliding := Layer{Attention: AttnSliding, Window: win, Heads: c.SWAHeads, KVHeads: c.SWAKVHeads, HeadDim: c.SWAHeadDim, VHeadDim: c.SWAVHeadDim}
	if c.GlobalHeadDim > 0 { // Gemma 4: the scalar geometry is the global layers'
		sliding.HeadDim, sliding.KVHeads = s.HeadDim, s.KVHeads
		s.HeadDim, s.KVHeads = c.GlobalHeadDim, cmp.Or(c.NumGlobalKVHeads, s.KVHeads)
	}
	if win <= 0 {
		sliding = Layer{}
	}
	full := Layer{Attention: base}
	if base == AttnFull && c.VHeadDim > 0 && c.VHeadDim != s.HeadDim {
		full.VHeadDim = c.VHeadDim
	}
	linear := func(isFull func(int) bool) func(int) Layer {
		hfStateMixer(s, c, AttnLinear)
		return func(i int) Layer {
			if isFull(i) {
				return full
			}
			return Layer{Attention: AttnLinear}
		}
	}
	switch {
	case len(c.LayerTypes) > 0:
		return hfLayerTypes(s, c, full, sliding)
	case c.HybridOverridePattern != "":
		return hfHybridPattern(s, c, base)
	case len(c.HybridLayerPattern) > 0:
		if len(c.HybridLayerPattern) != n {
			return nil, fmt.Errorf("hybrid_layer_pattern has %d entries for %d layers", len(c.HybridLayerPattern), n)
		}
		return func(i int) Layer {
			if c.HybridLayerPattern[i] == 1 && sliding.Window > 0 {
				return sliding
			}
			return full
		}, nil
	case c.LinearAttnConfig != nil: // full_attn_layers are 1-based
		return linear(func(i int) bool { return slices.Contains(c.LinearAttnConfig.FullAttnLayers, i+1) }), nil
	case c.FullAttentionInterval > 0:
		return linear(func(i int) bool { return (i+1)%c.FullAttentionInterval == 0 }), nil
	case len(c.CompressRatios) > 0:
		return hfCompressed(s, c)
	case c.IndexTopK > 0:
		s.Indexer = Indexer{Heads: c.IndexNHeads, HeadDim: c.IndexHeadDim}
		return func(int) Layer { return Layer{Attention: AttnDSA, TopK: c.IndexTopK} }, nil
	case c.SparseAttention != nil && len(c.SparseAttention.Freq) > 0 && (c.SparseAttention.Use == nil || *c.SparseAttention.Use):
		sa := c.SparseAttention
		if len(sa.Freq) != n {
			return nil, fmt.Errorf("sparse_attention_config.sparse_attention_freq has %d entries for %d layers", len(sa.Freq), n)
		}
		s.Indexer = Indexer{Heads: sa.IndexHeads, HeadDim: sa.IndexDim}
		return func(i int) Layer {
			if sa.Freq[i] != 0 {
				return Layer{Attention: AttnDSA, TopK: sa.TopKBlocks * sa.BlockSize}
			}
			return full
		}, nil
	case c.AttentionChunkSize > 0 && c.IntermediateSizeMLP > 0:
		// Llama 4: layers with RoPE attend within chunks; every fourth
		// (no_rope_layers 0) attends globally.
		return func(i int) Layer {
			rope := (i+1)%4 != 0
			if len(c.NoRopeLayers) == n {
				rope = c.NoRopeLayers[i] != 0
			}
			if rope {
				return Layer{Attention: AttnChunked, Window: c.AttentionChunkSize}
			}
			return full
		}, nil
	}
	return nil, nil
}

// hfLayerTypes reads layer_types.
func hfLayerTypes(s *Shape, c *hfConfig, full, sliding Layer) (func(int) Layer, error) {
	if len(c.LayerTypes) != c.NumHiddenLayers {
		return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(c.LayerTypes), c.NumHiddenLayers)
	}
	for i, t := range c.LayerTypes {
		switch t {
		case "sliding_attention", "full_attention", "chunked_attention":
		case "linear_attention":
			hfStateMixer(s, c, AttnLinear)
		case "deepseek_sparse_attention":
			s.Indexer = Indexer{Heads: c.IndexNHeads, HeadDim: c.IndexHeadDim}
		default:
			return nil, fmt.Errorf("layer_types[%d]: %q: steplab reads sliding_attention, chunked_attention, full_attention, deepseek_sparse_attention and linear_attention", i, t)
		}
	}
	return func(i int) Layer {
		switch c.LayerTypes[i] {
		case "sliding_attention":
			if sliding.Window > 0 {
				return sliding
			}
		case "chunked_attention":
			return Layer{Attention: AttnChunked, Window: cmp.Or(c.AttentionChunkSize, sliding.Window)}
		case "linear_attention":
			return Layer{Attention: AttnLinear}
		case "deepseek_sparse_attention":
			return Layer{Attention: AttnDSA, TopK: c.IndexTopK}
		}
		return full
	}, nil
}

// hfHybridPattern reads Nemotron-H's hybrid_override_pattern: M a Mamba-2
// block, * an attention block, - an MLP block, E an MoE block.
func hfHybridPattern(s *Shape, c *hfConfig, base string) (func(int) Layer, error) {
	p := c.HybridOverridePattern
	if len(p) != c.NumHiddenLayers {
		return nil, fmt.Errorf("hybrid_override_pattern has %d layers for num_hidden_layers %d", len(p), c.NumHiddenLayers)
	}
	for i, r := range p {
		if !strings.ContainsRune("M*-E", r) {
			return nil, fmt.Errorf("hybrid_override_pattern[%d]: %q: steplab reads M (Mamba-2), * (attention), - (MLP) and E (MoE)", i, r)
		}
	}
	hfStateMixer(s, c, AttnMamba2)
	return func(i int) Layer {
		switch p[i] {
		case 'M':
			return Layer{Attention: AttnMamba2, MLP: MLPNone}
		case '*':
			return Layer{Attention: base, MLP: MLPNone}
		case '-':
			return Layer{Attention: AttnNone, MLP: MLPDense}
		}
		return Layer{Attention: AttnNone, MLP: MLPMoE}
	}, nil
}

// hfBlockTypes reads Nemotron 3's layers_block_type as the equivalent
// hybrid_override_pattern.
func hfBlockTypes(c *hfConfig) error {
	if len(c.LayersBlockType) == 0 || c.HybridOverridePattern != "" {
		return nil
	}
	codes := map[string]rune{"mamba": 'M', "attention": '*', "mlp": '-', "moe": 'E'}
	var p strings.Builder
	for i, t := range c.LayersBlockType {
		r, ok := codes[t]
		if !ok {
			return fmt.Errorf("layers_block_type[%d]: %q: steplab reads mamba, attention, mlp and moe", i, t)
		}
		p.WriteRune(r)
	}
	c.HybridOverridePattern = p.String()
	if c.NumHiddenLayers == 0 {
		c.NumHiddenLayers = len(c.LayersBlockType)
	}
	return nil
}

// hfDense says whether an MoE family's config is of a dense model: Gemma
// 4 with enable_moe_block false, Nemotron-H without E layers.
func hfDense(c *hfConfig) bool {
	return c.experts() == 0 && (c.EnableMoEBlock != nil && !*c.EnableMoEBlock ||
		c.HybridOverridePattern != "" && !strings.ContainsRune(c.HybridOverridePattern, 'E'))
}

// hfCompressed reads DeepSeek-V4's per-layer compress_ratios: ratio 0 is
// a sliding-window layer, ratio r a layer storing one entry per r tokens
// (read in full, or through the indexer's top-k where the config has
// one and r is the smallest ratio), each beside a sliding window that is
// not modelled apart.
func hfCompressed(s *Shape, c *hfConfig) (func(int) Layer, error) {
	n := c.NumHiddenLayers
	if len(c.CompressRatios) < n {
		return nil, fmt.Errorf("compress_ratios has %d entries for %d layers", len(c.CompressRatios), n)
	}
	win := 0
	if c.SlidingWindow != nil {
		win = *c.SlidingWindow
	}
	smallest := math.MaxInt
	for _, r := range c.CompressRatios[:n] {
		if r > 0 {
			smallest = min(smallest, r)
		}
	}
	s.Indexer = Indexer{Heads: c.IndexNHeads, HeadDim: c.IndexHeadDim}
	s.LowRank = LowRank{OLoraRank: c.OLoraRank, OGroups: max(c.OGroups, 1), SharedKV: true}
	if c.QLoraRank != nil {
		s.LowRank.QLoraRank = *c.QLoraRank
	}
	return func(i int) Layer {
		r := c.CompressRatios[i]
		switch {
		case r == 0 && win > 0:
			return Layer{Attention: AttnSliding, Window: win}
		case r == smallest && c.IndexTopK > 0:
			return Layer{Attention: AttnDSA, TopK: c.IndexTopK, Compress: r}
		}
		return Layer{Attention: AttnFull, Compress: max(r, 1)}
	}, nil
}

// hfStateMixer reads the linear-attention or Mamba-2 geometry.
func hfStateMixer(s *Shape, c *hfConfig, kind string) {
	switch {
	case kind == AttnMamba2:
		s.State = StateMixer{Heads: c.MambaNumHeads, KeyDim: c.SSMStateSize, ValueDim: c.MambaHeadDim, Groups: max(c.NGroups, 1), ConvKernel: c.ConvKernel}
	case c.LinearAttnConfig != nil:
		l := c.LinearAttnConfig
		s.State = StateMixer{Heads: l.NumHeads, KeyHeads: l.NumHeads, KeyDim: l.HeadDim, ValueDim: l.HeadDim, ConvKernel: l.ConvKernel}
	default:
		s.State = StateMixer{Heads: c.LinearNumValueHeads, KeyHeads: c.LinearNumKeyHeads, KeyDim: c.LinearKeyHeadDim,
			ValueDim: c.LinearValueHeadDim, ConvKernel: c.LinearConvKernelDim}
	}
	if d, err := CanonicalDType(cmp.Or(c.SSMCacheDType, c.SSMDType)); err == nil {
		s.State.StateDType = d
	}
}

// hfBlockConfigs applies DeciLM's (Nemotron-NAS) per-block attention and
// FFN: skipped (no_op) or replaced by one linear layer (priced as
// skipped), grouped KV heads, and FFN widths from ffn_mult.
func hfBlockConfigs(s *Shape, c *hfConfig, per []Layer) error {
	if len(c.BlockConfigs) == 0 {
		return nil
	}
	if len(c.BlockConfigs) != len(per) {
		return fmt.Errorf("block_configs has %d entries for %d layers", len(c.BlockConfigs), len(per))
	}
	for i, b := range c.BlockConfigs {
		switch a := b.Attention; {
		case a.NoOp || a.ReplaceWithLinear:
			per[i].Attention = AttnNone
		case a.NHeadsInGroup > 0:
			per[i].KVHeads = s.Heads / a.NHeadsInGroup
		}
		switch f := b.FFN; {
		case f.NoOp || f.ReplaceWithLinear:
			per[i].MLP = MLPNone
		case f.FFNMult > 0:
			// transformers' _ffn_mult_to_intermediate_size: 2/3 of the
			// multiple, rounded up to 256.
			w := int(2 * f.FFNMult * float64(s.Hidden) / 3)
			per[i].Intermediate = (w + 255) / 256 * 256
		}
	}
	return nil
}

// pythonJSON rewrites the non-standard constants Python's json module
// writes (Infinity, -Infinity, NaN) as null outside strings, so
// encoding/json reads the file; none of them is a field steplab prices.
func pythonJSON(b []byte) []byte {
	if !bytes.Contains(b, []byte("Infinity")) && !bytes.Contains(b, []byte("NaN")) {
		return b
	}
	out := make([]byte, 0, len(b))
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		ch := b[i]
		if inString {
			out = append(out, ch)
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
			continue
		}
		matched := false
		for _, tok := range []string{"-Infinity", "Infinity", "NaN"} {
			if bytes.HasPrefix(b[i:], []byte(tok)) {
				out = append(out, "null"...)
				i += len(tok) - 1
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, ch)
			inString = ch == '"'
		}
	}
	return out
}

// withDefaults adds the family's defaults for the keys a config leaves
// out, noting each.
func withDefaults(data []byte, defaults map[string]any, arch string, note func(string, ...any)) ([]byte, error) {
	if len(defaults) == 0 {
		return data, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(defaults))
	for k := range defaults {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v, ok := m[k]; ok && !bytes.Equal(v, []byte("null")) {
			continue
		}
		b, _ := json.Marshal(defaults[k])
		m[k] = b
		note("%s absent: %s (the %s default)", k, b, arch)
	}
	return json.Marshal(m)
}
