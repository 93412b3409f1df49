package importers

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// Every fuzz target asserts: no panic, and either an error or rows that
// satisfy the importer's invariants.

func addFileSeed(f *testing.F, path string, limit int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if limit > 0 && len(b) > limit {
		b = b[:limit]
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
	seedExternal(f, "azure-llm-2023/AzureLLMInferenceTrace_conv.csv", 4096)
	seedExternal(f, "azure-llm-2023/AzureLLMInferenceTrace_code.csv", 4096)
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
	seedExternal(f, "mooncake-fast25/conversation_trace.jsonl", 4096)
	seedExternal(f, "mooncake-fast25/synthetic_trace.jsonl", 4096)
	f.Add([]byte(`{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]}` + "\n" + `{"timestamp": 1.5, "input_length": 1, "output_length": 1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _, err := parseRequests("mooncake", b, nil)
		if err == nil {
			checkRequests(t, rows, true)
		}
	})
}

func FuzzVLLMRequests(f *testing.F) {
	seedExternal(f, "llmservingsim-vllm-0.19/RTXPRO6000_Llama-3.1-8B/requests.jsonl", 4096)
	seedExternal(f, "llmservingsim-vllm-0.19/RTXPRO6000_Qwen3-30B-A3B-Instruct-2507/requests.jsonl", 4096)
	addFileSeed(f, "../embedded/llmservingsim-llama-3.1-8b/requests.jsonl", 2048)
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
	for _, n := range []string{"artifact_complete.json", "artifact_partial.json", "artifact_legacy.json", "artifact_failed.json"} {
		addFileSeed(f, "testdata/"+n, 0)
	}
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
