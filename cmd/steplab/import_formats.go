package main

// importHelp is each format's help page beyond its one-line summary: what
// it reads, and examples on the samples committed under
// datasets/importers/testdata/ (each folder's ATTRIBUTION.md says where the
// sample comes from). The examples run verbatim in the tests
// (TestDocumentedCommands), each page in a fresh checkout.
var importHelp = map[string]struct{ long, example string }{
	"azure": {
		long: `An Azure LLM inference trace (Azure/AzurePublicDataset, 2023 and 2024):
TIMESTAMP (a date-time), ContextTokens, GeneratedTokens. Rows must be in time
order. arrival_ns is the timestamp relative to the first row; the trace
records no outcomes (status not_run).`,
		example: `  steplab import azure datasets/importers/testdata/azure-code-2023/AzureLLMInferenceTrace_code_head200.csv \
      -o out/import-azure --hardware H100 --model Llama-3.1-8B`,
	},
	"mooncake": {
		long: `A Mooncake request trace (kvcache-ai/Mooncake FAST'25): one JSON object per
line with timestamp (ms), input_length, output_length and hash_ids (one hash
per 512-token block; shared hashes are shared prefixes, kept as
prefix_hash_ids).`,
		example: `  steplab import mooncake datasets/importers/testdata/mooncake-fast25/conversation_trace_head300.jsonl \
      -o out/import-mooncake --hardware H100 --model Llama-3.1-8B`,
	},
	"vllm-requests": {
		long: `A vLLM serving run's per-request records (requests.jsonl: arrival, queued,
scheduled, first-token and last-token times, lengths) with meta.json beside
it (engine arguments, KV blocks, device, model), and timeseries.csv where
present (engine_samples). SRC is the run directory or requests.jsonl. The
GPU and the model come from meta.json; --hardware and --model override them.`,
		example: `  steplab import vllm-requests datasets/importers/testdata/llmservingsim-rtx4090-llama-3.1-8b -o out/import-vllm-requests
  steplab replay requests roofline out/import-vllm-requests -o out/replay-vllm-requests`,
	},
	"dynamo-fpm-artifact": {
		long: `A Dynamo self-benchmark result (schema_version 2): results[{point, fpms}],
each forward-pass metrics record a step.`,
		example: `  steplab import dynamo-fpm-artifact datasets/importers/testdata/artifact_complete.json -o out/import-dynamo-fpm-artifact`,
	},
	"dynamo-fpm": {
		long: `A stream of msgpack ForwardPassMetrics v1 records, as Dynamo publishes them
on its forward-pass-metrics ZMQ socket (steplab capture fpm records one
live). Idle heartbeats are skipped and counted.`,
		example: `  steplab import dynamo-fpm datasets/importers/testdata/fpm_stream.msgpack -o out/import-dynamo-fpm --json`,
	},
	"vllm-bench": {
		long: `A vllm bench serve --save-result result JSON (the older
benchmarks/benchmark_serving.py --save-result writes the same). With
--save-detailed it has per-request arrays (input_lens, output_lens, ttfts,
itls, latencies, start_times, queue_times, errors): one row each, arrival =
start − queue time. Without it the file is a summary (request lengths
without times, as InferenceX's adaptation keeps them, included): it is
imported as one (no rows; the run's figures in the manifest's
source.detail), the command says so, and it cannot be replayed. The file
names the model (model_id) but not the GPU: give --hardware (and --model
where model_id is a local path) to replay it.

The first example is constructed in the writer's shape (no detailed result
under a licence that allows copying one was found); the others are real
summaries (datasets/importers/testdata/bench-serving/*/ATTRIBUTION.md).`,
		example: `  steplab import vllm-bench datasets/importers/testdata/bench-serving/vllm_bench_serve.json -o out/import-vllm-bench \
      --hardware H100 --model meta-llama/Llama-3.1-8B-Instruct --engine vllm@0.19.0
  steplab replay requests roofline out/import-vllm-bench -o out/replay-vllm-bench
  # Llama-3.1-8B-Instruct on H100s, without --save-detailed
  steplab import vllm-bench datasets/importers/testdata/bench-serving/llm-d-benchmark-h100/benchmark_2025-05-13_04-55-27.json \
      -o out/import-vllm-bench-summary --hardware H100 --engine vllm
  # request lengths, no times
  steplab import vllm-bench datasets/importers/testdata/bench-serving/inferencex-glm-5.2/sglang_fp4_mtp_tp4_conc1_isl8192_osl1024.json \
      -o out/import-vllm-bench-lengths`,
	},
	"sglang-bench": {
		long: `A python -m sglang.bench_serving --output-file result, one run per line.
With --output-details the run has per-request arrays (input_lens,
output_lens, ttfts, itls, errors) but no start times: with request_rate inf
every request arrives at 0, with a finite rate request i at i / rate (noted).
Without --output-details the line is a summary: it is imported as one (no
rows; the run's figures in the manifest's source.detail), the command says
so, and it cannot be replayed. SGLang appends each run to the file; a file
of several runs is refused: split it (sed -n 2p F > run2.jsonl).

The first example is constructed in the writer's shape (no detailed result
under a licence that allows copying one was found); the second is a real
summary (datasets/importers/testdata/bench-serving/*/ATTRIBUTION.md).`,
		example: `  steplab import sglang-bench datasets/importers/testdata/bench-serving/sglang_bench_serving.jsonl -o out/import-sglang-bench \
      --hardware H100 --model Llama-3.1-8B --engine sglang
  steplab replay requests roofline out/import-sglang-bench -o out/replay-sglang-bench
  # DeepSeek-V2 on 8 H200s, without --output-details
  steplab import sglang-bench datasets/importers/testdata/bench-serving/h200-benchmarks-sglang/deepseek_dp_mla_output.jsonl \
      -o out/import-sglang-summary --hardware H200 --engine sglang`,
	},
	"aiperf": {
		long: `An AIPerf profile_export.jsonl, one record per request, in either schema
AIPerf has written: metadata.request_start_ns and request_end_ns with
metrics.time_to_first_token, or metadata.timestamp_ns with metrics.ttft,
request_latency and max_response_timestamp. Warmup records are skipped;
records with an error (cancelled ones included) are aborted.`,
		example: `  steplab import aiperf datasets/importers/testdata/aiperf-example/profile_export_head20.jsonl -o out/import-aiperf \
      --hardware H100 --model Llama-3.1-8B
  steplab replay requests roofline out/import-aiperf -o out/replay-aiperf
  steplab import aiperf datasets/importers/testdata/aiperf/profile_export.jsonl -o out/import-aiperf-older`,
	},
	"burstgpt": {
		long: `A BurstGPT trace CSV (HPMLL/BurstGPT): Timestamp (seconds), Model, Request
tokens, Response tokens, Total tokens, Log Type (BurstGPT_3 adds Session ID
and Elapsed time). A row with 0 response tokens is a failed request
(aborted).`,
		example: `  steplab import burstgpt datasets/importers/testdata/burstgpt/BurstGPT_1_rows.csv -o out/import-burstgpt \
      --hardware H100 --model Llama-3.1-8B`,
	},
	"blis": {
		long: `A BLIS (inference-sim) TraceV2 trace: the data CSV with its <prefix>.yaml
header beside it. Prefix groups become shared prefix_hash_ids.`,
		example: `  steplab import blis datasets/importers/testdata/blis/qwen3-14b-run.csv -o out/import-blis \
      --hardware H100 --model Qwen3-32B`,
	},
}
