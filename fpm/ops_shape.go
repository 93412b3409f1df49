package fpm

import "github.com/steplab/steplab/catalog"

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
	// qkNormAcross: the query and key norms span every head
	// (Shape.QKNormAcrossHeads).
	qkNormAcross bool
	// dtype names the GEMM table, computeDType the attention and
	// element-wise rows, kvDType the KV-cache dtype of the attention
	// tables.
	dtype, computeDType, kvDType string
	// Element widths in bytes: weights, activations, KV cache.
	weightBytes, actBytes, kvBytes float64
	// gemmDType and gemmBytes are the GEMM table and weight width of each
	// role: a checkpoint may keep its attention projections and LM head at
	// bf16 beside 4-bit experts (modelopt's exclude_modules).
	gemmDType [nGEMMRoles]string
	gemmBytes [nGEMMRoles]float64
}

// The roles a GEMM plays in a layer, each looked up at its weights' dtype.
const (
	roleMLP    = iota // dense MLP and shared experts (Shape.WeightDType)
	roleAttn          // q/k/v and output projections (Shape.AttnDType)
	roleExpert        // routed experts (MoE.DType)
	roleHead          // LM head, kept at the activation dtype
	nGEMMRoles
)

// opsShapeOf reads a Shape.
func opsShapeOf(s catalog.Shape) opsShape {
	tp := s.TPDegree()
	o := opsShape{
		layers: s.Layers, hidden: s.Hidden,
		qHeads: s.Heads / tp, kvHeads: s.KVHeadsPerGPU(), headDim: s.HeadDim,
		inter: s.Intermediate / tp, denseLayers: s.Layers,
		vocab: s.Vocab / tp, tp: tp, qkNormAcross: s.QKNormAcrossHeads,
		dtype: opsDType(s.LinearDType()), computeDType: opsDType(s.DType), kvDType: opsDType(s.KVCacheDType()),
		weightBytes: catalog.DTypeBytes(s.LinearDType()), actBytes: catalog.DTypeBytes(s.DType), kvBytes: catalog.DTypeBytes(s.KVCacheDType()),
	}
	if o.dtype == "fp8" {
		// An fp8 checkpoint's attention and element-wise rows are looked
		// up as fp8, as the databases pair them; 4-bit weights leave both
		// in the activation dtype.
		o.computeDType = o.dtype
	}
	for r, d := range [nGEMMRoles]string{roleMLP: s.LinearDType(), roleAttn: s.MixerDType(), roleExpert: s.ExpertDType(), roleHead: s.DType} {
		o.gemmDType[r], o.gemmBytes[r] = opsDType(d), catalog.DTypeBytes(d)
	}
	if m := s.MoE; s.IsMoE() {
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

// opsDType maps a dtype to the name the databases' tables use: their bf16
// rows for the 16- and 32-bit floats (the same tensor-core path in fp16),
// fp8 and nvfp4 by their own names. Any other (int4, mxfp4, a W4A16 fp4)
// keeps its name, so a database that did not measure it is refused by
// NewOps naming what it has, rather than priced as bf16 GEMMs.
func opsDType(dtype string) string {
	switch dtype {
	case catalog.DTypeBF16, catalog.DTypeFP16, catalog.DTypeFP32, "":
		return "bfloat16"
	case catalog.DTypeFP8:
		return "fp8"
	}
	return dtype
}
