package catalog

import (
	"fmt"
	"math"
	"slices"
)

// ExpectedExperts is the expected number of distinct experts, out of
// experts, that tokens tokens routed to topK experts each select in one
// MoE layer, under uniform routing (every token picks topK distinct
// experts uniformly at random, independently of the others):
//
//	E·(1 − (1 − k/E)^T)
//
// It is k at T = 1 and approaches E as T grows: a batch-1 decode step
// streams k experts per layer, a large prefill nearly all of them. Real
// routers are skewed (popular experts), which makes fewer distinct experts
// per step than this (spreading picks evenly maximises the distinct
// count), so the roofline's MoE weight stream is on the high side; see
// docs/catalog.md.
func ExpectedExperts(experts, topK int, tokens float64) float64 {
	if experts <= 0 || topK <= 0 || !(tokens > 0) {
		return 0
	}
	e := float64(experts)
	k := math.Min(float64(topK), e)
	return e * (1 - math.Pow(1-k/e, tokens))
}

// DenseShape is the part of a mixture of experts every token runs on its
// own GPU in an expert-parallel instance: the shape without its routed
// experts (attention, embeddings, norms, the LM head, shared experts and
// the dense layers' MLPs), which the pool's FPM prices; the routed experts
// are the instance's (package sim/cluster prices them). Its MLP width is the per-layer average
// of the shared experts' width on the MoE layers and Intermediate on the
// MoE.DenseLayers dense layers, so the MLP parameters and FLOPs of the
// whole model are kept; a model with neither (Qwen3's MoE layers) has no
// MLP left (width 0). The router's hidden × experts projection is left
// out (under 1% of a token's expert FLOPs). A dense shape is returned as
// it is.
func DenseShape(s Shape) Shape {
	m := s.MoE
	if m.Experts == 0 {
		return s
	}
	d := s
	d.MoE = MoE{}
	if len(s.Stack) > 0 {
		return denseStack(s, d)
	}
	mlp := m.DenseLayers*s.Intermediate + s.MoELayers()*m.SharedExperts*m.SharedIntermediate
	d.Intermediate = int(math.Round(float64(mlp) / float64(max(1, s.Layers))))
	d.Notes = append(slices.Clip(s.Notes), fmt.Sprintf("priced without its %d routed experts per layer (the expert-parallel step prices them): MLP width %d, the per-layer average of the shared experts and dense layers",
		m.Experts, d.Intermediate))
	return d
}

// denseStack is DenseShape of a layer stack: each MoE layer keeps its
// shared experts as a dense MLP of their width (none without them), so
// the stack's other layers (their attention kinds, dense MLPs) are priced
// as they are.
func denseStack(s, d Shape) Shape {
	m := s.MoE
	d.Stack = slices.Clone(s.Stack)
	shared := m.SharedExperts * m.SharedIntermediate
	mlp, kept := MLPNone, "no MLP"
	if shared > 0 {
		mlp, kept = MLPDense, fmt.Sprintf("its shared experts as a dense MLP of width %d", shared)
	}
	for i, l := range d.Stack {
		if l.MLP == MLPMoE {
			d.Stack[i].MLP, d.Stack[i].Intermediate = mlp, 0
			if shared > 0 {
				d.Stack[i].Intermediate = shared
			}
		}
	}
	d.Notes = append(slices.Clip(s.Notes), fmt.Sprintf("priced without its %d routed experts per MoE layer (the expert-parallel step prices them): each MoE layer keeps %s",
		m.Experts, kept))
	return d
}

// ExpertBytes is one routed expert's weights in one layer, whole (gate,
// up and down projections at the experts' dtype; ExpertBytesPerGPU is one
// rank's part of it).
func (s Shape) ExpertBytes() float64 {
	return 3 * float64(s.Hidden) * float64(s.MoE.ExpertIntermediate) * DTypeBytes(s.ExpertDType())
}
