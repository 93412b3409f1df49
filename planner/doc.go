// Package planner searches placements for a service level with the
// simulator itself: for a model, GPU types with prices and counts, a
// workload and TTFT/ITL (and optionally end-to-end) objectives at a
// percentile, it enumerates a search space (GPU, tensor and expert
// parallelism, aggregated or xPyD pools, replicas, max_num_seqs,
// max_num_batched_tokens, KV-cache and weight dtypes), prunes what cannot
// work analytically (the memory-fit check of catalog.KVBlocks, a TTFT lower
// bound at zero load and an ITL lower bound at batch 1 from the prior, a
// throughput bound against a target rate) and simulates every survivor
// with its router (sim/cluster) at rates found by a deterministic
// bisection, to the highest offered rate that still meets the objectives.
//
// A plan is a sweep (package sweep) of kind plan: the space becomes the
// sweep's varied keys (Axes), each candidate a point, so that a plan runs
// on every core, or over the JetStream queue of package dist, with
// the results gathered in candidate order. From the candidates (Candidate)
// Summarise takes the Pareto frontier (goodput per GPU, cost per million
// output tokens, TTFT and ITL) and the chosen configuration, and Write
// draws the frontier and writes the chosen launch settings (vLLM engine
// arguments, a disaggregated graph, the steplab scenario).
//
// Every candidate simulates the same arrivals (the scenario's seed, not a
// per-point one: common random numbers), so candidates differ only by
// their configuration.
package planner
