package catalog

import "math"

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
