// Package capture records ground truth: what a real engine step costs.
//
// It has two sources of steps, and measures operations alone.
//
// # A GPU worker driven by the simulator's scheduler
//
// Capture runs a scenario.Plan of one engine (a trace or generator workload, or a benchmark
// grid under a measurement policy) through the same scheduler the
// simulator runs, but with the real executor: GPUExecutor serializes each
// scheduler output as the worker protocol's step message (mirroring vLLM's
// SchedulerOutput: new requests with their full prompt and block table,
// cached requests as deltas), ships it to a worker process and records
// when the output came back. The worker (capture/worker/worker.py, Python
// and PyTorch; protocol in capture/worker/PROTOCOL.md) runs a
// Llama-architecture decoder with a paged KV cache, ragged attention and
// CUDA graphs, and reports its own timings.
//
//	plan, _ := scenario.Default().Plan()
//	res, err := capture.Capture(plan, "datasets/run", capture.Options{
//		Worker: capture.WorkerOptions{Python: "python3"},
//		Device: "cuda", CheckpointSteps: 256,
//	})
//
// Every time of a step (t_schedule_start … t_update_end) is on one clock,
// WallClock: Go's monotonic clock, in ns since the run's start. The
// payload columns are the exact bytes written to the worker's stdin.
// gpu_time_ns, host_prep_ns, worker_recv_ns and sample_ns are the worker's
// own measurements (CUDA events for the device time on a GPU; host time on
// the CPU). Steps run at async depth 2, as vLLM's async scheduler does.
//
// The same worker runs on the CPU with the tiny preset (Device "cpu",
// Preset "tiny"): that is how CI exercises the whole path (TestCPUCaptureTiny).
//
// NVML (go-nvml, behind the GPUMonitor interface) describes the GPU in the
// manifest and samples it into gpu_samples. OpenNVML returns an error
// wrapping ErrNoNVML where there is no driver, no cgo or no nvml build tag
// (the default build leaves go-nvml out); a capture then records no
// samples instead of failing.
//
// # Failures
//
// The dataset is written as the capture goes, and its open parts are
// closed every Options.CheckpointSteps steps. A worker that dies, hangs
// (no output within WorkerOptions.StepTimeout) or answers garbage ends the
// capture with a *WorkerError that names the failure and carries the
// worker's exit status and last stderr lines; the dataset keeps every
// completed part and its manifest says "partial" (with the reason in its
// notes). A worker that refuses the config at init (it does not fit on
// the device) fails Capture before the dataset directory is created:
// nothing was measured, so nothing is left behind.
//
// # A live Dynamo ForwardPassMetrics stream
//
// SubscribeFPM subscribes to the ZMQ PUB socket of a Dynamo engine's FPM
// publisher (multipart messages: empty topic, 8-byte big-endian sequence
// number, msgpack ForwardPassMetrics) and writes one production step per
// message as it arrives, checkpointing every few seconds. It skips and
// counts idle heartbeats, and counts and lists holes in the sequence
// numbers and in counter_id (FPMResult.Gaps, and the manifest's notes).
//
// # The worker's operations, alone
//
// MeasureOps runs the worker's operations benchmark (opbench.py beside the
// worker script): every GEMM, attention and element-wise operation of a
// forward pass of the given shapes, timed alone over a grid of sizes,
// replayed from a CUDA graph and launched eagerly. It writes JSON lines as
// it measures; fpm/opdb.ReadBench reads them and fpm/opdb.WriteDir writes
// the database the measured-operations prior reads (`steplab capture
// ops`, docs/ops-prior.md).
//
// docs/capture.md is the user's guide: commands, timing fields and their
// clocks, failure behaviour.
package capture
