// Package cluster places and drives engines: pools of sim.Engines behind a
// router, on one virtual clock, with prefill/decode disaggregation and
// expert parallelism. One engine is a cluster of one: a scenario without
// a cluster block, a benchmark grid and a capture's engine on its GPU
// worker all run here, through the one drive loop of the module.
//
// # The pieces
//
// A Plan is plain data, as a raft.Config is: pools of priced engines
// (sim.Plan), the router and the links between GPUs, and the whole model
// (a mixture of experts brings its experts in catalog.Shape.MoE). Package
// scenario builds it from a scenario's cluster block or a manifest and
// Resolve completes it; this package reads no document. Plan.New builds
// the Cluster; Drive runs it over a workload (DriveUntil: until a stop
// channel closes), the one place where arrivals are handed to engines and
// a run's end, a stall or an idle cluster are decided; Run runs a sim.Job
// (a workload, or a benchmark grid as sim.Bench.Source makes it one) into
// a dataset, Execute the same on a sim.Backend (the engine of a plan of
// one on a real worker: its clock moves by itself, so an event is due no
// earlier than now); Bounds re-simulates at the edges of the FPM's
// prediction intervals.
//
//   - Pools. One pool of role both (aggregated), or one prefill and one
//     decode pool (disaggregated, xPyD). A pool has replicas engines, each
//     with its own scheduler, KV cache and worker: worker_id
//     "<pool>-<i>" in the steps table.
//   - Routers (RouterNames): round_robin; least_requests (fewest routed and
//     unfinished); least_kv (least KV in use); session (a conversation stays
//     on its first engine, keyed by the prompt's prefix hash at
//     session_tokens); kv, Dynamo's KV router, which weighs the prompt
//     blocks a worker has cached against its prefill and decode load and
//     picks the lowest logit, or samples a softmax at a temperature; and
//     vllm_dp, vLLM's data-parallel balancer (waiting·4 + running, counts
//     published every 100 ms). Every decision is a row of the routes
//     table (Route).
//   - Disaggregation. A request prefills on a prefill engine with one
//     output token (vLLM's max_tokens = 1), its prompt KV (prompt tokens ×
//     KV bytes per token) crosses the kv_transfer link, one transfer at a
//     time per prefill engine, and the decode engine admits it with all
//     but the last prompt token computed (sim/sched's PrecomputedTokens, as
//     vLLM's P/D connectors load prompt − 1 tokens) and samples its first
//     token. Transfers are rows of the transfers table (Transfer) and a
//     track in the Perfetto export. The request's row is one: its arrival,
//     its prefill's first schedule, the decode engine's first token and
//     finish.
//   - Experts. A pool with expert_parallel of a mixture of experts steps in
//     instances (expert_parallel engines each, one data-parallel rank
//     apiece, vLLM's DP + EP): every rank joins every wave, a quiet rank
//     with a dummy step, and a wave lasts the slowest rank's own forward
//     pass (catalog.DenseShape, the model without its routed experts, priced by
//     the pool's FPM) plus the experts of all ranks' tokens on the busiest
//     GPU and the all-to-all (moePricer states the formulas). Links left
//     out are the GPU's own interconnect (DefaultLink).
//   - Autoscaling. A pool with an autoscale policy (PoolPlan.Scaling) has a
//     planner that decides every interval from what the interval measured
//     (requests in flight, KV use, p90 TTFT and ITL): a new engine holds
//     its GPUs after the scale-up delay and becomes routable after the
//     model's load time; an engine scaled down drains, then is removed.
//     Plan.Elastic reports such a plan (its engines change during the
//     run); Cluster.Service its GPU-hours and each pool's replica
//     timeline, which the manifest records.
//
// # Use
//
//	sc := scenario.Default()
//	_ = sc.Set("cluster.pools={prefill: {role: prefill, replicas: 2}, decode: {role: decode, replicas: 6}}")
//	_ = sc.Set("cluster.router.name=kv")
//	p, err := sc.Plan()
//	if err != nil { ... } // names the field at fault
//	res, err := scenario.Run(p, "out/pd", sim.RunOptions{}) // cluster.Run of p.Plan
//
// A capture runs the same loop on its worker: capture.Capture calls
// scenario.Execute, cluster.Execute of the one engine with the GPU
// executor and the wall clock as its sim.Backend.
//
// A recorded run comes back as the engines it had with
// scenario.PlanFromManifest (a vLLM import's data_parallel_size and
// enable_expert_parallel make a data-parallel instance behind vllm_dp);
// steplab replay and calibrate re-simulate through it.
//
// # Determinism
//
// Events fire in (time, order scheduled) order, an arrival before any
// event at its time; routers draw only from streams derived from the
// scenario's seed; nothing reads the wall clock or lets map order reach an
// output. The same plan and seed give a byte-identical dataset, on one
// goroutine or many: between two arrivals the engines requests arrive at
// (the aggregated or the prefill pool) step side by side, each engine or
// expert-parallel instance on one goroutine, and a merging goroutine
// writes what they recorded in the order one event at a time would, firing
// the decode engines and transfers itself (parallel.go;
// Plan.SequentialReason says when a plan cannot, and the manifest records
// it).
package cluster
