package model

// opsShape is every dimension of a model the operations prior reads, per
// GPU of the tensor-parallel group. opsShapeOf is the one place that reads
// Shape: a new kind of model (mixture of experts, latent attention, other
// dtypes) is wired by filling these fields from its Shape fields.
type opsShape struct {
	layers int
	hidden int
	// Attention, per GPU: query heads, KV heads and their width.
	qHeads, kvHeads, headDim int
	// Dense MLP intermediate size per GPU (gate, up and down).
	inter int
	// Mixture of experts: routed experts, experts per token and each
	// expert's intermediate size per GPU; experts == 0 is a dense model.
	// shared is the always-active shared experts' width per GPU, and
	// denseLayers the layers with the dense MLP (inter) instead.
	experts, topK, expertInter int
	shared, denseLayers        int
	vocab                      int // LM-head rows per GPU
	tp                         int
	// dtype names the GEMM table and the attention compute dtype,
	// kvDType the KV-cache dtype of the attention tables.
	dtype, kvDType string
	// Element widths in bytes: weights, activations, KV cache.
	weightBytes, actBytes, kvBytes float64
}

// opsShapeOf reads a Shape.
func opsShapeOf(s Shape) opsShape {
	tp := s.tp()
	o := opsShape{
		layers: s.Layers, hidden: s.Hidden,
		qHeads: s.Heads / tp, kvHeads: s.KVHeadsPerGPU(), headDim: s.HeadDim,
		inter: s.Intermediate / tp, denseLayers: s.Layers,
		vocab: s.Vocab / tp, tp: tp,
		dtype: opsDType(s.weightDType()), kvDType: opsDType(s.kvDType()),
		weightBytes: DTypeBytes(s.weightDType()), actBytes: DTypeBytes(s.DType), kvBytes: DTypeBytes(s.kvDType()),
	}
	if m := s.MoE; s.isMoE() {
		o.experts, o.topK, o.expertInter = m.Experts, m.TopK, m.ExpertIntermediate/tp
		o.shared, o.denseLayers = m.SharedExperts*m.SharedIntermediate/tp, m.DenseLayers
	}
	return o
}

// activationWidth is the width the MLP's SiLU·mul runs over per token.
func (s *opsShape) activationWidth() int {
	if s.experts > 0 {
		return s.expertInter * s.topK
	}
	return s.inter
}

// opsDType maps a dtype to the name the databases' tables use: their fp8
// rows for fp8, their bf16 rows for everything else.
func opsDType(dtype string) string {
	if dtype == DTypeFP8 {
		return "fp8"
	}
	return "bfloat16"
}
