package sched

import "slices"

// Output is the scheduler's decision for one step (vLLM SchedulerOutput).
//
// Ownership: an Output and every slice in it belong to the Scheduler. It
// stays valid, unchanged, from the Schedule call that returned it until it is
// passed to Update; Update recycles it for a later step. An empty Output
// (Empty() true) may be passed to Update or dropped. Copy what you need to
// keep beyond Update.
type Output struct {
	// StepID numbers the executed steps 0, 1, 2, ... in schedule order.
	// Only non-empty outputs take a step id; an empty output has StepID -1.
	StepID int64
	// NewReqs are requests on their first scheduled step, or resumed after a
	// preemption (Resumed=true): the worker receives their full token
	// arrays and block tables. In admission order.
	NewReqs []ScheduledReq
	// CachedReqs are continuing requests (chunked prefill or decode): the
	// worker receives deltas. In running order.
	CachedReqs []ScheduledReq
	// TotalScheduledTokens is the sum of NumScheduledTokens over both lists.
	TotalScheduledTokens int
	// PreemptedIDs are the requests preempted during this Schedule call, in
	// preemption order. An empty output can carry preemptions too (async:
	// the requests ahead of the one that needed blocks were all skipped
	// because their in-flight steps complete them), and FinishedIDs.
	PreemptedIDs []string
	// FinishedIDs are requests that finished (or were aborted) since the
	// previous Schedule call (vLLM finished_req_ids): the worker frees their
	// state.
	FinishedIDs []string
	// Queue and KV state after scheduling.
	NumWaiting, NumRunning      int
	KVBlocksUsed, KVBlocksTotal int

	blockBuf []int // backing store of the block id slices of this output
}

// Empty reports whether the step schedules no work (nothing to execute).
func (o *Output) Empty() bool { return len(o.NewReqs) == 0 && len(o.CachedReqs) == 0 }

// NumScheduledReqs is len(NewReqs)+len(CachedReqs).
func (o *Output) NumScheduledReqs() int { return len(o.NewReqs) + len(o.CachedReqs) }

// ScheduledReq is one request's share of a step.
type ScheduledReq struct {
	Req                *Request
	NumScheduledTokens int
	// NumComputedTokens is the KV already valid before this step (for a new
	// request: prefix-cache hit or PrecomputedTokens).
	NumComputedTokens int
	// NumOutputTokens is the output tokens before this step, including
	// output placeholders of in-flight steps under async scheduling (as
	// vLLM's CachedRequestData.num_output_tokens).
	NumOutputTokens int
	// IsPrefill: the context phase. True while the request has no output
	// token yet (NumOutputTokens == 0, vLLM is_context_phase), and for a
	// resumed request while it still recomputes its context (more than its
	// newest token left: NumComputedTokens < NumTokens-1). Otherwise the step
	// is a decode: exactly one token on top of the whole context.
	IsPrefill bool
	// Resumed: re-admitted after a preemption (only in NewReqs).
	Resumed bool
	// Samples: this step reaches the end of the request's known tokens, so
	// the step produces one output token for it (reconciled by Update). A
	// non-final prefill chunk does not sample.
	Samples bool
	// PrefixHitTokens: for new/resumed requests, tokens served by the prefix
	// cache (a multiple of the block size; never the last token). 0 for
	// cached requests.
	PrefixHitTokens int
	// NewBlockIDs are the blocks taken from the free pool in this step (not
	// prefix-hit blocks); nil for a cached request that takes none.
	NewBlockIDs []int
	// BlockIDs is the whole block table (prefix-hit blocks first), set for
	// new/resumed requests only, which ship it; nil for cached requests.
	BlockIDs []int
	// NumBlocks is the block table length after this step.
	NumBlocks int
	// NumTokens is prompt + NumOutputTokens: the tokens known now. A
	// new/resumed request has no placeholders and ships exactly this many
	// token ids.
	NumTokens int

	st *reqState
}

// ID is Req.ID.
func (r *ScheduledReq) ID() string { return r.Req.ID }

// UpdateResult is what Update reports. It belongs to the Scheduler and is
// valid until the next Update call.
type UpdateResult struct {
	// FinishedIDs are the requests that finished in this update, in step
	// order (cached requests first, then new ones).
	FinishedIDs []string
	// Sampled is the number of output tokens produced by the step (requests
	// finished or aborted before the update produce none).
	Sampled int
}

// appendReq appends a zeroed request to list (an Output's NewReqs or
// CachedReqs) and returns it, to be set field by field: appending a literal
// builds it aside and copies it, and the copy's wide loads of the fields
// just stored stall on store forwarding, once a request a step.
func appendReq(list *[]ScheduledReq) *ScheduledReq {
	n := len(*list)
	*list = slices.Grow(*list, 1)[:n+1]
	sr := &(*list)[n]
	*sr = ScheduledReq{}
	return sr
}

func (o *Output) reset() {
	o.StepID = -1
	o.NewReqs = o.NewReqs[:0]
	o.CachedReqs = o.CachedReqs[:0]
	o.TotalScheduledTokens = 0
	o.PreemptedIDs = o.PreemptedIDs[:0]
	o.FinishedIDs = o.FinishedIDs[:0]
	o.NumWaiting, o.NumRunning, o.KVBlocksUsed, o.KVBlocksTotal = 0, 0, 0, 0
	o.blockBuf = o.blockBuf[:0]
}
