// Package importers turns traces published by other tools into steplab
// datasets (docs/architecture.md#data-contract). Each format has one file:
//
//   - azure (azure.go): Azure LLM inference trace CSV
//     (TIMESTAMP,ContextTokens,GeneratedTokens) → requests.
//   - mooncake (mooncake.go): Mooncake JSONL (timestamp ms, input_length,
//     output_length, hash_ids of 512-token blocks) → requests with
//     prefix_hash_ids.
//   - vllm-requests (vllm.go): LLMServingSim's per-request vLLM log
//     (requests.jsonl + meta.json) → requests with queue, schedule,
//     first-token and finish times; engine limits and model from meta.json.
//   - dynamo-fpm-artifact (dynamo_artifact.go): Dynamo's self-benchmark
//     result JSON, schema_version 2 → steps (role measured), measurement
//     policy, engine limits, CUDA-graph sizes, skipped points in the notes.
//   - dynamo-fpm (fpm.go): a file of msgpack ForwardPassMetrics v1 messages
//     → steps (role production). DecodeFPM, EncodeFPM and FPM.Step are the
//     reusable single-message codec for a live subscriber.
//
// Import writes a dataset; ReadRequests and ReadSteps return the rows in
// memory (tests and benchmarks: ReadRequests("azure",
// "embedded:azure-conv-2023")). A source is a path or "embedded:NAME" (see
// package embedded).
//
// Decisions common to all formats:
//
//   - Times are int64 nanoseconds. Request traces are relative to the first
//     arrival; event times a source does not have are datasets.Unknown (-1),
//     and a trace that never ran has status not_run.
//   - azure and mooncake stream their input and require arrivals in time
//     order: a timestamp earlier than the previous row's is an error naming
//     the line (equal timestamps are kept). vllm-requests is small and is
//     sorted by arrival instead, because data-parallel engines queue
//     independently (see runVLLMRequests for its two clocks).
//   - Token counts must be non-negative integers; "374.0" is accepted.
//   - Every error names the file and the line (or record and byte offset,
//     or JSON line:column) and the problem, e.g.
//     `trace.csv:17: ContextTokens: "abc" is not an integer`. Nothing
//     panics on any input: each format has a fuzz target (FuzzAzure,
//     FuzzMooncake, FuzzVLLMRequests, FuzzDynamoArtifact, FuzzDynamoFPM).
//   - The dataset is written under a temporary name and renamed into place
//     after the whole source was read, so a failed import leaves nothing and
//     --force replaces an old dataset only on success.
//   - The manifest records Source{Kind: "import", Format, Path, SHA256 of the
//     source file}, the tool and command, and notes for every assumption.
package importers
