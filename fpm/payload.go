package fpm

import (
	"fmt"
	"math"
)

// PayloadModel prices, in bytes, the SchedulerOutput a vLLM v1 scheduler
// ships to its workers each step (docs/architecture.md#scheduler-semantics). vLLM pickles the
// SchedulerOutput dataclass and broadcasts it over a shared-memory ring (ZMQ
// for remote ranks), so the bytes are pickle bytes, and a list of Python
// ints costs what pickle spends per int: 3 bytes for ids below 65,536
// (BININT2), 5 above (BININT), plus a few bytes of list framing per
// thousand items.
//
// What a request costs depends on which list carries it:
//
//   - scheduled_new_reqs (NewRequestData, a request's first scheduled
//     step): req_id, the full prompt_token_ids, block_ids for every
//     allocated block, sampling_params, num_computed_tokens, lora/mm/pooling
//     fields, and its num_scheduled_tokens entry. NewReqBytes.
//   - scheduled_cached_reqs (CachedRequestData, every later step): the
//     deltas only — req_id, new_block_ids (usually None: a decode request
//     needs a new block once every block_size tokens), num_computed_tokens,
//     num_output_tokens, its num_scheduled_tokens entry. A request resumed
//     after preemption also ships its whole token list (all_token_ids) and
//     its block list replaces the old one. CachedReqBytes. (Older vLLM
//     re-sent resumed requests as NewRequestData (docs/architecture.md#scheduler-semantics);
//     the two cost within a few percent of each other.)
//
// Calibration (R1, docs/architecture.md#r1-payload: the published self-benchmark measurement). At B=513 with ~4,100-token contexts and
// block size 16 (257 blocks per request) an admission step ships ≈ 8.5 MB
// and a steady decode step ≈ 6.8 KB. With the defaults:
//
//	admission: 513 × (4,100 × 3.75 + 257 × 3 + 600) + 600
//	         = 513 × (15,375 + 771 + 600) + 600 = 8,591,298 B ≈ 8.59 MB  (+1.1%)
//	steady:    513 × 12 + 600 = 6,756 B ≈ 6.76 KB                      (−0.6%)
//
// 3.75 bytes per token id is a 128K vocabulary (Llama-3) with most text
// tokens below id 65,536 (BPE gives frequent tokens low ids): a uniform draw
// would average 3.98. Block ids are 3 bytes (pools below 65,536 blocks). The
// 600-byte request overhead is a pickled SamplingParams (msgspec struct, ~35
// positional fields, ~350 B), a 40-50 character req_id and the dataclass'
// field names. The 12-byte cached delta is a short memoised req_id
// reference, two small ints, a None and the num_scheduled_tokens entry. The
// defaults are a prior: captures record the real serialized bytes, and a
// fit (PayloadStep.Terms, Vector, PayloadModelFromVector) replaces them.
//
// The methods take a pointer: inlined into a loop (sim.PayloadOf prices
// every request), a value receiver is copied, seven floats, each call.
type PayloadModel struct {
	// TokenIDBytes per token id shipped (prompt_token_ids of a new
	// request, all_token_ids of a resumed one).
	TokenIDBytes float64 `json:"token_id_bytes"`
	// BlockIDBytes per KV block id shipped (block_ids, new_block_ids).
	BlockIDBytes float64 `json:"block_id_bytes"`
	// NewReqFixedBytes per NewRequestData besides its token and block
	// lists: req_id, sampling params, bookkeeping fields.
	NewReqFixedBytes float64 `json:"new_req_fixed_bytes"`
	// CachedReqFixedBytes per request in CachedRequestData besides its new
	// block ids: req_id, num_computed_tokens, num_output_tokens, the
	// new_block_ids slot, the num_scheduled_tokens entry.
	CachedReqFixedBytes float64 `json:"cached_req_fixed_bytes"`
	// ResumedReqFixedBytes extra per resumed request (resumed_req_ids and
	// all_token_ids entries) besides its token list.
	ResumedReqFixedBytes float64 `json:"resumed_req_fixed_bytes"`
	// FinishedReqBytes per id in finished_req_ids (and
	// preempted_req_ids).
	FinishedReqBytes float64 `json:"finished_req_bytes"`
	// StepFixedBytes per SchedulerOutput: the dataclass, its empty
	// containers, total_num_scheduled_tokens, connector metadata slots.
	StepFixedBytes float64 `json:"step_fixed_bytes"`
}

// DefaultPayloadModel returns the calibrated prior described on
// PayloadModel.
func DefaultPayloadModel() PayloadModel {
	return PayloadModel{
		TokenIDBytes:         3.75,
		BlockIDBytes:         3,
		NewReqFixedBytes:     600,
		CachedReqFixedBytes:  12,
		ResumedReqFixedBytes: 16,
		FinishedReqBytes:     8,
		StepFixedBytes:       600,
	}
}

// Validate refuses negative or non-finite coefficients.
func (p *PayloadModel) Validate() error {
	v := p.Vector()
	for i, c := range v {
		if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
			return fmt.Errorf("fpm: payload coefficient %s = %v: must be finite and >= 0", PayloadTermNames[i], c)
		}
	}
	return nil
}

// roundInt is int64(math.Round(x)) for |x| < 2^63, small enough to
// inline (math.Round is not, and with it neither are NewBytes and
// CachedBytes, which sim.PayloadOf calls once a request) and without a
// branch on the fraction, which fractional coefficients make random:
// x - float64(t) is x's fraction exactly, and twice it truncates to ±1
// from one half on.
func roundInt(x float64) int64 {
	t := int64(x)
	return t + int64(2*(x-float64(t)))
}

// NewReqBytes is the bytes of one NewRequestData carrying numTokens prompt
// token ids and numBlocks block ids.
func (p *PayloadModel) NewReqBytes(numTokens, numBlocks int) int64 {
	return roundInt(p.NewReqFixedBytes + float64(numTokens)*p.TokenIDBytes + float64(numBlocks)*p.BlockIDBytes)
}

// CachedReqBytes is the bytes one request adds to CachedRequestData:
// its fixed delta and numNewBlocks block ids; a resumed request also ships
// its numTokens token ids (numTokens is ignored otherwise: without pipeline
// parallelism new_token_ids is empty).
func (p *PayloadModel) CachedReqBytes(numNewBlocks int, resumed bool, numTokens int) int64 {
	b := p.CachedReqFixedBytes + float64(numNewBlocks)*p.BlockIDBytes
	if resumed {
		b += p.ResumedReqFixedBytes + float64(numTokens)*p.TokenIDBytes
	}
	return roundInt(b)
}

// PayloadStep is the composition of one step as the payload model sees it:
// totals over its requests, so that the model stays linear in them.
type PayloadStep struct {
	NewReqs   int // requests in scheduled_new_reqs
	NewTokens int // prompt token ids they carry
	NewBlocks int // block ids they carry
	// CachedReqs is the requests in scheduled_cached_reqs, resumed ones
	// included.
	CachedReqs      int
	CachedNewBlocks int // new_block_ids they carry (all blocks for a resumed request)
	ResumedReqs     int // of CachedReqs, resumed after preemption
	ResumedTokens   int // token ids the resumed requests ship
	FinishedReqs    int // finished_req_ids and preempted_req_ids
}

// PayloadBreakdown splits a step's bytes as the steps table does
// (payload_bytes, payload_new_bytes, payload_cached_bytes); Fixed is the
// rest (the SchedulerOutput itself and finished ids).
type PayloadBreakdown struct {
	New, Cached, Fixed, Total int64
}

// NewBytes is the step's scheduled_new_reqs list (payload_new_bytes),
// rounded once.
func (p *PayloadModel) NewBytes(s PayloadStep) int64 {
	return roundInt(float64(s.NewReqs)*p.NewReqFixedBytes + float64(s.NewTokens)*p.TokenIDBytes + float64(s.NewBlocks)*p.BlockIDBytes)
}

// CachedBytes is the step's scheduled_cached_reqs lists
// (payload_cached_bytes), rounded once.
func (p *PayloadModel) CachedBytes(s PayloadStep) int64 {
	return roundInt(float64(s.CachedReqs)*p.CachedReqFixedBytes + float64(s.CachedNewBlocks)*p.BlockIDBytes +
		float64(s.ResumedReqs)*p.ResumedReqFixedBytes + float64(s.ResumedTokens)*p.TokenIDBytes)
}

// Breakdown prices a step. Each part is rounded once, so it can differ by
// a byte or so from the sum of per-request NewReqBytes/CachedReqBytes; a
// caller that attributes the parts to requests takes each request's share
// as the growth of NewBytes or CachedBytes when it joins the requests
// before it (sim.PayloadOf), which adds up exactly.
func (p *PayloadModel) Breakdown(s PayloadStep) PayloadBreakdown {
	nw, ca := p.NewBytes(s), p.CachedBytes(s)
	fx := roundInt(p.StepFixedBytes + float64(s.FinishedReqs)*p.FinishedReqBytes)
	return PayloadBreakdown{New: nw, Cached: ca, Fixed: fx, Total: nw + ca + fx}
}

// StepBytes is the total bytes shipped for the step.
func (p *PayloadModel) StepBytes(s PayloadStep) int64 { return p.Breakdown(s).Total }

// PayloadTermNames names the linear terms of the payload model, in the
// order of PayloadStep.Terms and PayloadModel.Vector:
//
//	bytes = Σ Vector()[i] · Terms()[i]
var PayloadTermNames = []string{
	"token_id_bytes", "block_id_bytes", "new_req_fixed_bytes", "cached_req_fixed_bytes",
	"resumed_req_fixed_bytes", "finished_req_bytes", "step_fixed_bytes",
}

// Terms is the design row of the step for fitting the payload model from
// captured bytes (e.g. by NNLS): token ids, block ids, new requests, cached
// requests, resumed requests, finished ids, 1.
func (s PayloadStep) Terms() []float64 {
	return []float64{
		float64(s.NewTokens + s.ResumedTokens),
		float64(s.NewBlocks + s.CachedNewBlocks),
		float64(s.NewReqs),
		float64(s.CachedReqs),
		float64(s.ResumedReqs),
		float64(s.FinishedReqs),
		1,
	}
}

// Vector is the coefficients in PayloadTermNames order.
func (p *PayloadModel) Vector() []float64 {
	return []float64{p.TokenIDBytes, p.BlockIDBytes, p.NewReqFixedBytes, p.CachedReqFixedBytes,
		p.ResumedReqFixedBytes, p.FinishedReqBytes, p.StepFixedBytes}
}

// PayloadModelFromVector builds a model from fitted coefficients in
// PayloadTermNames order.
func PayloadModelFromVector(v []float64) (PayloadModel, error) {
	if len(v) != len(PayloadTermNames) {
		return PayloadModel{}, fmt.Errorf("fpm: payload: %d coefficients, want %d (%v)", len(v), len(PayloadTermNames), PayloadTermNames)
	}
	p := PayloadModel{v[0], v[1], v[2], v[3], v[4], v[5], v[6]}
	return p, p.Validate()
}
