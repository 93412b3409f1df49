package importers

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// Every fuzz target asserts: no panic, and either an error or rows that
// satisfy the importer's invariants.

// addFileSeed adds the first limit bytes of a file, cut at a line end.
// Seeds stay small: the coverage-guided fuzzer stalls on multi-kilobyte
// JSON seeds.
func addFileSeed(f *testing.F, path string, limit int) {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	if limit > 0 && len(b) > limit {
		b = b[:limit]
		if i := bytes.LastIndexByte(b, '\n'); i > 0 {
			b = b[:i+1]
		}
	}
	f.Add(b)
}

func FuzzAzure(f *testing.F) {
	addFileSeed(f, azureConv, 600)
	addFileSeed(f, azureCode, 600)
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:46.6805900,1,0\n"))
	f.Add([]byte("GeneratedTokens,TIMESTAMP,ContextTokens\r\n1,2023-11-16T18:15:46Z,2\r\n"))
	addFileSeed(f, "testdata/azure-2024/AzureLLMInferenceTrace_conv_1week_rows.csv", 0)
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _, err := parseRequests("azure", b, nil)
		if err == nil {
			checkRequests(t, rows, true)
		}
	})
}

func FuzzMooncake(f *testing.F) {
	addFileSeed(f, mooncakeConv, 600)
	addFileSeed(f, mooncakeSynth, 600)
	f.Add([]byte(`{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]}` + "\n" + `{"timestamp": 1.5, "input_length": 1, "output_length": 1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _, err := parseRequests("mooncake", b, nil)
		if err == nil {
			checkRequests(t, rows, true)
		}
	})
}

func FuzzVLLMRequests(f *testing.F) {
	addFileSeed(f, vllmLlama+"/requests.jsonl", 600)
	addFileSeed(f, vllmQwen+"/requests.jsonl", 600)
	f.Add([]byte(`{"request_id": 7, "input_toks": 1, "output_toks": 2, "queued_ts": 5, "scheduled_ts": null, "first_token_ts": null, "last_token_ts": null}`))
	meta, _ := os.ReadFile(vllmLlama + "/meta.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _, err := parseRequests("vllm-requests", b, map[string][]byte{"meta.json": meta})
		if err == nil {
			checkRequests(t, rows, true)
			require.NotEmpty(t, rows)
		}
	})
}

// requestFuzz runs a request importer on b: no panic, and either an error
// or rows that satisfy the importer invariants.
func requestFuzz(t *testing.T, format string, b []byte, siblings map[string][]byte, sorted bool) {
	rows, _, err := parseRequests(format, b, siblings)
	if err == nil {
		checkRequests(t, rows, sorted)
	}
}

func FuzzBurstGPT(f *testing.F) {
	addFileSeed(f, "testdata/burstgpt/BurstGPT_1_rows.csv", 0)
	f.Add([]byte("Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n0.5,s,2,GPT-4,3,0,3,API log\n"))
	f.Fuzz(func(t *testing.T, b []byte) { requestFuzz(t, "burstgpt", b, nil, true) })
}

// FuzzBenchServing fuzzes vllm-bench and sglang-bench results.
func FuzzBenchServing(f *testing.F) {
	addFileSeed(f, "testdata/bench-serving/vllm_bench_serve.json", 0)
	addFileSeed(f, "testdata/bench-serving/sglang_bench_serving.jsonl", 0)
	addFileSeed(f, "testdata/bench-serving/llm-d-benchmark-h100/benchmark_2025-05-13_04-55-27.json", 0)
	addFileSeed(f, "testdata/bench-serving/inferencex-glm-5.2/sglang_fp4_mtp_tp4_conc1_isl8192_osl1024.json", 0)
	addFileSeed(f, "testdata/bench-serving/h200-benchmarks-sglang/deepseek_dp_mla_output.jsonl", 0)
	addFileSeed(f, "testdata/bench-serving/h200-benchmarks-sglang/llama_3_3_70b_online_output.jsonl", 0)
	f.Add([]byte(`{"request_rate": 2, "input_lens": [1, 2], "output_lens": [1, 0], "ttfts": [0.1, 0], "itls": [[], []], "errors": ["", "x"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		requestFuzz(t, "vllm-bench", b, nil, true)
		requestFuzz(t, "sglang-bench", b, nil, true)
	})
}

func FuzzAIPerf(f *testing.F) {
	addFileSeed(f, "testdata/aiperf/profile_export.jsonl", 0)
	addFileSeed(f, "testdata/aiperf-example/profile_export_head20.jsonl", 6000)
	f.Add([]byte(`{"metadata": {"timestamp_ns": 5, "credit_phase": "profiling"}, "metrics": {"ttft": {"value": 2, "unit": "ns"}, "request_latency": {"value": 3, "unit": "ns"}, "max_response_timestamp": {"value": 9, "unit": "ns"}}, "error": null}`))
	f.Add([]byte(`{"metadata": {"request_start_ns": 5, "request_end_ns": 9, "benchmark_phase": "profiling"}, "metrics": {"time_to_first_token": {"value": 2, "unit": "ns"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) { requestFuzz(t, "aiperf", b, nil, true) })
}

func FuzzBLIS(f *testing.F) {
	addFileSeed(f, "testdata/blis/prefix-affinity-run.csv", 800)
	addFileSeed(f, "testdata/blis/qwen3-14b-run.csv", 600)
	hdr, _ := os.ReadFile("testdata/blis/qwen3-14b-run.yaml")
	f.Fuzz(func(t *testing.T, b []byte) { requestFuzz(t, "blis", b, map[string][]byte{"in.yaml": hdr}, true) })
}

// FuzzVLLMTimeseries fuzzes timeseries.csv beside a small request log.
func FuzzVLLMTimeseries(f *testing.F) {
	reqs, ts := synthRun(20, 0.4)
	f.Add([]byte(ts))
	addFileSeed(f, "../embedded/llmservingsim-llama-3.1-8b/timeseries.csv", 600)
	addFileSeed(f, "testdata/llmservingsim-rtx4090-llama-3.1-8b/timeseries.csv", 600)
	f.Add([]byte("waiting,t,running\n0,1e3,1\n"))
	fm, _ := LookupFormat("vllm-requests")
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []datasets.EngineSample
		s := &sink{request: func(datasets.Request) error { return nil }}
		s.openSamples = func() (func(datasets.EngineSample) error, func() error, error) {
			return func(r datasets.EngineSample) error { got = append(got, r); return nil }, func() error { return nil }, nil
		}
		in := bytesInput("in", []byte(reqs), map[string][]byte{"meta.json": []byte(`{"tick_seconds": 1}`), "timeseries.csv": b})
		if fm.run(in, s) != nil {
			return
		}
		for i, r := range got {
			require.GreaterOrEqual(t, r.TNs, int64(0))
			if i > 0 {
				require.GreaterOrEqual(t, r.TNs, got[i-1].TNs)
			}
			require.True(t, r.KVUsage == -1 || (r.KVUsage >= 0 && r.KVUsage <= 1), "kv_usage %v", r.KVUsage)
			require.GreaterOrEqual(t, r.NumRunning, int32(0))
		}
	})
}

func FuzzDynamoArtifact(f *testing.F) {
	// Compact forms of the fixtures' shapes (the fixtures themselves are
	// too large to be good seeds).
	f.Add([]byte(`{"schema_version":2,"artifact_type":"rank","status":"complete","valid":true,"timing_valid":true,"dp":{"rank":0,"size":1},` +
		`"limits":{"max_num_scheduled_tokens":8192,"max_num_running_reqs":256,"block_size":16,"num_gpu_blocks":100},` +
		`"measurement_policy":{"decode":"steady_state_second_step","prefill":"single_step"},"cudagraph":{"capture_sizes":[1,2,4]},` +
		`"results":[{"point":{"point_type":"prefill","benchmark_id":1,"total_prefill_tokens":512,"total_kv_read_tokens":0,"batch_size":1,"padding_tokens":0,"sample_reasons":["capture"]},` +
		`"fpms":[{"version":1,"worker_id":"w","dp_rank":0,"counter_id":1,"wall_time":0.02,"scheduled_requests":{"num_prefill_requests":1,"sum_prefill_tokens":512},"queued_requests":{}}]}],` +
		`"skipped_points":[{"point":{"point_type":"decode","benchmark_id":2,"batch_size":4,"total_kv_read_tokens":64},"reason":"decode_injection_failed"}]}`))
	f.Add([]byte(`{"schema_version":2,"status":"partial","valid":false,"results":[{"point":{"point_type":"decode","benchmark_id":3,"batch_size":2,"total_kv_read_tokens":8,"sample_reasons":["eager_warmup"]},` +
		`"fpms":[{"counter_id":3,"wall_time":0.01,"scheduled_requests":{"num_decode_requests":2,"sum_decode_kv_tokens":8}}]}],"missing_phases":["prefill"],"error":{"type":"E"}}`))
	f.Add([]byte(`{"schema_version": 2, "results": [{"point": {"point_type": "decode", "benchmark_id": 1}, "fpms": [{"wall_time": 0}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _, err := parseSteps("dynamo-fpm-artifact", b)
		if err == nil {
			checkSteps(t, rows)
			for _, r := range rows {
				require.Contains(t, []string{datasets.RoleMeasured, datasets.RoleScaffolding}, r.Role)
			}
		}
	})
}

func FuzzDynamoFPM(f *testing.F) {
	addFileSeed(f, "testdata/fpm_stream.msgpack", 0)
	addFileSeed(f, "testdata/dynamo_fpm_publisher.msgpack", 0)
	f.Add(EncodeFPM(sampleFPM(3)))
	f.Add(EncodeFPM(FPM{Version: 1, TimingScope: "execute_model_cuda", WallTime: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _, err := parseSteps("dynamo-fpm", b)
		if err == nil {
			checkSteps(t, rows)
		}
		// The single-message decoder never panics either, and what it
		// accepts re-encodes to an equal message.
		if m, err := DecodeFPM(b); err == nil {
			again, err := DecodeFPM(EncodeFPM(m))
			require.NoError(t, err)
			require.Equal(t, m, again)
		}
	})
}

// FuzzTableCSV runs the table wrapper's CSV path: a CSV typed into Parquet,
// then read as steps under the renames of the committed fixture. No
// panic; an error names the file; a table that reads has a row per record.
func FuzzTableCSV(f *testing.F) {
	addFileSeed(f, filepath.Join(duckdbFixtures, "steps_renamed.csv"), 400)
	f.Add([]byte("step_id,kind,num_prefill_requests,sum_prefill_tokens,sum_prefill_kv_tokens,num_decode_requests,sum_decode_kv_tokens,wall_time_ns,t_output\n" +
		"0,decode,0,0,0,3,300,2000000,2024-05-01 00:00:00.002\n1,prefill,1,128,,0,0,2.5e6,2024-05-01T00:00:01Z\n"))
	f.Add([]byte("a,b\n\"x,y\",true\n,false\n"))
	f.Add([]byte("step,step\n1,2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		src, out := filepath.Join(dir, "t.csv"), filepath.Join(dir, "t.parquet")
		require.NoError(t, os.WriteFile(src, b, 0o644))
		if err := csvToParquet(src, out); err != nil {
			require.Contains(t, err.Error(), src, "the error names the file")
			return
		}
		records, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		require.NoError(t, err, "csvToParquet accepted it")
		s, err := datasets.ScanTable[datasets.Step]([]string{out}, datasets.TableSteps, renamedMap)
		require.NoError(t, err)
		defer s.Close()
		n := 0
		for _, err := range s.All() {
			if err != nil {
				require.Contains(t, err.Error(), out, "the error names the file")
				return
			}
			n++
		}
		require.Equal(t, len(records)-1, n, "a row per CSV record after the header")
	})
}
