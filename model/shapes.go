package model

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Shape is a dense decoder-only transformer (Llama/Qwen family: GQA
// attention, SwiGLU MLP, RMSNorm) as one engine runs it: TP is the tensor
// parallel degree, and the per-GPU quantities (WeightBytes, KVBytesPerToken,
// GEMMParamsPerGPU) are for one of its TP ranks. The roofline prior and the
// memory model price a step from it; the dataset manifest records the same
// fields (DESIGN.md §5).
type Shape struct {
	Name         string `json:"name"`
	Layers       int    `json:"layers"`
	Hidden       int    `json:"hidden"`
	Heads        int    `json:"heads"`
	KVHeads      int    `json:"kv_heads"`
	HeadDim      int    `json:"head_dim"`
	Intermediate int    `json:"intermediate"`
	Vocab        int    `json:"vocab"`
	// DTypeBytes is the width of weights and activations (2 for bf16).
	DTypeBytes int `json:"dtype_bytes"`
	// KVDTypeBytes is the width of a KV-cache element; 0 means DTypeBytes
	// (1 for an fp8 KV cache).
	KVDTypeBytes int `json:"kv_dtype_bytes,omitempty"`
	// TP is the tensor-parallel degree (0 is read as 1).
	TP int `json:"tp"`
	// TiedEmbeddings: the LM head reuses the input embedding matrix.
	TiedEmbeddings bool `json:"tied_embeddings,omitempty"`
	// QKVBias: the q, k and v projections carry biases (Qwen2).
	QKVBias bool `json:"qkv_bias,omitempty"`
}

// Presets. Numbers are the models' Hugging Face config.json values.
var (
	// Llama318B is meta-llama/Llama-3.1-8B: 8.03B parameters, 16.1 GB bf16,
	// 128 KiB of KV per token.
	Llama318B = Shape{Name: "Llama-3.1-8B", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
		Intermediate: 14336, Vocab: 128256, DTypeBytes: 2, TP: 1}
	// Llama3170B is meta-llama/Llama-3.1-70B at TP=1 (141 GB of weights:
	// fits no single H100 or H200); see WithTP and the -TP4/-TP8 presets.
	Llama3170B = Shape{Name: "Llama-3.1-70B", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128,
		Intermediate: 28672, Vocab: 128256, DTypeBytes: 2, TP: 1}
	// Qwen257B is Qwen/Qwen2.5-7B: 7.62B parameters, untied embeddings,
	// biased q/k/v, 56 KiB of KV per token (4 KV heads).
	Qwen257B = Shape{Name: "Qwen2.5-7B", Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4, HeadDim: 128,
		Intermediate: 18944, Vocab: 152064, DTypeBytes: 2, TP: 1, QKVBias: true}
	// MistralNemo12B is mistralai/Mistral-Nemo-Base-2407: 12.2B
	// parameters, 24.5 GB bf16, 160 KiB of KV per token; its head_dim (128)
	// is not hidden/heads (160).
	MistralNemo12B = Shape{Name: "Mistral-Nemo-12B", Layers: 40, Hidden: 5120, Heads: 32, KVHeads: 8, HeadDim: 128,
		Intermediate: 14336, Vocab: 131072, DTypeBytes: 2, TP: 1}
	// Tiny is a 2-layer toy for CPU tests and examples; no real model has it.
	Tiny = Shape{Name: "tiny", Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, HeadDim: 16,
		Intermediate: 128, Vocab: 256, DTypeBytes: 2, TP: 1, TiedEmbeddings: true}
)

var shapePresets = func() map[string]Shape {
	m := map[string]Shape{}
	for _, s := range []Shape{Llama318B, Llama3170B, Llama3170B.WithTP(4), Llama3170B.WithTP(8), Qwen257B, MistralNemo12B, Tiny} {
		m[strings.ToLower(s.Name)] = s
	}
	return m
}()

// ShapeNames lists the preset names.
func ShapeNames() []string {
	out := make([]string, 0, len(shapePresets))
	for _, s := range shapePresets {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// ShapeByName returns a preset by name, case-insensitively. A "-TP<n>"
// suffix on any preset sets its tensor-parallel degree
// ("Llama-3.1-8B-TP2"). An unknown name is an error that lists the valid
// ones.
func ShapeByName(name string) (Shape, error) {
	k := strings.ToLower(strings.TrimSpace(name))
	if s, ok := shapePresets[k]; ok {
		return s, nil
	}
	if i := strings.LastIndex(k, "-tp"); i > 0 {
		if tp, err := strconv.Atoi(k[i+3:]); err == nil && tp > 0 {
			if s, ok := shapePresets[k[:i]]; ok {
				s = s.WithTP(tp)
				if err := s.Validate(); err != nil {
					return Shape{}, err
				}
				return s, nil
			}
		}
	}
	return Shape{}, fmt.Errorf("model: unknown model shape %q: valid names are %s (append -TP<n> to set tensor parallelism)",
		name, strings.Join(ShapeNames(), ", "))
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

// Validate reports a shape the models cannot use: non-positive sizes, or a
// TP degree that does not divide the attention heads (vLLM refuses those).
func (s Shape) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", s.Layers}, {"hidden", s.Hidden}, {"heads", s.Heads}, {"kv_heads", s.KVHeads},
		{"head_dim", s.HeadDim}, {"intermediate", s.Intermediate}, {"vocab", s.Vocab}, {"dtype_bytes", s.DTypeBytes}} {
		if f.v <= 0 {
			return fmt.Errorf("model: shape %s: %s must be > 0, got %d", s.Name, f.name, f.v)
		}
	}
	if s.KVDTypeBytes < 0 || s.TP < 0 {
		return fmt.Errorf("model: shape %s: kv_dtype_bytes and tp must be >= 0", s.Name)
	}
	tp := s.tp()
	if s.Heads%tp != 0 {
		return fmt.Errorf("model: shape %s: %d attention heads are not divisible by TP=%d", s.Name, s.Heads, tp)
	}
	if s.KVHeads%tp != 0 && tp%s.KVHeads != 0 {
		return fmt.Errorf("model: shape %s: %d KV heads and TP=%d: one must divide the other", s.Name, s.KVHeads, tp)
	}
	if s.Heads%s.KVHeads != 0 {
		return fmt.Errorf("model: shape %s: %d heads are not a multiple of %d KV heads", s.Name, s.Heads, s.KVHeads)
	}
	return nil
}

func (s Shape) tp() int {
	if s.TP <= 0 {
		return 1
	}
	return s.TP
}

func (s Shape) kvDType() int {
	if s.KVDTypeBytes > 0 {
		return s.KVDTypeBytes
	}
	return s.DTypeBytes
}

// KVHeadsPerGPU is the KV heads one TP rank holds: KVHeads/TP, or 1 (a
// replicated head) when TP exceeds KVHeads, as vLLM does.
func (s Shape) KVHeadsPerGPU() int {
	n := s.KVHeads / s.tp()
	if n < 1 {
		n = 1
	}
	return n
}

// layerParams returns the parameters of one decoder layer: those sharded
// across TP ranks (projections, per GPU) and those replicated (norms).
func (s Shape) layerParams(perGPU bool) (sharded, replicated float64) {
	h, hd := float64(s.Hidden), float64(s.HeadDim)
	qHeads, kvHeads := float64(s.Heads), float64(s.KVHeads)
	inter := float64(s.Intermediate)
	if perGPU {
		tp := float64(s.tp())
		qHeads /= tp
		kvHeads = float64(s.KVHeadsPerGPU())
		inter /= tp
	}
	q := h * qHeads * hd
	kv := 2 * h * kvHeads * hd
	o := qHeads * hd * h
	mlp := 3 * h * inter // gate, up, down
	sharded = q + kv + o + mlp
	if s.QKVBias {
		sharded += (qHeads + 2*kvHeads) * hd
	}
	replicated = 2 * h // input and post-attention RMSNorm
	return sharded, replicated
}

// ParamCount is the total parameter count of the model (all TP ranks
// together, KV heads counted once): embeddings, decoder layers, final norm
// and, unless tied, the LM head.
func (s Shape) ParamCount() int64 {
	sh, rep := s.layerParams(false)
	emb := float64(s.Vocab) * float64(s.Hidden)
	n := emb + float64(s.Layers)*(sh+rep) + float64(s.Hidden)
	if !s.TiedEmbeddings {
		n += emb
	}
	return int64(n)
}

// embeddingParamsPerGPU is the vocabulary-parallel share of the input
// embedding one rank holds.
func (s Shape) embeddingParamsPerGPU() float64 {
	return float64(s.Vocab) * float64(s.Hidden) / float64(s.tp())
}

// LMHeadParamsPerGPU is the LM-head share (vocabulary-parallel) one rank
// holds and multiplies per sampled token.
func (s Shape) LMHeadParamsPerGPU() float64 { return s.embeddingParamsPerGPU() }

// GEMMParamsPerGPU is the weights one rank multiplies per token in the
// decoder layers (projections and MLP; not the embedding lookup, not the LM
// head, which runs once per sampled token): the 2·params FLOPs per token of
// the roofline.
func (s Shape) GEMMParamsPerGPU() float64 {
	sh, _ := s.layerParams(true)
	return float64(s.Layers) * sh
}

// WeightBytes is the weights one TP rank holds, in bytes: the sharded
// projections, MLP, embedding and LM head divided by TP (replicated KV heads
// where TP > KVHeads), plus the replicated norms.
func (s Shape) WeightBytes() int64 {
	sh, rep := s.layerParams(true)
	n := float64(s.Layers)*(sh+rep) + float64(s.Hidden) + s.embeddingParamsPerGPU()
	if !s.TiedEmbeddings {
		n += s.LMHeadParamsPerGPU()
	}
	return int64(n * float64(s.DTypeBytes))
}

// StreamedWeightBytes is what one rank reads from HBM per forward pass: all
// its weights but the input embedding table, of which only the rows of the
// step's tokens are gathered (a tied table is read whole by the LM head).
func (s Shape) StreamedWeightBytes() int64 {
	if s.TiedEmbeddings {
		return s.WeightBytes()
	}
	return s.WeightBytes() - int64(s.embeddingParamsPerGPU()*float64(s.DTypeBytes))
}

// KVBytesPerToken is the KV cache one rank stores (and a decode step reads)
// per token: K and V, every layer, the rank's KV heads.
func (s Shape) KVBytesPerToken() int64 {
	return int64(2 * s.Layers * s.KVHeadsPerGPU() * s.HeadDim * s.kvDType())
}

// AttnFLOPsPerPair is the attention FLOPs one rank spends per
// (query token, key token) pair: QKᵀ and AV, 2 FLOPs per multiply-add, over
// the rank's query heads and every layer.
func (s Shape) AttnFLOPsPerPair() float64 {
	return 4 * float64(s.Layers) * float64(s.Heads/s.tp()) * float64(s.HeadDim)
}
