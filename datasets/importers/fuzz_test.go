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
		return
	}
	if limit > 0 && len(b) > limit {
		b = b[:limit]
		if i := bytes.LastIndexByte(b, '\n'); i > 0 {
			b = b[:i+1]
		}
	}
	f.Add(b)
}

func seedExternal(f *testing.F, rel string, limit int) {
	for _, d := range []string{"../../../shared/data/external", "/work/shared/data/external"} {
		if _, err := os.Stat(filepath.Join(d, rel)); err == nil {
			addFileSeed(f, filepath.Join(d, rel), limit)
			return
		}
	}
}

func FuzzAzure(f *testing.F) {
	seedExternal(f, "azure-llm-2023/AzureLLMInferenceTrace_conv.csv", 600)
	seedExternal(f, "azure-llm-2023/AzureLLMInferenceTrace_code.csv", 600)
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:46.6805900,1,0\n"))
	f.Add([]byte("GeneratedTokens,TIMESTAMP,ContextTokens\r\n1,2023-11-16T18:15:46Z,2\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _, err := parseRequests("azure", b, nil)
		if err == nil {
			checkRequests(t, rows, true)
		}
	})
}

func FuzzMooncake(f *testing.F) {
	seedExternal(f, "mooncake-fast25/conversation_trace.jsonl", 600)
	seedExternal(f, "mooncake-fast25/synthetic_trace.jsonl", 600)
	f.Add([]byte(`{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]}` + "\n" + `{"timestamp": 1.5, "input_length": 1, "output_length": 1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _, err := parseRequests("mooncake", b, nil)
		if err == nil {
			checkRequests(t, rows, true)
		}
	})
}

func FuzzVLLMRequests(f *testing.F) {
	seedExternal(f, "llmservingsim-vllm-0.19/RTXPRO6000_Llama-3.1-8B/requests.jsonl", 600)
	seedExternal(f, "llmservingsim-vllm-0.19/RTXPRO6000_Qwen3-30B-A3B-Instruct-2507/requests.jsonl", 600)
	addFileSeed(f, "../embedded/llmservingsim-llama-3.1-8b/requests.jsonl", 600)
	f.Add([]byte(`{"request_id": 7, "input_toks": 1, "output_toks": 2, "queued_ts": 5, "scheduled_ts": null, "first_token_ts": null, "last_token_ts": null}`))
	meta, _ := os.ReadFile("../embedded/llmservingsim-llama-3.1-8b/meta.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _, err := parseRequests("vllm-requests", b, map[string][]byte{"meta.json": meta})
		if err == nil {
			checkRequests(t, rows, true)
			require.NotEmpty(t, rows)
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
