// Package workload produces the arrivals that drive the simulator: recorded
// traces, open-loop and closed-loop generators, and the self-benchmark grid
// of Dynamo's forward-pass-metrics self-benchmark (its instrumented vLLM
// scheduler).
//
// # Sources
//
// Every source is a deterministic, pull-based iterator (Source): memory stays
// flat in the number of arrivals. All sources of this package also implement
// Peeker (NextAt: "when is the next arrival, given what you know now?") and
// Completer (Complete: the engine reports a finished request).
//
//   - NewTrace replays the requests table of a dataset (arrival_ns,
//     prompt_tokens, output_tokens, prefix_hash_ids), as recorded or rescaled
//     to a target mean rate, optionally windowed, limited and rebased.
//     Prefix hash ids become a hash chain (Arrival.PrefixHashes, the one
//     conversion TraceArrival); each id stands for HashBlockSize tokens (the
//     manifest's, e.g. 512 for Mooncake), and EngineBlockHashes re-blocks
//     the chain to the engine's block size.
//   - NewOpenLoop generates constant, Poisson or gamma (coefficient of
//     variation CV; CV 1 is exactly the Poisson stream) arrivals at RateRPS,
//     for N requests or a duration, with warm-up requests marked.
//   - NewClosedLoop runs U users that send, wait for the completion, think
//     (fixed or exponential) and send again. It needs Complete calls.
//   - BuildGrid lists the benchmark points of a self-benchmark and, for each,
//     the injection (Point.Plan, Point.Arrivals) that measures it under the
//     admission_step or steady_state_second_step policy.
//
// Lengths are drawn from fixed, uniform, lognormal(mean, sigma) or empirical
// distributions; LoadEmpirical samples (prompt, output) pairs jointly from a
// dataset.
//
// # Determinism
//
// Generators draw from named streams of package rng ("workload/arrivals",
// "workload/prompt", "workload/output", "workload/think") derived from
// Seed, so the same seed gives the same arrivals, and changing the length
// distribution does not move a single arrival time. Nothing here reads the
// wall clock or iterates a map.
//
// # Engine protocol
//
// A discrete-event engine, at each new time now, admits every arrival with
// AtNs <= now and keeps a wake-up at the next one:
//
//	for {
//		t, st := src.NextAt()
//		if st != workload.Ready || t > now {
//			break // Waiting: a closed loop needs a completion first
//		}
//		a, _ := src.Next()
//		engine.Admit(a)
//	}
//
// When a request finishes at now, the engine calls src.Complete(id, now) and
// asks NextAt again: a closed-loop user may now send earlier than the wake-up
// the engine holds. Next returning false means "nothing now"; NextAt tells
// Waiting (more after a completion) from Exhausted, and Err tells a failure.
package workload
