package sim

import (
	"fmt"

	"github.com/steplab/steplab/fpm"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim/sched"
)

// SimExecutor is the simulated worker: its Worker prices each step's
// payload (PayloadModel), its trip to the worker and the worker's input
// preparation (HostModel) on the worker's CPU, and an FPM its device time
// on a GPU that runs one step at a time (HostPipeline), and so predicts
// when each output reaches the scheduler.
type SimExecutor struct {
	FPM fpm.FPM
	Worker
	// OutputReturnNs is the time from the end of the forward pass until the
	// sampled tokens reach the scheduler (device-to-host copy, IPC).
	OutputReturnNs int64

	results []StepResult
	head    int
	// extrapolated counts the operations the FPM priced past its measured
	// range (fpm.Extrapolating), this executor's own: engines that step
	// side by side never share it.
	extrapolated int64
}

// ExtrapolatedOps is how many operations the FPM priced past its measured
// range so far (0 for an FPM that does not say).
func (x *SimExecutor) ExtrapolatedOps() int64 { return x.extrapolated }

// OutputReturnNs is the default time from the end of a forward pass until
// its sampled tokens reach the scheduler (the device-to-host copy and the
// worker's reply), for every executor that composes a step's timeline.
const OutputReturnNs = 30_000

// NewSimExecutor builds a simulated executor with the given models.
func NewSimExecutor(fpModel fpm.FPM, payload fpm.PayloadModel, host fpm.HostModel, captureSizes []int) *SimExecutor {
	return &SimExecutor{FPM: fpModel, Worker: Worker{Payload: payload, Host: host, Graphs: captureSizes}, OutputReturnNs: OutputReturnNs}
}

// PayloadOf prices a scheduler output with the payload model. PerReq
// (written into perReq, returned for reuse) attributes the step's new and
// cached bytes to its requests: a request's share is how much NewBytes (or
// CachedBytes) grows when it joins the requests before it, so the shares
// add up to payload_new_bytes + payload_cached_bytes exactly, and each is
// within a byte of the request's own NewReqBytes or CachedReqBytes. The
// rest of the step's bytes (the SchedulerOutput itself, finished ids)
// belong to no request.
func PayloadOf(p fpm.PayloadModel, out *sched.Output, perReq []int64) (Payload, []int64) {
	perReq = perReq[:0]
	// The running totals are locals and each request prices a fresh
	// PayloadStep: the inlined pricing copies its argument, and copying a
	// struct whose fields were just stored one by one stalls the loop (the
	// wide loads of the copy cannot be forwarded from the narrow stores).
	var tokens, blocks int
	var before int64
	for i := range out.NewReqs {
		sr := &out.NewReqs[i]
		tokens += sr.NumTokens
		blocks += sr.NumBlocks
		now := p.NewBytes(fpm.PayloadStep{NewReqs: i + 1, NewTokens: tokens, NewBlocks: blocks})
		perReq = append(perReq, now-before)
		before = now
	}
	var cachedBlocks int
	before = 0
	for i := range out.CachedReqs {
		cachedBlocks += len(out.CachedReqs[i].NewBlockIDs)
		now := p.CachedBytes(fpm.PayloadStep{CachedReqs: i + 1, CachedNewBlocks: cachedBlocks})
		perReq = append(perReq, now-before)
		before = now
	}
	b := p.Breakdown(fpm.PayloadStep{NewReqs: len(out.NewReqs), NewTokens: tokens, NewBlocks: blocks,
		CachedReqs: len(out.CachedReqs), CachedNewBlocks: cachedBlocks, FinishedReqs: len(out.FinishedIDs) + len(out.PreemptedIDs)})
	return Payload{Total: b.Total, New: b.New, Cached: b.Cached, PerReq: perReq}, perReq
}

// Submit implements Executor.
func (x *SimExecutor) Submit(out *sched.Output, now int64) (Payload, error) {
	c := Compose(out)
	return x.SubmitComposed(out, &c, now)
}

// SubmitComposed is Submit for a caller that already composed the step
// (the engine does, to record it): it saves composing it twice.
func (x *SimExecutor) SubmitComposed(out *sched.Output, c *Composition, now int64) (Payload, error) {
	f := c.Features
	h := x.Prepare(out, c, &f, now)
	var ns float64
	if e, ok := x.FPM.(fpm.Extrapolating); ok {
		var n int
		ns, n = e.PredictExtNs(f)
		x.extrapolated += int64(n)
	} else {
		ns = x.FPM.PredictNs(f)
	}
	dev := int64(ns + 0.5)
	if dev <= 0 {
		return h.Payload, fmt.Errorf("FPM predicted a non-positive device time (%d ns) for a %s step", dev, f.Kind())
	}
	_, end := x.Run(h.Ready, dev+h.OutputNs)
	// Results are consumed in order: compact the queue so its memory stays
	// bounded by the steps in flight, not the length of the run.
	if x.head > 64 && x.head*2 > len(x.results) {
		n := copy(x.results, x.results[x.head:])
		x.results, x.head = x.results[:n], 0
	}
	x.results = append(x.results, StepResult{
		StepID: out.StepID, TOutput: end + x.OutputReturnNs,
		GPUTimeNs: dev, HostPrepNs: h.PrepNs, WorkerRecvNs: h.RecvNs, SampleNs: datasets.Unknown, PaddedBatch: h.Padded,
	})
	return h.Payload, nil
}

// Result implements Executor.
func (x *SimExecutor) Result(stepID int64, now int64, _ bool) (StepResult, bool, int64, error) {
	if x.head >= len(x.results) || x.results[x.head].StepID != stepID {
		return StepResult{}, false, 0, fmt.Errorf("simulated executor: step %d is not the oldest in flight", stepID)
	}
	r := x.results[x.head]
	if r.TOutput > now {
		return r, false, r.TOutput, nil
	}
	x.head++
	return r, true, r.TOutput, nil
}

// Close implements Executor.
func (x *SimExecutor) Close() error { return nil }

// HostAdapter prices the scheduler-side host phases with a HostModel.
type HostAdapter struct{ M fpm.HostModel }

// ScheduleNs implements HostCosts.
func (h *HostAdapter) ScheduleNs(out *sched.Output) int64 {
	return h.M.ScheduleNs(out.NumScheduledReqs(), len(out.NewReqs))
}

// UpdateNs implements HostCosts.
func (h *HostAdapter) UpdateNs(out *sched.Output) int64 { return h.M.UpdateNs(out.NumScheduledReqs()) }
