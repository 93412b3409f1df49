// Package sched is steplab's model of the vLLM v1 scheduler and its KV cache
// manager, written as a pure, deterministic state machine in the style of
// etcd's raft: no clock, no I/O, no goroutines, no randomness, and no map
// iteration that could reach an output. What it decides depends only on the
// sequence of calls it receives, so the simulator (under a virtual clock)
// and a capture (under the wall clock, driving a real GPU worker) run the
// same code and can be compared step by step.
//
// # Driving it
//
// Inputs are arrivals (Add), step results (Update) and cancellations
// (Abort); the output is the next step's batch (Schedule). Synchronously:
//
//	s, err := sched.New(cfg)
//	s.Add(&sched.Request{ID: "a", PromptTokens: 1000, MaxOutputTokens: 200})
//	for s.HasUnfinished() {
//		out := s.Schedule()
//		// execute out (simulate or run it); then
//		res := s.Update(out) // res.FinishedIDs, res.Sampled
//	}
//
// With async scheduling (vLLM's batch queue of depth 2) the engine schedules
// step N+1 while step N still runs, and updates N afterwards:
//
//	prev := s.Schedule()
//	for ... {
//		next := s.Schedule() // before Update(prev)
//		s.Update(prev)
//		prev = next
//	}
//
// Schedule advances each scheduled request's computed tokens at once (as
// vLLM's _update_after_schedule does) and counts an output placeholder for
// each request whose step reaches the end of its known tokens, so the next
// Schedule can already give it its next decode token. Update turns
// placeholders into tokens. Non-empty outputs must be updated in StepID
// order; an empty output (Empty()) needs no Update. The depth rule: a
// request is scheduled again only while it has fewer than 2 placeholders, and
// not at all when its placeholders already bring it to MaxOutputTokens
// (vLLM's async check). With depth 2 a request has at most one placeholder
// when Schedule runs, which is exactly vLLM's behaviour; the cap only keeps a
// deeper pipeline from running ahead of a request's outputs. A request that
// finishes or is aborted while it is part of an in-flight step has that work
// discarded: Update skips it, it produces no token, and its blocks were
// freed when it finished.
//
// # Ownership and cost
//
// An Output and its slices belong to the scheduler from Schedule until the
// Output is passed to Update, which recycles it; an UpdateResult is valid
// until the next Update. In steady state Schedule and Update allocate
// nothing and cost O(scheduled requests + blocks allocated); Add costs one
// request record, Abort O(queue length).
//
// # Semantics (vLLM v1)
//
//   - RUNNING requests first, in order, within MaxNumBatchedTokens: each gets
//     num_tokens + placeholders - computed tokens, capped by
//     LongPrefillTokenThreshold, the remaining budget and
//     MaxModelLen-1-computed. When its KV blocks cannot be allocated, the
//     last running request is preempted (FCFS), possibly the one being
//     scheduled: its blocks are freed, its computed tokens reset to 0, and it
//     goes to the front of WAITING; if it was the one being scheduled,
//     scheduling of running requests stops.
//   - WAITING requests are admitted only if nothing was preempted in the
//     step, in order, while running < MaxNumSeqs, budget and blocks remain
//     (no watermark). A prefix-cache hit (whole blocks, at most
//     num_tokens-1 tokens, so the last token is always computed and a prompt
//     of N full cached blocks recomputes its last block) reduces the tokens
//     to compute. Without chunked prefill a request that does not fit the
//     remaining budget stops admission. The first failed allocation stops
//     admission too.
//   - A request's first scheduled step puts it in Output.NewReqs; so does
//     the step that resumes it after a preemption (Resumed, shipping prompt
//     and outputs, which it recomputes less any prefix hit on its own cached
//     blocks). Later steps put it in CachedReqs. A step is prefill (context
//     phase) for a request without output tokens, and for a resumed request
//     until its context is recomputed; otherwise it is a decode of exactly
//     one token.
//   - KV blocks: block 0 is vLLM's null block, so NumGPUBlocks-1 are usable.
//     Freed blocks join the tail of an LRU free queue (a request's tail
//     block first); allocation takes the head and evicts its cached hash.
//     Full blocks are cached when allocated for computed tokens, so a request
//     admitted later in the same step may hit them. Identical blocks are not
//     de-duplicated; a lookup returns the one cached first.
//   - Block identity: Request.BlockHashes gives chain hashes of leading full
//     prompt blocks (shared prefixes); every other full block (the rest of
//     the prompt, output tokens) is unique to its request, hit only by the
//     request itself after a preemption, and forgotten when it finishes.
//   - Request.PrecomputedTokens (benchmark injection) counts as computed at
//     the first admission only.
package sched
