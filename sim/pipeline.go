package sim

import (
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/sim/sched"
)

// HostPipeline is the worker side of a step, the one model of it that the
// simulated executor, the ranks of an expert-parallel instance (package
// sim/cluster) and step replay (package replay) run: the worker's CPU
// receives and prepares one step at a time, and the GPU starts a step once
// its inputs are ready and the step before it has ended. Under async
// scheduling the CPU therefore prepares step N+1 while the GPU still runs
// step N, unless the worker is Serial. A step's output reaches the
// scheduler OutputReturnNs after its forward pass and output path end.
type HostPipeline struct {
	// CPUFree is when the worker's CPU has prepared the last step's
	// inputs (for a Serial worker: when it has the last step's sampled
	// tokens); GPUFree is when the GPU ends the last step.
	CPUFree, GPUFree int64
	// Serial is a worker whose loop runs one step to its end before it
	// reads the next: it waits for the step's sampled tokens, so the next
	// step's receive and input preparation start only then, and add to the
	// inter-update period even under async scheduling (steplab's GPU
	// worker). Otherwise the worker launches the forward pass and prepares
	// the next step while the GPU runs it (vLLM's model runner under async
	// scheduling).
	Serial bool
}

// Prepare queues a step's receive (recv ns) and input preparation (prep
// ns) on the worker's CPU from now, and returns when its inputs are ready.
func (p *HostPipeline) Prepare(now, recv, prep int64) (ready int64) {
	p.CPUFree = max(now, p.CPUFree) + recv + prep
	return p.CPUFree
}

// Run runs dev ns of a step's work (its forward pass and output path)
// once its inputs are ready and the GPU is free, and returns when it
// starts and ends. A Serial worker's CPU is busy until the end.
func (p *HostPipeline) Run(ready, dev int64) (start, end int64) {
	start = max(ready, p.GPUFree)
	p.GPUFree = start + dev
	if p.Serial {
		p.CPUFree = max(p.CPUFree, p.GPUFree)
	}
	return start, p.GPUFree
}

// Worker is a simulated worker's host side: it prices what a scheduled
// step ships (Payload), pads a decode-only batch to its CUDA graph, and
// prices and queues the step's receive and input preparation (Host) on
// its HostPipeline. The device time is its owner's: one FPM on one GPU
// (SimExecutor), or a wave of ranks (package sim/cluster).
type Worker struct {
	Payload fpm.PayloadModel
	Host    fpm.HostModel
	// Graphs are the CUDA-graph batch sizes, ascending; decode-only steps
	// up to the largest are padded to the next one.
	Graphs []int
	HostPipeline
	perReq []int64
}

// HostStep is a step as the worker received and prepared it.
type HostStep struct {
	Payload Payload
	// Padded is the CUDA-graph size a decode-only step runs at (0: eager);
	// the features' PaddedBatch is set to it.
	Padded int64
	// RecvNs and PrepNs are the receive and input preparation, OutputNs
	// the output path after the forward pass; Ready is when the inputs are
	// ready.
	RecvNs, PrepNs, OutputNs, Ready int64
}

// Prepare takes the step out (composed as c) at now: f, a copy of c's
// features, is padded to the CUDA graph the step runs at. The payload's
// PerReq is the worker's memory, reused at the next Prepare.
func (w *Worker) Prepare(out *sched.Output, c *Composition, f *fpm.Features, now int64) HostStep {
	var s HostStep
	s.Payload, w.perReq = PayloadOf(w.Payload, out, w.perReq)
	if c.NumPrefill == 0 && len(w.Graphs) > 0 && c.NumDecode <= w.Graphs[len(w.Graphs)-1] {
		s.Padded = int64(PadBatch(c.NumDecode, w.Graphs))
		f.PaddedBatch = float64(s.Padded)
	}
	s.RecvNs = w.Host.ShipNs(s.Payload.Total)
	s.PrepNs = w.Host.PrepNs(out.NumScheduledReqs(), out.TotalScheduledTokens, int(f.NewRequests), int(f.NewReqTokens))
	s.OutputNs = w.Host.OutputNs(out.NumScheduledReqs())
	s.Ready = w.HostPipeline.Prepare(now, s.RecvNs, s.PrepNs)
	return s
}
