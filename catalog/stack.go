package catalog

import (
	"cmp"
	"fmt"
	"slices"
)

// Attention (token-mixer) kinds of a layer.
const (
	AttnFull    = "full"    // softmax attention over the whole context
	AttnSliding = "sliding" // over the last Window tokens
	AttnChunked = "chunked" // within chunks of Window tokens (Llama 4): held and read as a window
	AttnMLA     = "mla"     // multi-head latent attention (Shape.MLA)
	AttnDSA     = "dsa"     // MLA reading the TopK keys a lightning indexer selects (DeepSeek sparse attention)
	AttnLinear  = "linear"  // gated delta net / linear attention: a constant state per request (Shape.State)
	AttnMamba2  = "mamba2"  // Mamba-2 state-space mixer: a constant state per request (Shape.State)
	AttnNone    = "none"    // no token mixer (an MLP-only block)
)

// MLP kinds of a layer.
const (
	MLPDense = "dense" // a dense MLP of the layer's Intermediate (else Shape.Intermediate)
	MLPMoE   = "moe"   // routed experts (Shape.MoE), with its shared experts
	MLPNone  = "none"  // no MLP (a mixer-only block)
)

// Layer is a run of Count identical decoder layers of a Stack. Zero
// geometry fields take the shape's (Heads, KVHeads, HeadDim,
// Intermediate).
type Layer struct {
	Count     int    `json:"count"`
	Attention string `json:"attention"`
	// Window is the keys a sliding or chunked layer's query sees.
	Window int `json:"window,omitempty"`
	// TopK is the keys a sparse (dsa) layer attends to per query.
	TopK     int `json:"top_k,omitempty"`
	Heads    int `json:"heads,omitempty"`
	KVHeads  int `json:"kv_heads,omitempty"`
	HeadDim  int `json:"head_dim,omitempty"`
	VHeadDim int `json:"v_head_dim,omitempty"`
	// Compress stores one KV entry per Compress tokens (DeepSeek-V4's
	// compressed attention); 0 or 1: one per token.
	Compress     int    `json:"compress,omitempty"`
	MLP          string `json:"mlp"`
	Intermediate int    `json:"intermediate,omitempty"`
}

// StateMixer is the geometry of a shape's linear-attention or Mamba-2
// layers (Layer.Attention linear or mamba2).
type StateMixer struct {
	// Heads value heads of ValueDim; KeyHeads key heads of KeyDim (gated
	// delta net). Mamba-2: Heads of ValueDim (mamba_head_dim), Groups
	// groups of state KeyDim (ssm_state_size).
	Heads    int `json:"heads"`
	KeyHeads int `json:"key_heads,omitempty"`
	KeyDim   int `json:"key_dim"`
	ValueDim int `json:"value_dim"`
	Groups   int `json:"groups,omitempty"`
	// ConvKernel is the short causal convolution's width.
	ConvKernel int `json:"conv_kernel"`
	// StateDType is the recurrent state's dtype ("" = the activation
	// dtype; fp32 where the config's mamba_ssm_cache_dtype says so).
	StateDType string `json:"state_dtype,omitempty"`
}

// LowRank is a softmax layer's low-rank projections (DeepSeek-V4):
// queries through a QLoraRank bottleneck, the output through OGroups
// groups of OLoraRank each, and one shared K=V entry per KV head.
type LowRank struct {
	QLoraRank int  `json:"q_lora_rank,omitempty"`
	OLoraRank int  `json:"o_lora_rank,omitempty"`
	OGroups   int  `json:"o_groups,omitempty"`
	SharedKV  bool `json:"shared_kv,omitempty"`
}

// Indexer is DeepSeek sparse attention's lightning indexer: Heads query
// heads of HeadDim scoring every cached key (one HeadDim key per token,
// fp8 with a 4-byte scale).
type Indexer struct {
	Heads   int `json:"heads"`
	HeadDim int `json:"head_dim"`
}

// compactStack run-length encodes per-layer specs.
func compactStack(per []Layer) []Layer {
	var out []Layer
	for _, l := range per {
		l.Count = 1
		if n := len(out); n > 0 {
			prev := out[n-1]
			prev.Count = 1
			if prev == l {
				out[n-1].Count++
				continue
			}
		}
		out = append(out, l)
	}
	return out
}

func (s Shape) stackCount(keep func(Layer) bool) int {
	n := 0
	for _, l := range s.Stack {
		if keep(l) {
			n += l.Count
		}
	}
	return n
}

// geometry is a softmax layer's heads (per rank when perGPU), head and
// value widths.
func (s Shape) geometry(l Layer, perGPU bool) (heads, kvHeads, hd, vhd float64) {
	h, kv, d := cmp.Or(l.Heads, s.Heads), cmp.Or(l.KVHeads, s.KVHeads), cmp.Or(l.HeadDim, s.HeadDim)
	v := cmp.Or(l.VHeadDim, d)
	if perGPU {
		tp := s.TPDegree()
		h, kv = max(1, h/tp), max(1, kv/tp)
	}
	return float64(h), float64(kv), float64(d), float64(v)
}

// stackAttnParams is one layer's token-mixer parameters.
func (s Shape) stackAttnParams(l Layer, perGPU bool) float64 {
	h := float64(s.Hidden)
	tp := 1.0
	if perGPU {
		tp = float64(s.TPDegree())
	}
	m := s.State
	switch l.Attention {
	case AttnMLA, AttnDSA:
		p := s.layerParams(perGPU).attn
		if !s.IsMLA() { // sparse attention over GQA heads
			g := l
			g.Attention = AttnFull
			p = s.stackAttnParams(g, perGPU)
		}
		if l.Attention == AttnDSA {
			ih, id := float64(s.Indexer.Heads), float64(s.Indexer.HeadDim)
			p += float64(cmp.Or(s.MLA.QLoraRank, s.Hidden))*ih*id + h*id + h*ih // wq_b, wk, weights_proj (replicated)
		}
		return p
	case AttnLinear:
		k, v := float64(m.KeyHeads*m.KeyDim), float64(m.Heads*m.ValueDim)
		return (h*(2*k+2*v+2*float64(m.Heads)) + (2*k+v)*float64(m.ConvKernel) + v*h) / tp
	case AttnMamba2:
		inner, bc := float64(m.Heads*m.ValueDim), float64(2*m.Groups*m.KeyDim)
		return (h*(2*inner+bc+float64(m.Heads)) + (inner+bc)*float64(m.ConvKernel) + inner*h) / tp
	case AttnNone:
		return 0
	}
	heads, kv, hd, vhd := s.geometry(l, perGPU)
	lr := s.LowRank
	q, o, kvw := h*heads*hd, heads*vhd*h, hd+vhd
	if s.AttnOutputGate {
		q *= 2
	}
	if lr.QLoraRank > 0 { // q_a (replicated) and q_b
		q = h*float64(lr.QLoraRank) + float64(lr.QLoraRank)*heads*hd
	}
	if lr.OLoraRank > 0 { // per group to the rank, then all groups to hidden
		o = heads*vhd*float64(lr.OLoraRank) + float64(lr.OGroups*lr.OLoraRank)*h/tp
	}
	if lr.SharedKV {
		kvw = hd
	}
	p := q + h*kv*kvw + o
	if s.QKVBias {
		p += heads*hd + kv*(hd+vhd)
	}
	return p
}

// stackParams totals a stack's parameters by part, like paramSums.
func (s Shape) stackParams(perGPU, activeOnly bool) (attn, other, experts, norms float64) {
	p := s.layerParams(perGPU)
	h := float64(s.Hidden)
	tp := 1.0
	if perGPU {
		tp = float64(s.TPDegree())
	}
	mats := float64(cmp.Or(s.MLPMatrices, 3))
	n := float64(s.MoE.Experts)
	if activeOnly {
		n = float64(s.MoE.TopK)
	}
	for _, l := range s.Stack {
		c := float64(l.Count)
		attn += c * s.stackAttnParams(l, perGPU)
		switch l.MLP {
		case MLPDense:
			other += c * mats * h * float64(cmp.Or(l.Intermediate, s.Intermediate)) / tp
		case MLPMoE:
			other += c * (p.shared + p.router)
			experts += c * n * p.expert
		}
		norms += c * 2 * h
	}
	return attn, other, experts, norms
}

// KVGroup is the KV one rank reads per token for some layers (KV), and
// the attention FLOPs per (query, key) pair (Pair; DecPair decoding), over
// at most Window keys per request (0: the whole context). HeldPerToken is
// whether the cache keeps every token of it (the full-context layers).
type KVGroup struct {
	Window            float64
	KV, Pair, DecPair float64
	HeldPerToken      bool
}

// KVGroups lists a stack's KV read groups (full context first, then
// by window) and its constant state per request, per rank.
func (s Shape) KVGroups() (groups []KVGroup, state float64) {
	kvb := DTypeBytes(s.KVCacheDType())
	full := KVGroup{HeldPerToken: true}
	wins := map[int]*KVGroup{}
	win := func(w int) *KVGroup {
		if wins[w] == nil {
			wins[w] = &KVGroup{Window: float64(w)}
		}
		return wins[w]
	}
	m := s.State
	tp := float64(s.TPDegree())
	sb := DTypeBytes(cmp.Or(m.StateDType, s.DType))
	for _, l := range s.Stack {
		c := float64(l.Count)
		heads, kv, hd, vhd := s.geometry(l, true)
		kvw := hd + vhd
		if s.LowRank.SharedKV {
			kvw = hd
		}
		layerKV := kv * kvw * kvb / float64(max(1, l.Compress))
		pair := 2 * heads * (hd + vhd)
		switch l.Attention {
		case AttnFull:
			full.KV += c * layerKV
			full.Pair += c * pair
			full.DecPair += c * pair
		case AttnSliding, AttnChunked:
			g := win(l.Window)
			g.KV += c * layerKV
			g.Pair += c * pair
			g.DecPair += c * pair
		case AttnMLA, AttnDSA:
			lat, pre, dec := layerKV, pair, pair
			if s.IsMLA() {
				lat, pre, dec = float64(s.KVLayerBytes()), s.AttnPairFLOPsPerLayer(false), s.AttnPairFLOPsPerLayer(true)
			}
			if l.Attention == AttnMLA {
				full.KV += c * lat
				full.Pair += c * pre
				full.DecPair += c * dec
				continue
			}
			// The indexer scores every key; attention reads the top-k.
			ix := float64(s.Indexer.HeadDim + 4)
			full.KV += c * ix
			full.Pair += c * 2 * float64(s.Indexer.Heads*s.Indexer.HeadDim)
			full.DecPair += c * 2 * float64(s.Indexer.Heads*s.Indexer.HeadDim)
			g := win(l.TopK)
			g.KV += c * lat
			g.Pair += c * pre
			g.DecPair += c * dec
			g.HeldPerToken = true
		case AttnLinear:
			k, v := float64(m.KeyHeads*m.KeyDim), float64(m.Heads*m.ValueDim)
			state += c * (float64(m.Heads*m.KeyDim*m.ValueDim)*sb + (2*k+v)*float64(m.ConvKernel-1)*DTypeBytes(s.DType)) / tp
		case AttnMamba2:
			inner, bc := float64(m.Heads*m.ValueDim), float64(2*m.Groups*m.KeyDim)
			state += c * (float64(m.Heads*m.ValueDim*m.KeyDim)*sb + (inner+bc)*float64(m.ConvKernel-1)*DTypeBytes(s.DType)) / tp
		}
	}
	groups = append(groups, full)
	keys := make([]int, 0, len(wins))
	for w := range wins {
		keys = append(keys, w)
	}
	slices.Sort(keys)
	for _, w := range keys {
		groups = append(groups, *wins[w])
	}
	return groups, state
}

// stackKVBytes is the KV a stack holds per token of context and, per
// request, at most in its windows and in its constant states.
func (s Shape) stackKVBytes() (perToken, windows, state float64) {
	groups, state := s.KVGroups()
	for _, g := range groups {
		if g.HeldPerToken {
			perToken += g.KV
		} else {
			windows += g.Window * g.KV
		}
	}
	return perToken, windows, state
}

// StateBytesPerRequest is the constant state one request holds in the
// linear-attention and Mamba-2 layers, per rank (0 without any).
func (s Shape) StateBytesPerRequest() int64 {
	if len(s.Stack) == 0 {
		return 0
	}
	_, _, state := s.stackKVBytes()
	return int64(state)
}

// validateStack checks a stack's kinds and that it has Layers layers.
func (s Shape) validateStack() error {
	n := 0
	for i, l := range s.Stack {
		if l.Count <= 0 {
			return fmt.Errorf("stack[%d]: count must be > 0, got %d", i, l.Count)
		}
		n += l.Count
		switch l.Attention {
		case AttnFull, AttnNone:
		case AttnSliding, AttnChunked:
			if l.Window <= 0 {
				return fmt.Errorf("stack[%d]: %s attention needs a window > 0", i, l.Attention)
			}
		case AttnMLA, AttnDSA:
			if l.Attention == AttnMLA && !s.IsMLA() {
				return fmt.Errorf("stack[%d]: %s attention needs the shape's mla ranks", i, l.Attention)
			}
			if l.Attention == AttnDSA && (l.TopK <= 0 || s.Indexer.Heads <= 0 || s.Indexer.HeadDim <= 0) {
				return fmt.Errorf("stack[%d]: dsa attention needs top_k and the indexer's heads and head_dim > 0", i)
			}
		case AttnLinear, AttnMamba2:
			if m := s.State; m.Heads <= 0 || m.KeyDim <= 0 || m.ValueDim <= 0 || m.ConvKernel <= 0 {
				return fmt.Errorf("stack[%d]: %s layers need state_mixer heads, key_dim, value_dim and conv_kernel > 0", i, l.Attention)
			}
		default:
			return fmt.Errorf("stack[%d]: attention %q: use full, sliding, chunked, mla, dsa, linear, mamba2 or none", i, l.Attention)
		}
		switch l.MLP {
		case MLPDense, MLPNone:
		case MLPMoE:
			if !s.IsMoE() {
				return fmt.Errorf("stack[%d]: moe layer in a shape without moe experts", i)
			}
		default:
			return fmt.Errorf("stack[%d]: mlp %q: use dense, moe or none", i, l.MLP)
		}
	}
	if n != s.Layers {
		return fmt.Errorf("stack has %d layers, the shape %d", n, s.Layers)
	}
	return nil
}
