package catalog

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Shape is a decoder-only transformer as one engine runs it: dense or
// mixture-of-experts MLPs, GQA or MLA (multi-head latent) attention,
// optionally sliding-window layers. TP is the tensor-parallel degree, and
// the per-GPU quantities (WeightBytes, KVBytesPerToken, GEMMParamsPerGPU)
// are for one of its TP ranks. The roofline prior and the memory model
// price a step from it; the dataset manifest records the same fields
// (docs/architecture.md#data-contract). Shapes come from Hugging Face config.json files
// (ParseHFConfig; the catalogue embeds several, see LookupModel).
type Shape struct {
	Name string `json:"name"`
	// Architecture is the config's architectures[0] (LlamaForCausalLM).
	Architecture string `json:"architecture,omitempty"`
	Layers       int    `json:"layers"`
	Hidden       int    `json:"hidden"`
	Heads        int    `json:"heads"`
	KVHeads      int    `json:"kv_heads"`
	// HeadDim is the attention head width (MLA: the query/key width,
	// qk_nope_head_dim + qk_rope_head_dim).
	HeadDim int `json:"head_dim"`
	// Intermediate is the dense MLP width (the dense layers of an MoE);
	// 0 is a shape without MLPs, as the part of a mixture of experts that
	// runs beside its routed experts can be (package sim/cluster).
	Intermediate int `json:"intermediate"`
	Vocab        int `json:"vocab"`
	// DType is the activation (compute) dtype: bf16, fp16 or fp32.
	DType string `json:"dtype"`
	// WeightDType is the dtype of the linear layers' weights ("" = DType;
	// fp8 for an fp8 checkpoint). Embeddings and norms stay in DType.
	WeightDType string `json:"weight_dtype,omitempty"`
	// KVDType is the KV-cache dtype ("" = DType; fp8 for an fp8 cache).
	KVDType string `json:"kv_dtype,omitempty"`
	// TP is the tensor-parallel degree (0 is read as 1).
	TP int `json:"tp"`
	// TiedEmbeddings: the LM head reuses the input embedding matrix.
	TiedEmbeddings bool `json:"tied_embeddings,omitempty"`
	// QKVBias: the q, k and v projections carry biases (Qwen2).
	QKVBias bool `json:"qkv_bias,omitempty"`
	// QKNormAcrossHeads: the query and key RMSNorms run over the whole
	// projection, every head together (MiniMax-M2's qk_norm_type
	// per_layer), not head by head; a TP rank holds part of it, so each
	// layer all-reduces the norms' variances across the TP group.
	QKNormAcrossHeads bool `json:"qk_norm_across_heads,omitempty"`
	// SlidingLayers layers attend over at most SlidingWindow tokens.
	SlidingWindow int `json:"sliding_window,omitempty"`
	SlidingLayers int `json:"sliding_layers,omitempty"`
	MLA           MLA `json:"mla,omitzero"`
	MoE           MoE `json:"moe,omitzero"`
	// AttnDType is the token mixers' weight dtype where a checkpoint keeps
	// them apart from the other linear layers ("" = WeightDType), as
	// NVFP4 checkpoints keep attention in bf16.
	AttnDType string `json:"attn_dtype,omitempty"`
	// AttnOutputGate: the query projection also yields a per-head output
	// gate (Qwen3-Next, Qwen3.5): twice its width.
	AttnOutputGate bool `json:"attn_output_gate,omitempty"`
	// MLPMatrices is the matrices of an MLP or expert: 3 (gated, the
	// default when 0) or 2 (relu², Nemotron-H).
	MLPMatrices int `json:"mlp_matrices,omitempty"`
	// Stack is the per-layer layout (run-length encoded) of a model whose
	// layers differ in more than sliding windows and dense-then-MoE MLPs:
	// hybrids of linear attention or Mamba-2 with attention, sparse
	// attention, MLP-only blocks, per-layer widths. When set, it is what
	// the parameter counts, the KV cache and the roofline read; the
	// scalar fields describe the full-attention layers.
	Stack []Layer `json:"stack,omitempty"`
	// State is the geometry of the stack's linear or Mamba-2 layers.
	State StateMixer `json:"state_mixer,omitzero"`
	// Indexer is the stack's dsa layers' key indexer.
	Indexer Indexer `json:"indexer,omitzero"`
	// LowRank are the stack's softmax layers' low-rank projections.
	LowRank LowRank `json:"low_rank,omitzero"`
	// Notes record what the shape's source did not state and was derived
	// or assumed ("head_dim = hidden/heads"), for the manifest.
	Notes []string `json:"notes,omitempty"`
	// File is where the shape was read ("builtin:models/..." or a path).
	File string `json:"file,omitempty"`
}

// MLA is DeepSeek's multi-head latent attention: the KV cache holds one
// compressed latent (KVLoraRank) plus a shared rotary key (QKRopeHeadDim)
// per token and layer, for all heads and replicated on every TP rank. The
// zero value means GQA attention.
type MLA struct {
	// QLoraRank is the query compression rank (0: queries are projected
	// directly, as DeepSeek-V2-Lite does).
	QLoraRank     int `json:"q_lora_rank,omitempty"`
	KVLoraRank    int `json:"kv_lora_rank"`
	QKNopeHeadDim int `json:"qk_nope_head_dim"`
	QKRopeHeadDim int `json:"qk_rope_head_dim"`
	VHeadDim      int `json:"v_head_dim"`
}

// MoE describes mixture-of-experts MLPs. The zero value means dense.
type MoE struct {
	Experts int `json:"experts"`
	// TopK experts are routed per token.
	TopK int `json:"top_k"`
	// ExpertIntermediate is the width of one routed expert's MLP.
	ExpertIntermediate int `json:"expert_intermediate"`
	// SharedExperts always-active experts of SharedIntermediate width each.
	SharedExperts      int `json:"shared_experts,omitempty"`
	SharedIntermediate int `json:"shared_intermediate,omitempty"`
	// DenseLayers layers have a dense MLP of Shape.Intermediate instead
	// (DeepSeek's first_k_dense_replace).
	DenseLayers int `json:"dense_layers,omitempty"`
	// DType is the experts' weight dtype when it differs from the other
	// weights (mxfp4 in gpt-oss); "" = the shape's weight dtype.
	DType string `json:"dtype,omitempty"`
	// Latent is the width routed experts run at (0: the hidden size):
	// Nemotron 3's latent MoE projects hidden states down to it and back.
	Latent int `json:"latent,omitempty"`
}

// IsMoE is whether the MLP is a mixture of experts.
func (s Shape) IsMoE() bool { return s.MoE.Experts > 0 }

// IsMLA is whether attention is multi-head latent attention.
func (s Shape) IsMLA() bool { return s.MLA.KVLoraRank > 0 }

// MoELayers is the number of layers with routed experts (Layers −
// MoE.DenseLayers; 0 for a dense model).
func (s Shape) MoELayers() int {
	if !s.IsMoE() {
		return 0
	}
	if len(s.Stack) > 0 {
		return s.stackCount(func(l Layer) bool { return l.MLP == MLPMoE })
	}
	return s.Layers - s.MoE.DenseLayers
}

// WithTP returns the shape run at tensor-parallel degree tp, named
// "<base>-TP<tp>" when tp > 1.
func (s Shape) WithTP(tp int) Shape {
	base := s.Name
	if i := strings.LastIndex(strings.ToLower(base), "-tp"); i > 0 {
		if _, err := strconv.Atoi(base[i+3:]); err == nil {
			base = base[:i]
		}
	}
	s.TP = tp
	s.Name = base
	if tp > 1 {
		s.Name = fmt.Sprintf("%s-TP%d", base, tp)
	}
	return s
}

// WithDTypes returns the shape with its weight and KV-cache dtypes set, as
// a scenario states them ("" or "auto": keep the checkpoint's). Weights
// bf16, fp16 or fp32 set the activation dtype too (vLLM's --dtype); a
// quantized dtype (fp8, nvfp4, nvfp4_a16, int4, mxfp4) quantizes every
// linear layer, attention and experts included. The KV cache takes bf16,
// fp16, fp32 or fp8.
func (s Shape) WithDTypes(weights, kv string) (Shape, error) {
	if w := strings.TrimSpace(weights); w != "" && !strings.EqualFold(w, "auto") {
		d, err := CanonicalDType(w)
		if err != nil {
			return s, fmt.Errorf("model: shape %s: weights: %w", s.Name, err)
		}
		switch d {
		case DTypeBF16, DTypeFP16, DTypeFP32:
			s.DType, s.WeightDType = d, ""
		default:
			s.WeightDType = d
		}
		s.MoE.DType, s.AttnDType = "", ""
		s = s.withNote("weights " + d + " (set by the scenario)")
	}
	if k := strings.TrimSpace(kv); k != "" && !strings.EqualFold(k, "auto") {
		d, err := CanonicalDType(k)
		if err != nil || DTypeBytes(d) < 1 {
			return s, fmt.Errorf("model: shape %s: kv cache dtype %q: use bf16, fp16, fp32, fp8 or auto", s.Name, k)
		}
		s.KVDType = d
		s = s.withNote("kv cache " + d + " (set by the scenario)")
	}
	return s, s.Validate()
}

// PrecisionNotes say, per part of the model, the dtype its GEMMs run at
// on hw where that is not its weights' (a fallback the roofline prices):
// fp8 weights on a GPU without fp8 tensor cores and nvfp4 on one without
// fp4 run weight-only, dequantized to the activation dtype.
func PrecisionNotes(hw Hardware, s Shape) []string {
	var out []string
	for _, p := range []struct{ part, w string }{{"attention", s.MixerDType()}, {"mlp", s.LinearDType()}, {"experts", s.ExpertDType()}} {
		if p.part == "experts" && !s.IsMoE() || p.w == s.DType || weightOnly[p.w] {
			continue
		}
		if g := s.GEMMDTypeOf(hw, p.w); g != p.w {
			out = append(out, fmt.Sprintf("%s weights %s: %s has no %s tensor cores; priced weight-only, GEMMs at %s", p.part, p.w, hw.Name, p.w, g))
		}
	}
	return out
}

// withNote returns the shape with a note appended (the notes slice is
// copied, never shared with the receiver's).
func (s Shape) withNote(n string) Shape {
	s.Notes = append(slices.Clip(s.Notes), n)
	return s
}

// Validate reports a shape the models cannot use: non-positive sizes,
// unknown dtypes, inconsistent MoE/MLA/sliding fields, or a TP degree that
// does not divide the attention heads (vLLM refuses those).
func (s Shape) Validate() error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("model: shape %s: %w", s.Name, err)
	}
	return nil
}

func (s Shape) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", s.Layers}, {"hidden", s.Hidden}, {"heads", s.Heads}, {"kv_heads", s.KVHeads},
		{"head_dim", s.HeadDim}, {"vocab", s.Vocab}} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be > 0, got %d", f.name, f.v)
		}
	}
	switch {
	case s.Intermediate < 0:
		return fmt.Errorf("intermediate must be >= 0, got %d", s.Intermediate)
	case s.Intermediate == 0 && s.IsMoE() && s.MoE.DenseLayers > 0:
		return fmt.Errorf("intermediate is 0 but moe.dense_layers is %d: give the dense layers' MLP width", s.MoE.DenseLayers)
	}
	if s.TP < 0 {
		return fmt.Errorf("tp must be >= 0, got %d", s.TP)
	}
	if err := s.validateDTypes(); err != nil {
		return err
	}
	tp := s.TPDegree()
	if s.Heads%tp != 0 {
		return fmt.Errorf("%d attention heads are not divisible by TP=%d", s.Heads, tp)
	}
	if s.KVHeads%tp != 0 && tp%s.KVHeads != 0 {
		return fmt.Errorf("%d KV heads and TP=%d: one must divide the other", s.KVHeads, tp)
	}
	if s.Heads%s.KVHeads != 0 {
		return fmt.Errorf("%d heads are not a multiple of %d KV heads", s.Heads, s.KVHeads)
	}
	if s.SlidingLayers < 0 || s.SlidingLayers > s.Layers || (s.SlidingLayers > 0) != (s.SlidingWindow > 0) {
		return fmt.Errorf("sliding_layers %d and sliding_window %d: both > 0 (at most layers) or both 0", s.SlidingLayers, s.SlidingWindow)
	}
	if m := s.MLA; m != (MLA{}) {
		if m.KVLoraRank <= 0 || m.QKNopeHeadDim <= 0 || m.QKRopeHeadDim <= 0 || m.VHeadDim <= 0 || m.QLoraRank < 0 {
			return fmt.Errorf("mla: kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim must be > 0, got %+v", m)
		}
	}
	if m := s.MoE; m != (MoE{}) {
		switch {
		case m.Experts <= 0 || m.ExpertIntermediate <= 0:
			return fmt.Errorf("moe: experts and expert_intermediate must be > 0, got %d and %d", m.Experts, m.ExpertIntermediate)
		case m.TopK < 1 || m.TopK > m.Experts:
			return fmt.Errorf("moe: top_k %d must be in [1, experts=%d]", m.TopK, m.Experts)
		case m.SharedExperts < 0 || (m.SharedExperts > 0) != (m.SharedIntermediate > 0):
			return fmt.Errorf("moe: shared_experts %d and shared_intermediate %d: both > 0 or both 0", m.SharedExperts, m.SharedIntermediate)
		case m.DenseLayers < 0 || m.DenseLayers >= s.Layers:
			return fmt.Errorf("moe: dense_layers %d must be in [0, layers=%d)", m.DenseLayers, s.Layers)
		}
	}
	if len(s.Stack) > 0 {
		return s.validateStack()
	}
	return nil
}

func (s Shape) validateDTypes() error {
	switch s.DType {
	case DTypeBF16, DTypeFP16, DTypeFP32:
	default:
		return fmt.Errorf("dtype %q: the activation dtype must be bf16, fp16 or fp32", s.DType)
	}
	for _, f := range []struct{ name, v string }{{"weight_dtype", s.WeightDType}, {"kv_dtype", s.KVDType}, {"moe.dtype", s.MoE.DType}, {"attn_dtype", s.AttnDType}} {
		if f.v == "" {
			continue
		}
		if _, ok := dtypeBytes[f.v]; !ok || (f.name == "kv_dtype" && DTypeBytes(f.v) < 1) {
			return fmt.Errorf("%s %q: use bf16, fp16, fp32, fp8, nvfp4, nvfp4_a16, mxfp4 or int4 (the kv cache: bf16, fp16, fp32 or fp8)", f.name, f.v)
		}
	}
	return nil
}

// TPDegree is the tensor-parallel degree, 1 when TP is unset.
func (s Shape) TPDegree() int {
	if s.TP <= 0 {
		return 1
	}
	return s.TP
}

// LinearDType is the linear layers' dtype.
func (s Shape) LinearDType() string {
	if s.WeightDType != "" {
		return s.WeightDType
	}
	return s.DType
}

// KVCacheDType is the KV cache's dtype.
func (s Shape) KVCacheDType() string {
	if s.KVDType != "" {
		return s.KVDType
	}
	return s.DType
}

// ExpertDType is the routed experts' weight dtype: MoE.DType, else the
// weight dtype, else the activation dtype.
func (s Shape) ExpertDType() string {
	if s.MoE.DType != "" {
		return s.MoE.DType
	}
	return s.LinearDType()
}

// GEMMDType is the dtype the GEMMs run at: fp8 where the weights are fp8
// and the device has fp8 tensor cores (W8A8), else the activation dtype
// (weight-only quantization dequantizes to it).
func (s Shape) GEMMDType(hw Hardware) string { return s.GEMMDTypeOf(hw, s.LinearDType()) }

// GEMMDTypeOf is the dtype a GEMM of weights w runs at: w itself where it
// quantizes activations too (fp8, nvfp4) and the device has tensor cores
// for it, else the activation dtype: weight-only formats, and the
// fallback (weight-only) of fp8 on an A100 or nvfp4 before Blackwell.
func (s Shape) GEMMDTypeOf(hw Hardware, w string) string {
	if !weightOnly[w] && hw.PeakTFLOPSFor(w) > 0 {
		return w
	}
	return s.DType
}

// MixerDType is the token mixers' weight dtype.
func (s Shape) MixerDType() string { return cmp.Or(s.AttnDType, s.LinearDType()) }

// KVHeadsPerGPU is the KV heads one TP rank holds: KVHeads/TP, or 1 (a
// replicated head) when TP exceeds KVHeads, as vLLM does.
func (s Shape) KVHeadsPerGPU() int {
	n := s.KVHeads / s.TPDegree()
	if n < 1 {
		n = 1
	}
	return n
}

// layerParams are one layer's parameters by kind, for one TP rank or the
// whole model.
type layerParams struct {
	attn   float64 // attention projections (+ biases, MLA norms)
	mlp    float64 // a dense MLP (gate, up, down)
	expert float64 // one routed expert
	shared float64 // the shared experts together
	router float64 // the router (replicated)
	norms  float64 // RMSNorms (replicated)
}

func (s Shape) layerParams(perGPU bool) layerParams {
	h, hd := float64(s.Hidden), float64(s.HeadDim)
	qHeads, kvHeads := float64(s.Heads), float64(s.KVHeads)
	inter := float64(s.Intermediate)
	tp := 1.0
	if perGPU {
		tp = float64(s.TPDegree())
		qHeads /= tp
		kvHeads = float64(s.KVHeadsPerGPU())
		inter /= tp
	}
	var p layerParams
	if s.IsMLA() {
		m := s.MLA
		qk, kvr, rope, v := float64(m.QKNopeHeadDim+m.QKRopeHeadDim), float64(m.KVLoraRank), float64(m.QKRopeHeadDim), float64(m.VHeadDim)
		if m.QLoraRank > 0 {
			qr := float64(m.QLoraRank)
			p.attn = h*qr + qr + qr*qHeads*qk // q_a (replicated), its norm, q_b
		} else {
			p.attn = h * qHeads * qk
		}
		p.attn += h*(kvr+rope) + kvr // kv_a (replicated) and its norm
		p.attn += kvr * qHeads * (float64(m.QKNopeHeadDim) + v)
		p.attn += qHeads * v * h
	} else {
		p.attn = h*qHeads*hd + 2*h*kvHeads*hd + qHeads*hd*h // q, k and v, o
		if s.QKVBias {
			p.attn += (qHeads + 2*kvHeads) * hd
		}
	}
	mats := float64(cmp.Or(s.MLPMatrices, 3)) // gate, up, down
	p.mlp = mats * h * inter
	if s.IsMoE() {
		m := s.MoE
		p.expert = mats * h * float64(m.ExpertIntermediate) / tp
		p.shared = float64(m.SharedExperts) * mats * h * float64(m.SharedIntermediate) / tp
		if m.Latent > 0 { // experts at the latent width, and the projections to and from it
			lat := float64(m.Latent)
			p.expert = mats * lat * float64(m.ExpertIntermediate) / tp
			p.shared += 2 * h * lat / tp
		}
		p.router = h * float64(m.Experts)
	}
	p.norms = 2 * h // input and post-attention RMSNorm
	return p
}

// ParamSums totals parameters over the layers: linear weights outside the
// routed experts, the routed experts' (all of them, or the top-k a token
// uses) and the replicated norms, for one rank or the whole model.
func (s Shape) ParamSums(perGPU, activeOnly bool) (linear, experts, norms float64) {
	if len(s.Stack) > 0 {
		attn, other, experts, norms := s.stackParams(perGPU, activeOnly)
		return attn + other, experts, norms
	}
	p := s.layerParams(perGPU)
	layers := float64(s.Layers)
	dense, moe := layers, 0.0
	if s.IsMoE() {
		dense, moe = float64(s.MoE.DenseLayers), float64(s.MoELayers())
		n := float64(s.MoE.Experts)
		if activeOnly {
			n = float64(s.MoE.TopK)
		}
		experts = moe * n * p.expert
	}
	linear = layers*p.attn + dense*p.mlp + moe*(p.shared+p.router)
	return linear, experts, layers * p.norms
}

// embeddingParamsPerGPU is the vocabulary-parallel share of the input
// embedding one rank holds.
func (s Shape) embeddingParamsPerGPU() float64 {
	return float64(s.Vocab) * float64(s.Hidden) / float64(s.TPDegree())
}

// ParamCount is the total parameter count of the model (all TP ranks
// together, KV heads counted once): embeddings, decoder layers with every
// expert, final norm and, unless tied, the LM head. Biases of experts and
// attention sinks (gpt-oss) and per-head q/k norms (Qwen3) are not
// counted: under 0.1% of any catalogue model.
func (s Shape) ParamCount() int64 { return s.paramCount(false) }

// ActiveParamCount is the parameters one token uses: ParamCount with
// top-k routed experts instead of all (embeddings counted, as DeepSeek,
// Mistral and Qwen state their active counts).
func (s Shape) ActiveParamCount() int64 { return s.paramCount(true) }

func (s Shape) paramCount(active bool) int64 {
	linear, experts, norms := s.ParamSums(false, active)
	emb := float64(s.Vocab) * float64(s.Hidden)
	n := emb + linear + experts + norms + float64(s.Hidden)
	if !s.TiedEmbeddings {
		n += emb
	}
	return int64(n)
}

// LMHeadParamsPerGPU is the LM-head share (vocabulary-parallel) one rank
// holds and multiplies per sampled token.
func (s Shape) LMHeadParamsPerGPU() float64 { return s.embeddingParamsPerGPU() }

// GEMMParamsPerGPU is the weights one rank multiplies per token in the
// decoder layers (projections, dense MLPs, the top-k routed and the shared
// experts, the router; not the embedding lookup, not the LM head, which
// runs once per sampled token): the 2·params FLOPs per token of the
// roofline.
func (s Shape) GEMMParamsPerGPU() float64 {
	linear, experts, _ := s.ParamSums(true, true)
	return linear + experts
}

// WeightBytes is the weights one TP rank holds, in bytes, each part at its
// dtype: linear layers at the weight dtype (experts at theirs), embedding,
// LM head and norms at the activation dtype. Projections, MLPs and experts
// are sharded by TP (replicated KV heads where TP > KVHeads); the LM head
// and the embedding are vocabulary-parallel.
func (s Shape) WeightBytes() int64 { return int64(s.weightBytes(false)) }

func (s Shape) weightBytes(activeOnly bool) float64 {
	linear, experts, norms := s.ParamSums(true, activeOnly)
	other := norms + float64(s.Hidden) + s.embeddingParamsPerGPU()
	if !s.TiedEmbeddings {
		other += s.LMHeadParamsPerGPU()
	}
	ab, wb, eb := DTypeBytes(s.DType), DTypeBytes(s.LinearDType()), DTypeBytes(s.ExpertDType())
	if wb == ab && eb == ab && s.MixerDType() == s.LinearDType() {
		return (linear + experts + other) * ab
	}
	if s.MixerDType() != s.LinearDType() {
		attn := s.AttnParams(true)
		return attn*DTypeBytes(s.MixerDType()) + (linear-attn)*wb + experts*eb + other*ab
	}
	return linear*wb + experts*eb + other*ab
}

// AttnParams is the token mixers' parameters over every layer.
func (s Shape) AttnParams(perGPU bool) float64 {
	if len(s.Stack) > 0 {
		attn, _, _, _ := s.stackParams(perGPU, false)
		return attn
	}
	return float64(s.Layers) * s.layerParams(perGPU).attn
}

// StreamedWeightBytes is what one rank reads from HBM per forward pass
// that touches every expert: all its weights but the input embedding
// table, of which only the rows of the step's tokens are gathered (a tied
// table is read whole by the LM head). A dense model reads this every
// step; an MoE reads the experts its tokens route to (StreamedWeightBytesAt).
func (s Shape) StreamedWeightBytes() int64 {
	if s.TiedEmbeddings {
		return s.WeightBytes()
	}
	return s.WeightBytes() - int64(s.embeddingParamsPerGPU()*DTypeBytes(s.DType))
}

// ExpertBytesPerGPU is one routed expert's weights on one rank.
func (s Shape) ExpertBytesPerGPU() float64 {
	return s.layerParams(true).expert * DTypeBytes(s.ExpertDType())
}

// StreamedWeightBytesAt is the weight bytes one rank reads in a step of
// tokens tokens: the non-expert weights, plus in each MoE layer the
// experts the step's tokens route to, ExpectedExperts of them (uniform
// routing). It is StreamedWeightBytes for a dense model.
func (s Shape) StreamedWeightBytesAt(tokens float64) float64 {
	all := float64(s.StreamedWeightBytes())
	if !s.IsMoE() {
		return all
	}
	m := s.MoE
	perLayer := s.ExpertBytesPerGPU()
	moe := float64(s.MoELayers())
	return all - moe*float64(m.Experts)*perLayer + moe*ExpectedExperts(m.Experts, m.TopK, tokens)*perLayer
}

// KVLayerBytes is the KV cache one rank stores per token in one layer: K
// and V of its KV heads (GQA), or the latent and the rotary key (MLA, the
// same on every rank).
func (s Shape) KVLayerBytes() int64 {
	b := int64(DTypeBytes(s.KVCacheDType()))
	if s.IsMLA() {
		return int64(s.MLA.KVLoraRank+s.MLA.QKRopeHeadDim) * b
	}
	return int64(2*s.KVHeadsPerGPU()*s.HeadDim) * b
}

// FullLayers is the layers attending over the whole context.
func (s Shape) FullLayers() int { return s.Layers - s.SlidingLayers }

// KVBytesPerToken is the KV cache one rank stores per token of context:
// every full-attention layer's. Sliding-window layers hold at most
// SlidingWindow tokens per request whatever the context, so they are not
// a per-token cost (SlidingKVBytesPerRequest) — unless every layer slides,
// when they are counted here as full attention (an upper bound past the
// window).
func (s Shape) KVBytesPerToken() int64 {
	if len(s.Stack) > 0 {
		if perToken, _, _ := s.stackKVBytes(); perToken > 0 {
			return int64(perToken)
		}
		groups, _ := s.KVGroups() // every layer windowed: as full attention
		n := 0.0
		for _, g := range groups {
			n += g.KV
		}
		return int64(n)
	}
	layers := s.FullLayers()
	if layers == 0 {
		layers = s.Layers
	}
	return int64(layers) * s.KVLayerBytes()
}

// SlidingKVBytesPerRequest is the most KV one request holds in the
// sliding-window layers (0 without any, or when every layer slides).
func (s Shape) SlidingKVBytesPerRequest() int64 {
	if len(s.Stack) > 0 {
		_, windows, _ := s.stackKVBytes()
		return int64(windows)
	}
	if s.FullLayers() == 0 {
		return 0
	}
	return int64(s.SlidingLayers) * int64(s.SlidingWindow) * s.KVLayerBytes()
}

// AttnPairFLOPsPerLayer is the attention FLOPs one rank spends per
// (query token, key token) pair in one layer, 2 FLOPs per multiply-add.
// GQA: QKᵀ and AV over the head width. MLA decodes in the absorbed form
// (QKᵀ over latent + rotary key, AV over the latent) and prefills in the
// expanded one (qk and v head widths), as vLLM runs it.
func (s Shape) AttnPairFLOPsPerLayer(decode bool) float64 {
	heads := float64(s.Heads / s.TPDegree())
	if s.IsMLA() {
		m := s.MLA
		if decode {
			return 2 * heads * float64(2*m.KVLoraRank+m.QKRopeHeadDim)
		}
		return 2 * heads * float64(m.QKNopeHeadDim+m.QKRopeHeadDim+m.VHeadDim)
	}
	return 4 * heads * float64(s.HeadDim)
}

// AttnFLOPsPerPair is the attention FLOPs one rank spends per
// (query token, key token) pair over every layer (prefill form; a
// sliding-window layer pays it only for keys inside its window).
func (s Shape) AttnFLOPsPerPair() float64 {
	return float64(s.Layers) * s.AttnPairFLOPsPerLayer(false)
}
