package importers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// The detailed samples are constructed in the writers' shapes
// (testdata/bench-serving/make_samples.py): six requests, the fourth failed.
func TestBenchServingSamples(t *testing.T) {
	t.Run("vllm", func(t *testing.T) {
		rows, err := ReadRequests("vllm-bench", "testdata/bench-serving/vllm_bench_serve.json")
		require.NoError(t, err)
		checkRequests(t, rows, false)
		require.Len(t, rows, 6)
		// arrival = start − queue; first token = start + ttft.
		want0 := datasets.Request{ReqID: "000000", ArrivalNs: 0, PromptTokens: 512, OutputTokens: 4, FirstScheduledNs: -1,
			FirstTokenNs: 41_000_000, FinishNs: 75_000_000, Status: "finished"}
		require.Equal(t, want0, rows[0])
		r4 := rows[4] // waited 46 ms for a concurrency slot
		require.Equal(t, int64(402_000_000), r4.ArrivalNs)
		require.Equal(t, int64(402_000_000+46_000_000+31_000_000), r4.FirstTokenNs)
		require.Equal(t, "aborted", rows[3].Status)
		require.Equal(t, int64(-1), rows[3].FinishNs)
	})
	t.Run("sglang", func(t *testing.T) {
		rows, s, err := parseRequests("sglang-bench", readFile(t, "testdata/bench-serving/sglang_bench_serving.jsonl"), nil)
		require.NoError(t, err)
		checkRequests(t, rows, false)
		require.Len(t, rows, 6)
		for _, r := range rows {
			require.Zero(t, r.ArrivalNs, "request_rate Infinity: all sent at 0")
		}
		// No latencies: finish = ttft + Σ itls.
		require.Equal(t, int64(83_000_000+25_000_000), rows[1].FinishNs)
		require.Equal(t, "inf", s.m.Source.Detail["request_rate"])
		require.Equal(t, "random", s.m.Workload.Params["dataset_name"])
		require.Contains(t, strings.Join(s.m.Notes, "\n"), "request_rate inf sends every request at once: arrival_ns = 0")
		require.Contains(t, s.m.Notes, "1 failed requests (non-empty error): status aborted; first error: Bad Request")
	})
}

// A result without per-request times is imported as what it is: a
// summary, no rows, the run's figures in the manifest, and Import says so.
// The files are real (each folder's ATTRIBUTION.md); the expected values
// are copied from them.
func TestBenchServingSummary(t *testing.T) {
	tests := []struct {
		name, format, src, flag string
		model, requests, note   string
		detail                  map[string]string
	}{
		{name: "vLLM benchmark_serving.py on H100", format: "vllm-bench", flag: "--save-detailed",
			src:   "testdata/bench-serving/llm-d-benchmark-h100/benchmark_2025-05-13_04-55-27.json",
			model: "meta-llama/Llama-3.1-8B-Instruct",
			detail: map[string]string{"completed": "200", "duration": "57.42171942605637", "request_rate": "3.6",
				"mean_ttft_ms": "243.57119981985306", "p95_itl_ms": "13.476875072228717", "timestamp": "2025-05-13_04-55-27,model"}},
		{name: "InferenceX keeps the lengths, not the times", format: "vllm-bench", flag: "--save-detailed",
			src:   "testdata/bench-serving/inferencex-glm-5.2/sglang_fp4_mtp_tp4_conc1_isl8192_osl1024.json",
			model: "amd/GLM-5.2-MXFP4", requests: "10",
			note:   "; the file records the lengths of 10 requests (input_lens, output_lens) but not their times (no ttfts), so they are not imported",
			detail: map[string]string{"completed": "10", "request_rate": "inf", "max_concurrency": "1", "p99.9_e2el_ms": "9352.888509408107"}},
		{name: "SGLang bench_serving on 8 H200", format: "sglang-bench", flag: "--output-details",
			src: "testdata/bench-serving/h200-benchmarks-sglang/deepseek_dp_mla_output.jsonl",
			detail: map[string]string{"completed": "10000", "request_rate": "inf", "dataset_name": "random",
				"duration": "412.49091206211597", "mean_e2e_latency_ms": "381236.82297268615"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir() + "/ds"
			res, err := Import(tt.format, tt.src, dir, Options{})
			require.NoError(t, err)
			require.True(t, res.Summary)
			require.Zero(t, res.Rows)
			m, err := datasets.ReadManifest(dir)
			require.NoError(t, err)
			require.Equal(t, "summary", m.Workload.Kind)
			require.Equal(t, tt.detail["completed"], m.Workload.Params["completed"])
			require.Equal(t, tt.requests, m.Workload.Params["requests"])
			for k, v := range tt.detail {
				require.Equal(t, v, m.Source.Detail[k], k)
			}
			if tt.model == "" {
				require.Nil(t, m.Model, "SGLang's summary names no model")
			} else {
				require.Equal(t, tt.model, m.Model.Name)
			}
			require.Nil(t, m.Hardware, "no GPU in the file")
			want := fmt.Sprintf("%s: a summary result (no per-request times: run it with %s for them): no requests rows; the run's figures are in source.detail (completed %s, duration %s s)%s",
				tt.format, tt.flag, tt.detail["completed"], m.Source.Detail["duration"], tt.note)
			require.Contains(t, m.Notes, want)
		})
	}
	t.Run("a detailed result is not a summary", func(t *testing.T) {
		res, err := Import("sglang-bench", "testdata/bench-serving/sglang_bench_serving.jsonl", t.TempDir()+"/ds", Options{})
		require.NoError(t, err)
		require.False(t, res.Summary)
		require.Equal(t, int64(6), res.Rows)
	})
	// SGLang appends every run to the file it is given: seven here.
	t.Run("appended runs are refused", func(t *testing.T) {
		dir := t.TempDir() + "/ds"
		_, err := Import("sglang-bench", "testdata/bench-serving/h200-benchmarks-sglang/llama_3_3_70b_online_output.jsonl", dir, Options{})
		require.ErrorContains(t, err, "llama_3_3_70b_online_output.jsonl: 7 benchmark runs appended in one file; steplab imports one run: split the file")
		require.NoDirExists(t, dir)
	})
}

func TestBenchServingParsing(t *testing.T) {
	const base = `"input_lens": [10, 20], "output_lens": [3, 2], "ttfts": [0.1, 0.2], "itls": [[0.01, 0.02], [0.03]], "errors": ["", ""]`
	tests := []struct {
		name, in string
		want     []int64 // arrivals
		note     string
		wantErr  string
	}{
		{name: "finite rate without start times", in: `{"request_rate": 4, ` + base + `}`, want: []int64{0, 250_000_000},
			note: "request i placed at i / request_rate (4/s)"},
		{name: "start times and queue times", in: `{"start_times": [100.5, 100.25], "queue_times": [0.5, 0], "latencies": [0.2, 0.3], ` + base + `}`,
			want: []int64{0, 250_000_000}},
		{name: "NaN statistic", in: `{"mean_ttft_ms": NaN, "request_rate": "inf", ` + base + `}`, want: []int64{0, 0}},
		{name: "neither detailed nor a summary", in: `{"duration": 2}`, wantErr: "in: neither ttfts (a detailed result) nor completed (a summary)"},
		{name: "summary with a bad completed", in: `{"completed": "x"}`, wantErr: "in: neither ttfts (a detailed result) nor completed (a summary)"},
		{name: "summary with ragged lengths", in: `{"completed": 2, "input_lens": [1, 2], "output_lens": [1]}`,
			wantErr: "in: output_lens has 1 entries, input_lens 2"},
		{name: "summary with a bad length", in: `{"completed": 2, "input_lens": [1, -2], "output_lens": [1, 1]}`,
			wantErr: "in: input_lens[1]:"},
		{name: "ragged arrays", in: `{"input_lens": [1, 2], "output_lens": [1], "ttfts": [0.1, 0.1], "latencies": [1, 1]}`,
			wantErr: "in: output_lens has 1 entries, input_lens 2"},
		{name: "negative ttft", in: `{"input_lens": [1], "output_lens": [1], "ttfts": [-0.1], "latencies": [1]}`,
			wantErr: "in: ttfts[0]: -0.1 is not a time in seconds"},
		{name: "latency before ttft", in: `{"input_lens": [1], "output_lens": [1], "ttfts": [0.5], "latencies": [0.1]}`,
			wantErr: "in: request 0: ttft 0.5 and latency 0.1 are not times in order"},
		{name: "bad rate", in: `{"request_rate": "fast", ` + base + `}`, wantErr: `in: request_rate: "fast" is neither a positive rate nor "inf"`},
		{name: "appended runs", in: `{` + base + "}\n{" + base + "}\n", wantErr: "in: 2 benchmark runs appended in one file"},
		{name: "syntax", in: "{\n\"input_lens\": [1,,]}", wantErr: "in:2:"},
		{name: "empty", in: "", wantErr: "in: empty file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, format := range []string{"vllm-bench", "sglang-bench"} {
				rows, s, err := parseRequests(format, []byte(tt.in), nil)
				if tt.wantErr != "" {
					require.ErrorContains(t, err, tt.wantErr)
					continue
				}
				require.NoError(t, err)
				checkRequests(t, rows, false)
				got := make([]int64, len(rows))
				for i, r := range rows {
					got[i] = r.ArrivalNs
				}
				require.Equal(t, tt.want, got)
				if tt.note != "" {
					require.Contains(t, strings.Join(s.m.Notes, "\n"), tt.note)
				}
			}
		})
	}
}
