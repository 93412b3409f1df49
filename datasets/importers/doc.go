// Package importers turns traces published by other tools into steplab
// datasets (docs/architecture.md#data-contract). Each format has one file, and is read as its
// upstream writer defines it (repository, file and commit read):
//
//   - azure (azure.go): Azure LLM inference trace CSV
//     (TIMESTAMP,ContextTokens,GeneratedTokens) → requests. The 2023 files
//     and the 2024 week-long ones (timestamps with +00:00;
//     Azure/AzurePublicDataset @ b469a113,
//     analysis/AzureLLMInferenceDataset2024.ipynb).
//   - mooncake (mooncake.go): Mooncake JSONL (timestamp ms, input_length,
//     output_length, hash_ids of 512-token blocks) → requests with
//     prefix_hash_ids.
//   - vllm-requests (vllm.go, vllm_timeseries.go): LLMServingSim's vLLM run
//     (casys-kaist/LLMServingSim @ 5daddb21, bench/core/recorder.py and
//     stat_logger.py): requests.jsonl → requests with arrival (the
//     client's arrival_time mapped onto the engine's clock, so the wait
//     before vLLM's engine loop queues a request counts in TTFT), schedule,
//     first-token and finish times; meta.json → engine (its kv_cache and
//     resolved_config sections where present: num_gpu_blocks,
//     gpu_memory_utilization, num_kv_tokens, parallel sizes, CUDA-graph
//     sizes; async_scheduling, when it does not say, vLLM's default for
//     the recorded version), model and hardware; timeseries.csv →
//     engine_samples.
//   - vllm-bench and sglang-bench (bench_serving.go): the result JSON of
//     `vllm bench serve --save-detailed` (vllm-project/vllm @ 009e6d4a,
//     vllm/benchmarks/serve.py) and of `sglang.bench_serving
//     --output-details` (sgl-project/sglang @ 0033168f,
//     python/sglang/bench_serving.py) → requests with client-side first
//     token and finish times; a result without the per-request times (no
//     ttfts, lengths or not) is imported as a summary (no rows,
//     Result.Summary, workload kind "summary").
//   - aiperf (aiperf.go): AIPerf's profile_export.jsonl, both record
//     schemas (ai-dynamo/aiperf @ db4f6397 and @ 7c31f579,
//     aiperf/common/models/record_models.py) → requests.
//
// Options.Hardware, Model and Engine record what ran where a source does
// not (describe.go): a request trace or a benchmark result names no GPU.
//   - burstgpt (burstgpt.go): BurstGPT CSV (HPMLL/BurstGPT @ e92f533b,
//     README.md schema) → requests; failures (0 response tokens) aborted.
//   - blis (blis.go): a BLIS (inference-sim) TraceV2 trace, data CSV and
//     header YAML (inference-sim/inference-sim @ f90a1e3a,
//     sim/workload/tracev2.go and replay.go) → requests with chunk times
//     and prefix groups as prefix_hash_ids. The export package writes the
//     same format back (export.BLISTrace).
//   - dynamo-fpm-artifact (dynamo_artifact.go): Dynamo's self-benchmark
//     result JSON, schema_version 2 → steps (role measured), measurement
//     policy, engine limits, CUDA-graph sizes, skipped points in the notes.
//   - dynamo-fpm (fpm.go): a file of msgpack ForwardPassMetrics v1 messages
//     → steps (role production). DecodeFPM, EncodeFPM and FPM.Step are the
//     reusable single-message codec for a live subscriber. The messages are
//     Dynamo's msgspec Structs (ai-dynamo/dynamo @ 2712426f,
//     components/src/dynamo/common/forward_pass_metrics.py), which msgspec
//     encodes as msgpack maps; testdata/dynamo_fpm_publisher.msgpack holds
//     payloads written exactly that way (the script beside it says why the
//     bytes are Dynamo's) and EncodeFPM reproduces them byte for byte.
//
// Import writes a dataset; ReadRequests returns a request format's rows in
// memory (tests and benchmarks: ReadRequests("azure",
// "embedded:azure-conv-2023")). A source is a path or "embedded:NAME" (see
// package embedded).
//
// Decisions common to all formats:
//
//   - Times are int64 nanoseconds. Request traces are relative to the first
//     arrival; event times a source does not have are datasets.Unknown (-1),
//     a trace that never ran has status not_run, and a request the source
//     marks as failed is aborted. Benchmark clients (vllm-bench,
//     sglang-bench, aiperf) measure on the client side: their first-token
//     and finish times include the HTTP path.
//   - azure, mooncake and burstgpt stream their input and require arrivals
//     in time order: a timestamp earlier than the previous row's is an error
//     naming the line (equal timestamps are kept). The run formats
//     (vllm-requests, vllm-bench, sglang-bench, aiperf, blis) are sorted by
//     arrival instead, and the number of rows moved is noted (data-parallel
//     engines queue independently; AIPerf writes records as they complete).
//   - Token counts must be non-negative integers; "374.0" is accepted.
//   - Every error names the file and the line (or record and byte offset,
//     or JSON line:column) and the problem, e.g.
//     `trace.csv:17: ContextTokens: "abc" is not an integer`. Nothing
//     panics on any input: each format has a fuzz target (FuzzAzure,
//     FuzzMooncake, FuzzVLLMRequests, FuzzVLLMTimeseries, FuzzBenchServing,
//     FuzzAIPerf, FuzzBurstGPT, FuzzBLIS, FuzzDynamoArtifact, FuzzDynamoFPM).
//   - The dataset is written under a temporary name and renamed into place
//     after the whole source was read, so a failed import leaves nothing and
//     --force replaces an old dataset only on success.
//   - The manifest records Source{Kind: "import", Format, Path, SHA256 of the
//     source file}, the tool and command, and notes for every assumption.
package importers
