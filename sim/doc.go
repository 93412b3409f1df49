// Package sim is steplab's deterministic model of a vLLM-style engine: a
// discrete-event host loop around one scheduler (package sim/sched), two
// executors behind one interface and workloads (package sim/workload).
//
// # The pieces
//
// The scheduler is a pure state machine (etcd raft style): it takes
// arrivals and step results and returns its next decision; clock and I/O
// stay outside. Engine is the host loop of vLLM's EngineCore around it:
// Run(now) executes one loop iteration at time now and returns when the
// loop must run next, keeping up to two steps in flight under async
// scheduling (step_with_batch_queue) or one when synchronous. An Executor
// runs the steps: SimExecutor prices each with the payload model, the
// host-overhead model and a forward-pass model (package fpm) on a GPU
// that runs one step at a time; capture.GPUExecutor ships it to a real
// worker. A Clock is virtual (VirtualClock: host work advances it by its
// modelled cost) or the wall clock of a capture.
//
// Every step is recorded with the timing fields of docs/architecture.md#step-timing-windows:
// t_schedule_start/end, t_dispatch (payload serialized and handed over),
// t_output (the loop receives the output), t_update_end, wall_time_ns (the
// inter-update period; the narrow window for the first step after idle),
// narrow_time_ns, gpu_time_ns, host_prep_ns, and overlapped (scheduled
// while the previous step ran). Under async scheduling the narrow window of
// a step therefore also counts the wait for the step before it, while the
// inter-update period is its own step (R2: 11.29 ≈ 6.74 + 4.83 ms in the
// published self-benchmark measurement, docs/architecture.md#r2-async-timing-windows).
//
// # Use
//
// A Plan is one engine, as plain data: the priced models (fpm.Models,
// which package pricing builds from a spec), the scheduler limits, the
// async mode and the CUDA-graph sizes. Package scenario builds it from a
// YAML scenario or a recorded run's manifest; this package reads no
// document and prices no spec. Plan.NewEngine is the one engine
// constructor (simulate, capture, request replay, calibration, what-if
// stages and sweeps all call it), on a Backend: the zero Backend is the
// plan's simulated executor on a virtual clock, a capture brings its GPU
// executor and wall clock. Engine.Run is one iteration of its loop:
//
//	eng, err := p.NewEngine(sim.Backend{}, sink) // simulated executor, virtual clock
//	next, err := eng.Run(now)                    // when to run next; NoWake: idle until an arrival
//
// This package has no drive loop. An engine is driven by package
// sim/cluster, as a cluster of one when it is alone: cluster.Drive hands
// it its arrivals and decides when the run ends, stalls or idles, for a
// simulation, a capture (cluster.Execute, on the capture's Backend) and a
// benchmark grid alike (Bench.Source is the grid as a workload). A Job is
// what a run takes: the workload's arrivals or a benchmark grid, and the
// manifest of the dataset it writes (WriteDataset writes it, partial on
// failure; ErrInterrupted ends a run whose stop channel closed).
//
// The same plan and seed give a byte-identical dataset: nothing in this
// package reads the wall clock, uses global random state or lets map order
// reach an output. Memory is flat in trace length: rows stream to the
// dataset writer and latency percentiles come from bounded histograms (internal/hist).
//
// Several engines (replicas behind a router, prefill and decode pools,
// expert-parallel instances) are package sim/cluster's too: it builds each
// engine with Plan.NewEngine and drives them on one clock.
//
// Benchmark decode points (workload kind "benchmark") are run one at a time
// on an idle engine (Bench.Source), as Dynamo's self-benchmark does: under
// steady_state_second_step the admission step is kept as scaffolding and
// the request's second step is measured; under admission_step the
// admission step is measured. Both are recorded as decode steps at the
// point's coordinate.
package sim
