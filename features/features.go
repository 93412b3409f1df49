package features

import (
	"math"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// PayloadBytesPerToken is the serialized size assumed per prompt token when
// new_req_tokens is unknown and has to be derived from payload_new_bytes:
// the payload model's token-id width, so that a simulated dataset maps back
// to the features the simulator priced. Block ids and sampling parameters
// ride in the same bytes, so the estimate over-counts a little; it stays
// proportional to the admission work, which is what its coefficient prices.
var PayloadBytesPerToken = fpm.DefaultPayloadModel().TokenIDBytes

// Of maps a steps row to the features a forward-pass model prices (see
// Definitions for each one). A column the row did not record is derived
// where the row determines it; a feature it cannot determine is NaN. Fill
// the unknown columns from step_requests first (Complete, RequestJoin) to
// make every feature exact.
func Of(st *datasets.Step) fpm.Features {
	return fpm.Features{
		PrefillTokens:     float64(st.SumPrefillTokens),
		PrefillKVTokens:   float64(st.SumPrefillKVTokens),
		PrefillAttn:       prefillAttn(st),
		PrefillRequests:   float64(st.NumPrefillRequests),
		DecodeRequests:    float64(st.NumDecodeRequests),
		DecodeKVTokens:    float64(st.SumDecodeKVTokens),
		DecodeMaxKVTokens: decodeMaxKV(st),
		DecodeKVVar:       nonNeg(st.VarDecodeKVTokens),
		PaddedBatch:       paddedBatch(st),
		NewRequests:       count(st.NumNewReqs),
		NewReqTokens:      newReqTokens(st),
	}
}

// A composition column holds a usable value when it is recorded and
// consistent with the counts: a decode request reads at least one token, a
// prefill chunk of c ≥ 1 tokens has c/2 attention pairs or more, and a new
// request ships at least one token. A zero where the counts say otherwise
// is a writer that left the column at its zero value (it did not know it).

func hasMaxDecodeKV(st *datasets.Step) bool {
	return st.NumDecodeRequests == 0 || st.MaxDecodeKVTokens > 0
}

func hasPrefillAttn(st *datasets.Step) bool {
	return st.SumPrefillTokens == 0 || st.SumPrefillAttn > 0
}

func hasNewReqTokens(st *datasets.Step) bool {
	return st.NumNewReqs == 0 || st.NewReqTokens > 0
}

// Known reports whether every composition column Of reads is recorded in
// st, so that Of needs no approximation (Complete would change nothing).
func Known(st *datasets.Step) bool {
	return hasMaxDecodeKV(st) && hasPrefillAttn(st) && hasNewReqTokens(st)
}

// prefillAttn is sum_prefill_attn, else its approximation from the steps
// row: Σc² = n·var + T²/n with the prompt-length variance standing in for
// the chunk-length variance, and Σc·k ≈ T·K/n (chunk length and context
// uncorrelated across the step's requests). Exact for one prefill request.
func prefillAttn(st *datasets.Step) float64 {
	n := float64(st.NumPrefillRequests)
	switch {
	case n == 0 || st.SumPrefillTokens == 0:
		return 0
	case hasPrefillAttn(st):
		return st.SumPrefillAttn
	}
	T, K := float64(st.SumPrefillTokens), float64(st.SumPrefillKVTokens)
	return T*K/n + (n*nonNeg(st.VarPrefillLength)+T*T/n)/2
}

// decodeMaxKV is max_decode_kv_tokens, else what the row determines: the
// sum for one request, the mean for contexts of zero variance; else NaN.
func decodeMaxKV(st *datasets.Step) float64 {
	n := st.NumDecodeRequests
	switch {
	case n == 0:
		return 0
	case n < 0:
		return math.NaN()
	case hasMaxDecodeKV(st):
		return float64(st.MaxDecodeKVTokens)
	case n == 1:
		return float64(st.SumDecodeKVTokens)
	case st.VarDecodeKVTokens == 0:
		return float64(st.SumDecodeKVTokens) / float64(n)
	}
	return math.NaN()
}

// paddedBatch is the batch a decode-only step ran at: its CUDA-graph size,
// or (a row without cuda_graph_size: padding implies a graph)
// num_decode_requests + padded_tokens; num_decode_requests for an eager or
// non-decode step.
func paddedBatch(st *datasets.Step) float64 {
	n := float64(st.NumDecodeRequests)
	if st.NumPrefillRequests > 0 || st.Kind == datasets.KindPrefill || st.Kind == datasets.KindMixed {
		return n
	}
	switch {
	case st.CUDAGraphSize > 0:
		return float64(st.CUDAGraphSize)
	case st.PaddedTokens > 0:
		return n + float64(st.PaddedTokens)
	}
	return n
}

// newReqTokens is new_req_tokens, else payload_new_bytes over the token-id
// width.
func newReqTokens(st *datasets.Step) float64 {
	switch {
	case st.NumNewReqs == 0:
		return 0
	case st.NumNewReqs < 0:
		return math.NaN()
	case hasNewReqTokens(st):
		return float64(st.NewReqTokens)
	case st.PayloadNewBytes > 0:
		return math.Round(float64(st.PayloadNewBytes) / PayloadBytesPerToken)
	}
	return math.NaN()
}

// count is a count column as a feature: an Unknown (negative) count is
// NaN, a feature the source did not record.
func count(n int32) float64 {
	if n < 0 {
		return math.NaN()
	}
	return float64(n)
}

func nonNeg(v float64) float64 {
	if v < 0 || math.IsNaN(v) {
		return 0
	}
	return v
}
