package model

// Linear linearises the prior into a Linear FPM over const,
// prefill_tokens, prefill_attn, decode_requests and decode_kv_tokens: the
// fixed cost plus weight streaming once per step, GEMM compute per token,
// attention FLOPs per (query, key) pair and KV bytes per decode KV token at
// the roofline's efficiencies. Calibration starts from it: a linear form
// whose coefficients a multiplier each can move.
func (r Roofline) Linear() *Linear {
	s := r.Shape
	peak := r.HW.PeakFLOPs()
	bw := r.HW.BandwidthBytes()
	fixed := r.FixedNs + float64(s.Layers)*r.PerLayerNs + float64(s.StreamedWeightBytes())/(bw*r.WeightBWEff)*1e9
	// A prefill token's LM-head share: one sampled row per request, about
	// one request per 64 prefill tokens.
	perTok := 2 * (s.GEMMParamsPerGPU() + s.LMHeadParamsPerGPU()/64) / (peak * r.GEMMEff) * 1e9
	attn := s.AttnFLOPsPerPair() / (peak * r.AttnEff) * 1e9
	perDecode := 2 * (s.GEMMParamsPerGPU() + s.LMHeadParamsPerGPU()) / (peak * r.GEMMEff) * 1e9
	kv := float64(s.KVBytesPerToken()) / (bw * r.KVBWEff) * 1e9
	l, _ := NewLinear(
		[]string{TermConst, TermPrefillTokens, TermPrefillAttn, TermDecodeRequests, TermDecodeKVTokens},
		[]float64{fixed, perTok, attn, perDecode, kv})
	return l
}
