package fpm

import "math"

// Linear linearises the prior into a Linear FPM over const,
// prefill_tokens, prefill_attn, decode_requests and decode_kv_tokens: the
// fixed cost plus weight streaming once per step, GEMM compute per token,
// attention FLOPs per (query, key) pair and KV bytes per decode KV token.
// The efficiency curves are read at their large-x ends: a linear model's
// slopes are the costs of large steps. Calibration starts from it: a
// linear form whose coefficients a multiplier each can move.
func (r Roofline) Linear() *Linear {
	c := r.consts()
	gemmEff, attnEff, kvEff := r.GEMMEff.At(math.Inf(1)), r.AttnEff.At(math.Inf(1)), r.KVBWEff.At(math.Inf(1))
	// A prefill token's LM-head share: one sampled row per request, about
	// one request per 64 prefill tokens.
	perTok := 2 * (c.gemmParams + c.lmHeadParams/64) / (c.gemmPeak * gemmEff) * 1e9
	perDecode := 2 * (c.gemmParams + c.lmHeadParams) / (c.gemmPeak * gemmEff) * 1e9
	l, _ := NewLinear(
		[]string{TermConst, TermPrefillTokens, TermPrefillAttn, TermDecodeRequests, TermDecodeKVTokens},
		[]float64{c.fixed + c.weightStream, perTok, c.pair / (c.attnPeak * attnEff) * 1e9, perDecode, c.kvTok / (c.bw * kvEff) * 1e9})
	return l
}
