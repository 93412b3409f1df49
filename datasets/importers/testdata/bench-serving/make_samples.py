#!/usr/bin/env python3
"""Write vllm_bench_serve.json and sglang_bench_serving.jsonl: detailed
results (vLLM's --save-detailed, SGLang's --output-details) in the shape each
tool's writer gives them, for six invented requests.

No recorded detailed result under a licence that allows copying it was
found (the summary forms are real files, in the folders beside this one), so
these files are constructed, not measured. Each mirrors its writer's code: the keys, their
order, their types and how the per-request arrays relate:

- vLLM vllm/benchmarks/serve.py @ 009e6d4a (main_async's result_json, then
  benchmark()'s result; json.dump): start_times are time.perf_counter()
  values taken when a request is sent (after its queue time waiting for a
  --max-concurrency slot); latency = ttft + sum(itl) for a streamed request;
  a failed request has an error, output length 0, ttft 0 and latency 0.
- SGLang python/sglang/bench_serving.py @ 0033168f (benchmark()'s result |
  result_details, appended as one line with json.dumps): request_rate is a
  float, so the default inf is written as Infinity (not standard JSON).

Run: python3 make_samples.py (rewrites both files beside it).
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# Six requests: prompt and output lengths, TTFT and ITLs in seconds.
INPUT_LENS = [512, 1024, 300, 2048, 128, 700]
OUTPUT_LENS = [4, 3, 5, 0, 2, 3]  # the fourth failed
TTFTS = [0.041, 0.083, 0.052, 0.0, 0.031, 0.120]
ITLS = [[0.011, 0.012, 0.011], [0.013, 0.012], [0.011, 0.011, 0.012, 0.013], [], [0.010], [0.014, 0.015]]
ERRORS = ["", "", "", "Bad Request", "", ""]
START = 52310.125  # perf_counter at the first send
QUEUE = [0.0, 0.0, 0.0, 0.0, 0.046, 0.010]  # waited for a slot (max_concurrency 4)
ARRIVE = [0.0, 0.117, 0.201, 0.350, 0.402, 0.510]


def vllm():
    ok = [i for i, e in enumerate(ERRORS) if not e]
    lat = [TTFTS[i] + sum(ITLS[i]) if not ERRORS[i] else 0.0 for i in range(6)]
    start = [START + ARRIVE[i] + QUEUE[i] for i in range(6)]
    duration = max(start[i] + lat[i] for i in ok) - START
    result = {
        "date": "20260412-101500",
        "endpoint_type": "openai",
        "backend": "openai",
        "label": None,
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": 6,
        "request_rate": 8.0,
        "burstiness": 1.0,
        "max_concurrency": 4,
        "duration": duration,
        "completed": len(ok),
        "failed": 6 - len(ok),
        "total_input_tokens": sum(INPUT_LENS[i] for i in ok),
        "total_output_tokens": sum(OUTPUT_LENS),
        "request_throughput": len(ok) / duration,
        "request_goodput": None,
        "output_throughput": sum(OUTPUT_LENS) / duration,
        "total_token_throughput": (sum(INPUT_LENS[i] for i in ok) + sum(OUTPUT_LENS)) / duration,
        "input_lens": INPUT_LENS,
        "output_lens": OUTPUT_LENS,
        "ttfts": TTFTS,
        "itls": ITLS,
        "latencies": lat,
        "start_times": start,
        "queue_times": QUEUE,
        "generated_texts": ["Paris is the", "Yes, it", "1 2 3 4 5", "", "OK", "The end."],
        "errors": ERRORS,
        "max_output_tokens_per_s": 17.0,
        "max_concurrent_requests": 4,
        "rtfx": 0.0,
        "mean_ttft_ms": 1000 * sum(TTFTS[i] for i in ok) / len(ok),
    }
    with open(os.path.join(HERE, "vllm_bench_serve.json"), "w") as f:
        json.dump(result, f)


def sglang():
    result = {
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": float("inf"),
        "max_concurrency": None,
        "sharegpt_output_len": None,
        "random_input_len": 1024,
        "random_output_len": 4,
        "random_range_ratio": 0.0,
        "duration": 0.35,
        "completed": 5,
        "total_input_tokens": sum(INPUT_LENS) - INPUT_LENS[3],
        "total_output_tokens": sum(OUTPUT_LENS),
        "total_output_tokens_retokenized": sum(OUTPUT_LENS),
        "mean_e2e_latency_ms": 95.2,
        "accept_length": None,
    }
    details = {
        "input_lens": INPUT_LENS,
        "output_lens": OUTPUT_LENS,
        "ttfts": TTFTS,
        "itls": ITLS,
        "generated_texts": ["Paris is the", "Yes, it", "1 2 3 4 5", "", "OK", "The end."],
        "errors": ERRORS,
    }
    with open(os.path.join(HERE, "sglang_bench_serving.jsonl"), "w") as f:
        f.write(json.dumps(result | details) + "\n")


if __name__ == "__main__":
    vllm()
    sglang()
