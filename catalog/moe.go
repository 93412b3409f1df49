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

// Routing is how a router spreads a step's tokens over the experts of one
// MoE layer: Experts experts, TopK picked per token, independently of the
// other tokens. Skew tilts expert e's router logit by −Skew·ln(1+e) (the
// GPU worker's routing_skew: a Zipf-like preference for the first
// experts), on logits of standard deviation LogitStd; Skew 0 is uniform
// routing, ExpectedExperts.
type Routing struct {
	Experts, TopK int
	Skew          float64
	LogitStd      float64
}

// MaxExperts bounds the experts of a routing a term prices (models ship
// up to a few hundred): a larger count is a typo, not a model.
const MaxExperts = 1 << 16

// Validate refuses a routing that cannot be priced: no experts, top-k
// outside 1..experts, a negative skew, or a skew without the logit
// spread it is measured against.
func (r Routing) Validate() error {
	switch {
	case r.Experts <= 0 || r.Experts > MaxExperts || r.TopK <= 0 || r.TopK > r.Experts:
		return fmt.Errorf("routing: %d experts, top %d: want 1 <= top_k <= experts <= %d", r.Experts, r.TopK, MaxExperts)
	case !(r.Skew >= 0) || math.IsInf(r.Skew, 0):
		return fmt.Errorf("routing: skew %v: want a finite number >= 0", r.Skew)
	case r.Skew > 0 && !(r.LogitStd > 0 && !math.IsInf(r.LogitStd, 0)):
		return fmt.Errorf("routing: skew %v needs the router logits' standard deviation (logit_std %v): the tilt is in logit units", r.Skew, r.LogitStd)
	}
	return nil
}

// PickProbs is each expert's probability of being among one token's top
// k: k/E each under uniform routing. With a skew the logits are taken as
// independent normals N(−Skew·ln(1+e), LogitStd²) and a token picks the
// experts above a threshold t where the expected picks Σ_e P(logit_e > t)
// make k (a mean-field approximation of the top-k, exact for uniform
// logits and within a few percent of sampled top-k at the worker's
// scales; TestRoutingSkewSampled).
func (r Routing) PickProbs() []float64 {
	p := make([]float64, r.Experts)
	if r.Skew == 0 {
		for e := range p {
			p[e] = float64(r.TopK) / float64(r.Experts)
		}
		return p
	}
	bias := func(e int) float64 { return -r.Skew * math.Log1p(float64(e)) }
	picks := func(t float64) float64 {
		s := 0.0
		for e := range p {
			s += normalSF((t - bias(e)) / r.LogitStd)
		}
		return s
	}
	lo, hi := bias(r.Experts-1)-12*r.LogitStd, 12*r.LogitStd
	for range 200 { // picks falls in t: bisect to the float's resolution
		mid := (lo + hi) / 2
		if mid == lo || mid == hi {
			break
		}
		if picks(mid) > float64(r.TopK) {
			lo = mid
		} else {
			hi = mid
		}
	}
	t := (lo + hi) / 2
	for e := range p {
		p[e] = normalSF((t - bias(e)) / r.LogitStd)
	}
	return p
}

// Reached is the expected number of distinct experts tokens tokens reach,
// Σ_e 1 − (1 − p_e)^tokens over PickProbs p (ExpectedExperts when
// uniform); probs is PickProbs computed once, or nil to compute it.
func (r Routing) Reached(probs []float64, tokens float64) float64 {
	if !(tokens > 0) {
		return 0
	}
	if r.Skew == 0 {
		return ExpectedExperts(r.Experts, r.TopK, tokens)
	}
	if probs == nil {
		probs = r.PickProbs()
	}
	n := 0.0
	for _, p := range probs {
		n += 1 - math.Pow(1-p, tokens)
	}
	return n
}

// normalSF is the standard normal's survival function P(Z > z).
func normalSF(z float64) float64 { return math.Erfc(z/math.Sqrt2) / 2 }

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
