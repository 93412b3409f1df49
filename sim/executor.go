package sim

import "github.com/steplab/steplab/sim/sched"

// Executor runs the steps the scheduler decides. The simulated executor
// (SimExecutor) predicts when each step's output arrives; the real one
// (capture.GPUExecutor) ships the step to a GPU worker and waits for it.
// The engine calls Submit in step order and Result for the oldest step in
// flight; both run on the engine's clock.
type Executor interface {
	// Submit hands a scheduled step to the worker at time now and reports
	// the bytes shipped (serialized exactly by a real executor, from the
	// payload model by the simulated one).
	Submit(out *sched.Output, now int64) (Payload, error)
	// Result returns the outcome of step stepID, the oldest in flight, and
	// forgets it. When the output has not arrived by now, ready is false and
	// wake is the time it will arrive if the executor knows it (the
	// simulated one does), else -1. With block set, a real executor waits
	// for the output instead and returns ready.
	Result(stepID int64, now int64, block bool) (r StepResult, ready bool, wake int64, err error)
	// Close stops the worker.
	Close() error
}

// Payload is what one step shipped to the worker, in bytes.
type Payload struct {
	Total, New, Cached int64
	// PerReq[i] is the bytes of the i-th scheduled request, new requests
	// first, in the order of Output.NewReqs then Output.CachedReqs. An
	// executor may reuse its memory at the next Submit (the engine keeps a
	// copy for as long as the step is in flight).
	PerReq []int64
}

// StepResult is the outcome of one step as the executor reports it.
// Times are on the engine's clock, in ns; Unknown (-1) where not measured.
type StepResult struct {
	StepID  int64
	TOutput int64 // the model output reached the scheduler
	// Worker-side breakdown.
	GPUTimeNs    int64 // device time of the forward pass (CUDA events)
	HostPrepNs   int64 // payload → model inputs
	WorkerRecvNs int64 // receive and decode the payload
	SampleNs     int64
	PaddedBatch  int64 // CUDA-graph size the step ran at (decode rows, else tokens), 0 when eager
}
