// Package validate checks a dataset directory against the data contract of
// docs/architecture.md#data-contract and the invariants of its step timings
// (docs/architecture.md#step-timing-windows), and reports every
// violation with its table, row, part file and field.
//
// # What is checked
//
//   - manifest: present (a directory of tables without one is not a dataset:
//     Dataset returns datasets.ErrNoManifest), schema version readable,
//     status known; every part the manifest lists exists with its row count,
//     size and SHA-256; a partial dataset (an interrupted writer) is reported
//     as a warning with the parts and rows it completed. What Open assumed of
//     a minimal manifest (no status: complete; no table list: the tables on
//     disk) is a warning each.
//   - every table: each part is readable Parquet and has the schema's
//     required columns in types that convert (a missing column or one of the
//     wrong type is an error naming it, and naming the part's column with a
//     close name; the rows of that table are then not checked); columns read
//     as their defaults (absent, all null, Null-typed) are one warning per
//     table, and the checks that need them skip their Unknown values.
//   - steps: timings ordered where known (t_schedule_start <= t_schedule_end
//     <= t_dispatch <= t_output <= t_update_end, Unknown skipped),
//     narrow_time_ns = t_output - t_schedule_start, wall_time_ns per Dynamo's
//     FPM definition (below), no negative int except Unknown, no NaN, Inf or
//     negative var_* except Unknown, kind and role in their enums, kind agrees with the
//     composition, step_id strictly increasing per (worker_id, dp_rank),
//     invalid rows carry an invalid_reason, kv_blocks_used <= kv_blocks_total.
//   - steps joined with step_requests: num_new_reqs + num_cached_reqs = rows,
//     num_new_reqs = is_new rows, num_resumed_reqs = is_resumed rows,
//     num_prefill_requests / num_decode_requests = is_prefill / !is_prefill
//     rows, total_scheduled_tokens = Σ num_scheduled_tokens,
//     sum_prefill_tokens = Σ over prefill rows, and the requests' payload
//     shares against the step's payload (below); each step_requests row
//     belongs to a step, names a known request (when requests exists) and
//     appears once per step.
//   - requests: req_id present and unique, arrival_ns >= 0, token counts >= 0,
//     arrival <= first_scheduled <= first_token <= finish where known, status
//     in its enum.
//   - gpu_samples: no negative values except Unknown, power finite.
//
// # wall_time_ns
//
// For step N of a (worker_id, dp_rank) with a previous step N-1: when N-1's
// update ended after N's schedule started (N was scheduled while N-1 was in
// flight, async scheduling), wall_time_ns must be the inter-update period
// t_output(N) - t_update_end(N-1). When N-1's update ended at or before N's
// schedule start, the engine either went straight on (a synchronous loop:
// the inter-update period again) or had been idle (Dynamo then times the
// step from its own schedule: t_output(N) - t_schedule_start(N)); the
// columns cannot tell the two apart, so either is accepted. The first step
// of a worker must use its own schedule start. A step flagged overlapped must have been
// scheduled before the previous update ended. Where a needed time is Unknown
// the check is skipped.
//
// # payload_bytes
//
// step_requests.payload_bytes is each request's share of what its step
// shipped to the worker; steps.payload_bytes is the whole message, which
// also carries bytes that belong to no request (the SchedulerOutput's own
// fields and framing, the scheduled-token map, finished and preempted
// ids). Where a step and its step_requests both record payload (neither
// 0 nor Unknown), two rules hold:
//
//   - every source: Σ step_requests.payload_bytes <= payload_bytes;
//   - the simulator (manifest source kind "simulate": simulate and whatif),
//     which prices each request and attributes the step's rounded totals
//     to its requests: Σ step_requests.payload_bytes = payload_new_bytes +
//     payload_cached_bytes exactly.
//
// A capture records both too, but measures them on the wire: a new
// request's share is its encoded NewRequestData, which leaves out the
// list's framing that payload_new_bytes counts, and a cached request's
// share is an estimate of its part of the parallel lists of
// scheduled_cached_reqs; so only the first rule holds there. The
// importers record no per-request payload and are not checked. A
// violation is reported on the steps row, naming the step_id.
//
// # Memory
//
// steps and step_requests are read as two streams in step order and merged:
// memory is one buffer per stream plus the step_requests rows of one step,
// and one small record per (worker_id, dp_rank). The merge expects the
// step_requests rows of a step to follow those of the step before (writers
// write both tables in step order). When the step_ids of steps increase
// across the whole table, a step_requests group whose step_id is behind the
// current step is reported as an orphan and skipped; otherwise (several
// workers interleaved) groups are matched in order only.
//
// The requests table needs a set of every req_id (to find duplicates and
// to resolve step_requests.req_id): memory proportional to the number of
// requests, about 60 bytes plus the id per request. Nothing else grows with
// the size of a table.
package validate
