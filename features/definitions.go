package features

import (
	"github.com/steplab/steplab/fpm"
	"strconv"
)

// Definitions documents, for a model artifact, how Of computes the value
// each basis term reads from the steps table (a term named here; const and
// prefill_step need no column).
var Definitions = []fpm.FeatureDef{
	{Name: fpm.TermPrefillTokens, Definition: "sum_prefill_tokens"},
	{Name: fpm.TermPrefillKVTokens, Definition: "sum_prefill_kv_tokens"},
	{Name: fpm.TermPrefillAttn, Definition: "sum_prefill_attn = Σ chunk·(computed + chunk/2) over prefill requests; without the column, from step_requests, else ≈ T·K/n + (n·var_prefill_length + T²/n)/2 with T = sum_prefill_tokens, K = sum_prefill_kv_tokens, n = num_prefill_requests (exact for n = 1)"},
	{Name: fpm.TermPrefillRequests, Definition: "num_prefill_requests"},
	{Name: fpm.TermDecodeRequests, Definition: "num_decode_requests"},
	{Name: fpm.TermDecodeKVTokens, Definition: "sum_decode_kv_tokens"},
	{Name: fpm.TermDecodeMaxKV, Definition: "max_decode_kv_tokens; without the column, the largest num_computed_tokens of the decode rows of step_requests, else sum_decode_kv_tokens / num_decode_requests when var_decode_kv_tokens is 0 or one request decodes (unknown otherwise)"},
	{Name: fpm.TermDecodeBatchMaxKV, Definition: "num_decode_requests × max_decode_kv_tokens (as decode_max_kv)"},
	{Name: fpm.TermDecodeKVStd, Definition: "√var_decode_kv_tokens (population variance of the decode contexts)"},
	{Name: fpm.TermPaddedBatch, Definition: "cuda_graph_size on decode-only steps that ran a CUDA graph (without the column, num_decode_requests + padded_tokens), else num_decode_requests"},
	{Name: fpm.TermExpertsReached, Definition: "distinct routed experts the step's tokens (sum_prefill_tokens + num_decode_requests) reach in one MoE layer, E·(1 − (1 − k/E)^tokens) under uniform routing, Σ_e 1 − (1 − p_e)^tokens under a tilted one, with the manifest's moe.experts, moe.top_k, moe.routing_skew and moe.router_logit_std (ExpertsTerm)"},
	{Name: fpm.TermNewRequests, Definition: "num_new_reqs"},
	{Name: fpm.TermNewReqTokens, Definition: "new_req_tokens; without the column, Σ prompt_len of the new requests of step_requests (a resumed request: max(prompt_len, num_computed_tokens + num_scheduled_tokens)), else payload_new_bytes / " + strconv.FormatFloat(PayloadBytesPerToken, 'g', -1, 64)},
}
