// Package workflow simulates a serving workflow: a graph of stages (a
// frontend, orchestrators, engines, services and joins) placed on hosts,
// driven by an open- or closed-loop load on one discrete-event clock
// (package des).
//
// # The graph
//
// A Graph is a list of Stages joined by Edges. An edge is one message: when
// a stage finishes its work on a request it sends a message along each of
// its outgoing edges at once (fan-out). The frontend is the entry and the
// exit: a request from the client enters at the frontend, and edges into the
// frontend carry the response back; the request is answered when every
// response edge has delivered. A join waits for a message on each of its
// incoming edges before it starts; every other stage has exactly one input.
// Outside the edges into the frontend the graph must be acyclic.
//
// Stage kinds:
//
//   - frontend, orchestrator, service: a service-time model (none, fixed,
//     lognormal, per-token linear), Workers parallel workers (0 = unlimited)
//     with a FIFO queue of at most MaxQueue waiting requests (0 = unlimited;
//     a request that finds the queue full is rejected).
//   - engine: a sim.Engine (vLLM-style scheduler, KV blocks, async pipeline,
//     simulated worker priced by a forward-pass model). A request enters it
//     as an arrival with its prompt and output lengths and leaves when the
//     engine reports it finished; queueing is the engine's own.
//   - join: as a service, started when all its inputs have arrived.
//
// # Placement and the network
//
// Every stage runs on a host. A message between two stages on one host costs
// Network.InlineNs (an in-process call); between hosts it pays a network
// hop: LatencyNs + bytes / BandwidthBytesPerSec + SerializeNs. Links are not
// contended (a hop is a pure delay).
//
// # Runs
//
// Run simulates one fresh server: new engines, empty queues, the clock at 0.
// The load's first request arrives after StartupNs (process start-up); the
// process ends DrainNs after the last response. Warm-up requests are
// simulated like any other and marked. A request with a deadline (TimeoutNs)
// that has no response by then is cancelled at the client: it is reported
// with status timeout, its later stages are skipped, and work already inside
// an engine runs to completion (the engine has no abort). Every random draw
// comes from streams derived from the run's rng.Stream, one per stage and
// one for the load, so runs are reproducible and a change in one stage's
// model does not shift the draws of another.
package workflow
