// Package manifest maps a dataset manifest's model and hardware sections
// onto the models: the shape the simulator prices (both directions), and
// the checks of the manifest's settings against the catalogue that
// `steplab validate` runs. It stands on datasets and model, as
// features does.
package manifest

import (
	"fmt"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
)

// ModelSection and Shape are the two directions of the model
// section: the whole shape, experts and all (a cluster records its model
// so, whatever part of it each engine prices). Shape validates the
// shape it returns.
func ModelSection(s catalog.Shape) *datasets.ModelShape {
	ms := &datasets.ModelShape{Name: s.Name, Architecture: s.Architecture, Layers: s.Layers, Hidden: s.Hidden, Heads: s.Heads,
		KVHeads: s.KVHeads, HeadDim: s.HeadDim, Intermediate: s.Intermediate, Vocab: s.Vocab, DType: s.DType,
		TensorParallel: max(1, s.TP), ParamsBillion: float64(s.ParamCount()) / 1e9, WeightDType: s.WeightDType, KVDType: s.KVDType,
		TiedEmbeddings: s.TiedEmbeddings, QKVBias: s.QKVBias, QKNormAcrossHeads: s.QKNormAcrossHeads, SlidingWindow: s.SlidingWindow, SlidingLayers: s.SlidingLayers,
		Notes: s.Notes, Config: s.File, AttnDType: s.AttnDType, AttnOutputGate: s.AttnOutputGate, MLPMatrices: s.MLPMatrices}
	if s.MLA != (catalog.MLA{}) {
		m := datasets.ModelMLA(s.MLA)
		ms.MLA = &m
	}
	if s.MoE != (catalog.MoE{}) {
		e := s.MoE
		ms.MoE = &datasets.ModelMoE{Experts: e.Experts, TopK: e.TopK, ExpertIntermediate: e.ExpertIntermediate, SharedExperts: e.SharedExperts,
			SharedIntermediate: e.SharedIntermediate, DenseLayers: e.DenseLayers, DType: e.DType, Latent: e.Latent}
	}
	for _, l := range s.Stack {
		ms.Stack = append(ms.Stack, datasets.ModelLayer(l))
	}
	if s.State != (catalog.StateMixer{}) {
		m := datasets.ModelStateMixer(s.State)
		ms.StateMixer = &m
	}
	if s.Indexer != (catalog.Indexer{}) {
		m := datasets.ModelIndexer(s.Indexer)
		ms.Indexer = &m
	}
	if s.LowRank != (catalog.LowRank{}) {
		m := datasets.ModelLowRank(s.LowRank)
		ms.LowRank = &m
	}
	return ms
}

func Shape(ms *datasets.ModelShape) (catalog.Shape, error) {
	s := catalog.Shape{Name: ms.Name, Architecture: ms.Architecture, Layers: ms.Layers, Hidden: ms.Hidden, Heads: ms.Heads,
		KVHeads: ms.KVHeads, HeadDim: ms.HeadDim, Intermediate: ms.Intermediate, Vocab: ms.Vocab, TP: max(1, ms.TensorParallel),
		TiedEmbeddings: ms.TiedEmbeddings, QKVBias: ms.QKVBias, QKNormAcrossHeads: ms.QKNormAcrossHeads, SlidingWindow: ms.SlidingWindow, SlidingLayers: ms.SlidingLayers,
		Notes: ms.Notes, File: ms.Config, AttnOutputGate: ms.AttnOutputGate, MLPMatrices: ms.MLPMatrices}
	if ms.MLA != nil {
		s.MLA = catalog.MLA(*ms.MLA)
	}
	if ms.MoE != nil {
		// The routing a capture recorded is not part of the shape.
		e := ms.MoE
		s.MoE = catalog.MoE{Experts: e.Experts, TopK: e.TopK, ExpertIntermediate: e.ExpertIntermediate, SharedExperts: e.SharedExperts,
			SharedIntermediate: e.SharedIntermediate, DenseLayers: e.DenseLayers, DType: e.DType, Latent: e.Latent}
	}
	for _, l := range ms.Stack {
		s.Stack = append(s.Stack, catalog.Layer(l))
	}
	if ms.StateMixer != nil {
		s.State = catalog.StateMixer(*ms.StateMixer)
	}
	if ms.Indexer != nil {
		s.Indexer = catalog.Indexer(*ms.Indexer)
	}
	if ms.LowRank != nil {
		s.LowRank = catalog.LowRank(*ms.LowRank)
	}
	var err error
	for _, d := range []struct {
		field, v string
		dst      *string
	}{{"dtype", ms.DType, &s.DType}, {"weight_dtype", ms.WeightDType, &s.WeightDType}, {"kv_dtype", ms.KVDType, &s.KVDType}, {"attn_dtype", ms.AttnDType, &s.AttnDType}} {
		if d.v == "" || d.v == "auto" {
			continue
		}
		if *d.dst, err = catalog.CanonicalDType(d.v); err != nil {
			return s, fmt.Errorf("%s: %w", d.field, err)
		}
	}
	if s.DType == "" {
		s.DType = catalog.DTypeBF16
		s.Notes = append(s.Notes, "dtype not recorded: bf16 assumed")
	}
	return s, s.Validate()
}
