package features

import (
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// Batch accumulates the requests scheduled in one step into the
// composition columns of the steps table. The zero value is an empty step.
type Batch struct {
	nPre, nDec    int64
	preTok, preKV int64
	preAttn       float64
	// Sums of the prefill prompt lengths and of the decode contexts are
	// integers, their squares floats: a float sum of whole numbers below
	// 2^53 is exact, so the variances are as from float sums, and the
	// integer sums spare a conversion and a float add per request.
	preLen   int64
	preLenSq float64
	decKV    int64
	decSq    float64
	decMax   int64
	nNew     int64
	newTok   int64
}

// Reset empties the batch.
func (b *Batch) Reset() { *b = Batch{} }

// Prefill adds a request in its context phase: it computes chunk tokens of
// a promptLen-token prompt after computed tokens already in its KV cache
// (a prefix hit, earlier chunks), attending causally to computed + chunk/2
// keys per query token on average.
func (b *Batch) Prefill(chunk, computed, promptLen int64) {
	b.nPre++
	b.preTok += chunk
	b.preKV += computed
	c := float64(chunk)
	b.preAttn += c * (float64(computed) + c/2)
	b.preLen += promptLen
	l := float64(promptLen)
	b.preLenSq += l * l
}

// Decode adds a request decoding one token over its computed context.
func (b *Batch) Decode(computed int64) {
	b.nDec++
	b.decKV += computed
	kv := float64(computed)
	b.decSq += kv * kv
	b.decMax = max(b.decMax, computed)
}

// New adds a request shipped in full this step (scheduled_new_reqs)
// carrying tokens token ids (see ShippedTokens).
func (b *Batch) New(tokens int64) {
	b.nNew++
	b.newTok += tokens
}

// Request is what one step_requests row adds to a batch.
type Request struct {
	IsNew, IsResumed, IsPrefill    bool
	Scheduled, Computed, PromptLen int64
}

// AddRequest adds one request of the step.
func (b *Batch) AddRequest(r Request) {
	if r.IsPrefill {
		b.Prefill(r.Scheduled, r.Computed, r.PromptLen)
	} else {
		b.Decode(r.Computed)
	}
	if r.IsNew {
		b.New(ShippedTokens(r.IsResumed, r.PromptLen, r.Computed, r.Scheduled))
	}
}

// Add adds one step_requests row.
func (b *Batch) Add(r *datasets.StepRequest) {
	b.AddRequest(Request{r.IsNew, r.IsResumed, r.IsPrefill, r.NumScheduledTokens, r.NumComputedTokens, r.PromptLen})
}

// ShippedTokens is the token ids a new request ships: its prompt; a request
// resumed after preemption ships its outputs too, of which step_requests
// records only what this step computes, so max(prompt, computed +
// scheduled) is a lower bound when its recompute is chunked.
func ShippedTokens(resumed bool, promptLen, computed, scheduled int64) int64 {
	if resumed {
		return max(promptLen, computed+scheduled)
	}
	return promptLen
}

// Requests is the number of prefill and decode requests added.
func (b *Batch) Requests() (prefill, decode int) { return int(b.nPre), int(b.nDec) }

// Fill writes the batch into st's composition columns: the prefill and
// decode counts, sums and variances (Dynamo's ForwardPassMetrics
// definitions: var_prefill_length is over prompt lengths), the longest
// decode context, the prefill attention pairs and the new requests'
// tokens; and, when st.CUDAGraphSize is a graph, padded_tokens. The kind
// and the other columns are the caller's.
func (b *Batch) Fill(st *datasets.Step) {
	st.NumPrefillRequests = int32(b.nPre)
	st.SumPrefillTokens = b.preTok
	st.SumPrefillKVTokens = b.preKV
	st.VarPrefillLength = variance(b.nPre, float64(b.preLen), b.preLenSq)
	st.SumPrefillAttn = b.preAttn
	st.NumDecodeRequests = int32(b.nDec)
	st.SumDecodeKVTokens = b.decKV
	st.VarDecodeKVTokens = variance(b.nDec, float64(b.decKV), b.decSq)
	st.MaxDecodeKVTokens = b.decMax
	st.NewReqTokens = b.newTok
	if st.CUDAGraphSize > 0 { // a decode graph's rows or a mixed graph's tokens: one token a decode
		st.PaddedTokens = int64(st.CUDAGraphSize) - b.nDec - b.preTok
	}
}

// Features is Of of the row Fill fills with newReqs new requests and no
// other column recorded (an engine's step as it is priced), without the
// row: the engine prices every step it schedules. A batch whose columns Of
// would read as unrecorded (a zero longest decode, attention or new
// tokens where the counts say otherwise) goes through the row.
func (b *Batch) Features(newReqs int32) fpm.Features {
	nPre, nDec := int32(b.nPre), int32(b.nDec)
	if b.preTok != 0 && !(b.preAttn > 0) || nDec < 0 || nDec > 0 && b.decMax <= 0 || newReqs < 0 || newReqs > 0 && b.newTok <= 0 {
		st := datasets.Step{NumNewReqs: newReqs}
		b.Fill(&st)
		return Of(&st)
	}
	f := fpm.Features{
		PrefillTokens:   float64(b.preTok),
		PrefillKVTokens: float64(b.preKV),
		PrefillRequests: float64(nPre),
		DecodeRequests:  float64(nDec),
		DecodeKVTokens:  float64(b.decKV),
		DecodeKVVar:     nonNeg(variance(b.nDec, float64(b.decKV), b.decSq)),
		PaddedBatch:     float64(nDec), // no graph: the executor pads
		NewRequests:     float64(newReqs),
	}
	if nPre != 0 && b.preTok != 0 {
		f.PrefillAttn = b.preAttn
	}
	if nDec > 0 {
		f.DecodeMaxKVTokens = float64(b.decMax)
	}
	if newReqs > 0 {
		f.NewReqTokens = float64(b.newTok)
	}
	return f
}

// Complete fills the composition columns of st its source did not record
// (Unknown, or a zero the counts contradict) from the batch of its
// step_requests rows; recorded columns are kept.
func (b *Batch) Complete(st *datasets.Step) {
	if !hasMaxDecodeKV(st) {
		st.MaxDecodeKVTokens = b.decMax
	}
	if !hasPrefillAttn(st) {
		st.SumPrefillAttn = b.preAttn
	}
	if !hasNewReqTokens(st) {
		st.NewReqTokens = b.newTok
	}
}

// variance is the population variance of n values from their sum and sum
// of squares (0 for no values; never negative from rounding).
func variance(n int64, sum, sq float64) float64 {
	if n == 0 {
		return 0
	}
	m := sum / float64(n)
	return max(0, sq/float64(n)-m*m)
}
