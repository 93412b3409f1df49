package fpm

import (
	"fmt"
	"math"
)

// HostModel prices the host-side work around one engine step, in ns
// (docs/architecture.md#step-timing-windows): the scheduler's schedule() call, serializing and shipping
// the payload to the workers, the worker turning it into model inputs,
// update_from_output(), and the worker's output path after the forward
// pass (sampling and its reply). The device time of the forward pass is
// the FPM's.
//
// Every phase is linear in the step's composition (shipping in bytes at
// 1e3/ShipMBps ns per byte), so each window captured by a real executor
// can be regressed on its own terms and the coefficients replaced; the
// JSON form is the artifact of such a fit.
//
// Why admission steps cost more. A request's first step, shipped through
// scheduled_new_reqs, pays work a steady decode step never pays: schedule()
// allocates all its blocks and builds a NewRequestData; the payload carries
// its whole prompt (PayloadModel); and the worker creates its persistent
// batch state (CachedRequestState, an input-batch row: the prompt copied
// into the token-id array, its block table, sampling and generator state).
// The source document measured this on a very large model (MiniMax-M2.7,
// 4×B200): an admission decode step at B=256 took 171.62 ms against
// 25.36 ms steady (6.4×), at B=1 6.74 ms against 4.83 ms.
//
// Defaults: a modelling choice, to be refit from captures. They are
// plausible for vLLM v1 (Python scheduler and model runner) on an H100/H200
// host with a fast x86 CPU, from these assumptions:
//
//   - schedule(): 150 µs fixed (queues, KV-cache manager, output
//     assembly), 4 µs per scheduled request (the running-request loop,
//     allocate_slots, placeholder bookkeeping), 30 µs more per new request
//     (prefix-cache lookup and allocation of all its blocks, Request state
//     changes, NewRequestData).
//   - ship: 60 µs fixed, then 200 MB/s for pickling, the shared-memory
//     broadcast and unpickling on the worker: pickle moves Python int lists
//     at roughly 10 ns per int each way, i.e. ~25 ns per 3.75-byte token
//     id end to end.
//   - worker input preparation: 250 µs fixed (building input ids,
//     positions, slot mapping, attention metadata, host-to-device copies),
//     1.5 µs per request, 3 ns per scheduled token, and for a new request
//     150 µs of first-step bookkeeping plus 8 ns per prompt token copied
//     into the persistent batch.
//   - update_from_output(): 150 µs fixed, 4 µs per request (append the
//     sampled token, stop checks, output objects).
//
// With these, Llama-3.1-8B on an H200 (Roofline defaults) with 4,096-token
// contexts, a decode step admitted through scheduled_new_reqs against the
// same step on the requests' second step (device + host, no overlap):
// 5.6 vs 5.3 ms (1.06×) at B=1, 32.7 vs 13.8 ms (2.4×) at B=64, 116 vs
// 40 ms (2.9×) at B=256 — inflated, increasingly with B, within the 2–6×
// range at B=256. The source document's B=1 inflation (1.4×) is
// larger because its model's per-request host work is larger (TP=4, MoE);
// refit from captures rather than trusting the prior.
//
// The methods take a pointer: inlined (the simulator prices every step),
// a value receiver is copied, twelve floats, each call.
type HostModel struct {
	ScheduleFixedNs     float64 `json:"schedule_fixed_ns"`
	SchedulePerReqNs    float64 `json:"schedule_per_req_ns"`
	SchedulePerNewReqNs float64 `json:"schedule_per_new_req_ns"`

	ShipFixedNs float64 `json:"ship_fixed_ns"`
	// ShipMBps is the end-to-end rate of serialize + transfer +
	// deserialize, in MB/s (1e6 bytes/s). 0 means shipping is free
	// beyond ShipFixedNs.
	ShipMBps float64 `json:"ship_mb_per_s"`

	PrepFixedNs       float64 `json:"prep_fixed_ns"`
	PrepPerReqNs      float64 `json:"prep_per_req_ns"`
	PrepPerTokenNs    float64 `json:"prep_per_token_ns"`
	PrepPerNewReqNs   float64 `json:"prep_per_new_req_ns"`
	PrepPerNewTokenNs float64 `json:"prep_per_new_token_ns"`

	UpdateFixedNs  float64 `json:"update_fixed_ns"`
	UpdatePerReqNs float64 `json:"update_per_req_ns"`

	// The output path after the forward pass, fixed and per scheduled
	// request: the sampler over the step's logits, the sampled tokens'
	// copy to the host, the worker's bookkeeping of them and its reply.
	// The forward pass's device time (gpu_time_ns, the FPM's) ends at the
	// logits; this is the rest of the step before the output travels to
	// the scheduler. A serial worker pays it before it reads the next
	// step (sim.HostPipeline.Serial). The prior has none (0): it is
	// measured on a capture (fit.FitHostSteps).
	OutputFixedNs  float64 `json:"output_fixed_ns,omitempty"`
	OutputPerReqNs float64 `json:"output_per_req_ns,omitempty"`
}

// DefaultHostModel returns the prior described on HostModel.
func DefaultHostModel() HostModel {
	return HostModel{
		ScheduleFixedNs:     150_000,
		SchedulePerReqNs:    4_000,
		SchedulePerNewReqNs: 30_000,
		ShipFixedNs:         60_000,
		ShipMBps:            200,
		PrepFixedNs:         250_000,
		PrepPerReqNs:        1_500,
		PrepPerTokenNs:      3,
		PrepPerNewReqNs:     150_000,
		PrepPerNewTokenNs:   8,
		UpdateFixedNs:       150_000,
		UpdatePerReqNs:      4_000,
	}
}

// Validate refuses negative or non-finite coefficients.
func (h *HostModel) Validate() error {
	for name, v := range map[string]float64{
		"schedule_fixed_ns": h.ScheduleFixedNs, "schedule_per_req_ns": h.SchedulePerReqNs,
		"schedule_per_new_req_ns": h.SchedulePerNewReqNs, "ship_fixed_ns": h.ShipFixedNs,
		"ship_mb_per_s": h.ShipMBps, "prep_fixed_ns": h.PrepFixedNs, "prep_per_req_ns": h.PrepPerReqNs,
		"prep_per_token_ns": h.PrepPerTokenNs, "prep_per_new_req_ns": h.PrepPerNewReqNs,
		"prep_per_new_token_ns": h.PrepPerNewTokenNs, "update_fixed_ns": h.UpdateFixedNs,
		"update_per_req_ns": h.UpdatePerReqNs, "output_fixed_ns": h.OutputFixedNs, "output_per_req_ns": h.OutputPerReqNs,
	} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("fpm: host coefficient %s = %v: must be finite and >= 0", name, v)
		}
	}
	return nil
}

// HostStep is the composition of a step as the host model sees it.
type HostStep struct {
	Requests        int   // scheduled requests, new and cached
	NewRequests     int   // of those, in scheduled_new_reqs
	ScheduledTokens int   // total_num_scheduled_tokens
	NewTokens       int   // prompt tokens the new requests carry (and resumed requests' tokens)
	PayloadBytes    int64 // serialized SchedulerOutput (PayloadModel.StepBytes)
	// OutputRequests is the requests update_from_output processes; 0 is
	// read as Requests.
	OutputRequests int
}

// HostTimes is the host-side time of one step by phase, in ns.
type HostTimes struct {
	ScheduleNs int64 `json:"schedule_ns"`
	ShipNs     int64 `json:"ship_ns"`
	PrepNs     int64 `json:"prep_ns"`
	UpdateNs   int64 `json:"update_ns"`
	OutputNs   int64 `json:"output_ns,omitempty"`
}

// TotalNs is the sum of the phases: the host time of a step that overlaps
// nothing (synchronous scheduling).
func (t HostTimes) TotalNs() int64 {
	return t.ScheduleNs + t.ShipNs + t.PrepNs + t.UpdateNs + t.OutputNs
}

// ScheduleNs is the time of schedule() for a step of reqs requests, newReqs
// of them admitted.
func (h *HostModel) ScheduleNs(reqs, newReqs int) int64 {
	return roundInt(h.ScheduleFixedNs + float64(reqs)*h.SchedulePerReqNs + float64(newReqs)*h.SchedulePerNewReqNs)
}

// ShipNs is the time to serialize, ship and deserialize a payload of the
// given bytes.
func (h *HostModel) ShipNs(bytes int64) int64 {
	t := h.ShipFixedNs
	if h.ShipMBps > 0 {
		t += float64(bytes) / h.ShipMBps * 1e3 // bytes / (MB/s) = µs; ×1e3 = ns
	}
	return roundInt(t)
}

// PrepNs is the worker's input preparation for reqs requests and tokens
// scheduled tokens, newReqs of the requests new with newTokens prompt
// tokens between them.
func (h *HostModel) PrepNs(reqs, tokens, newReqs, newTokens int) int64 {
	return roundInt(h.PrepFixedNs + float64(reqs)*h.PrepPerReqNs + float64(tokens)*h.PrepPerTokenNs +
		float64(newReqs)*h.PrepPerNewReqNs + float64(newTokens)*h.PrepPerNewTokenNs)
}

// UpdateNs is the time of update_from_output() over reqs requests.
func (h *HostModel) UpdateNs(reqs int) int64 {
	return roundInt(h.UpdateFixedNs + float64(reqs)*h.UpdatePerReqNs)
}

// OutputNs is the output path of a step of reqs scheduled requests after
// its forward pass.
func (h *HostModel) OutputNs(reqs int) int64 {
	return roundInt(h.OutputFixedNs + float64(reqs)*h.OutputPerReqNs)
}

// Times prices every host phase of a step.
func (h *HostModel) Times(s HostStep) HostTimes {
	out := s.OutputRequests
	if out == 0 {
		out = s.Requests
	}
	return HostTimes{
		ScheduleNs: h.ScheduleNs(s.Requests, s.NewRequests),
		ShipNs:     h.ShipNs(s.PayloadBytes),
		PrepNs:     h.PrepNs(s.Requests, s.ScheduledTokens, s.NewRequests, s.NewTokens),
		UpdateNs:   h.UpdateNs(out),
		OutputNs:   h.OutputNs(s.Requests),
	}
}
