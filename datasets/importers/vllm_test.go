package importers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

func TestVLLMRequestsRealRuns(t *testing.T) {
	tests := []struct {
		dir      string
		model    string
		last     datasets.Request // bench-299
		gpus, dp int
		samples  int64
	}{
		{dir: vllmLlama, model: "meta-llama/Llama-3.1-8B",
			last: datasets.Request{ReqID: "bench-299", ArrivalNs: 29_121_193_171, PromptTokens: 582, OutputTokens: 768,
				FirstScheduledNs: 49_350_301_999, FirstTokenNs: 49_443_373_494, FinishNs: 64_203_270_797, NumPreemptions: -1, Status: "finished"},
			gpus: 1, dp: 1, samples: 67},
		{dir: vllmQwen, model: "Qwen/Qwen3-30B-A3B-Instruct-2507",
			last: datasets.Request{ReqID: "bench-299", ArrivalNs: 29_117_271_662, PromptTokens: 1168, OutputTokens: 583,
				FirstScheduledNs: 38_463_877_996, FirstTokenNs: 38_627_166_639, FinishNs: 58_394_410_321, NumPreemptions: -1, Status: "finished"},
			gpus: 2, dp: 2, samples: 65},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			src := realFile(t, tt.dir)
			out := t.TempDir() + "/ds"
			res, err := Import("vllm-requests", src, out, Options{})
			require.NoError(t, err)
			require.Equal(t, int64(300), res.Rows)
			require.Equal(t, fileSHA(t, src+"/requests.jsonl"), res.SHA256, "sha of requests.jsonl")
			d, err := datasets.Open(out)
			require.NoError(t, err)
			m := d.Manifest
			require.Equal(t, &datasets.EngineConfig{MaxNumSeqs: 128, MaxNumBatchedTokens: 2048, MaxModelLen: 0, BlockSize: 16,
				PrefixCaching: true, ChunkedPrefill: true, AsyncScheduling: true, KVCacheDType: "auto", TensorParallelSize: 1, DataParallelSize: tt.dp,
				ExpertParallel: tt.dp > 1}, m.Engine, "async_scheduling: vLLM 0.19's default")
			require.Equal(t, tt.samples, res.EngineSamples)
			samples, err := datasets.ReadAll[datasets.EngineSample](d, datasets.TableEngineSamples)
			require.NoError(t, err)
			require.Len(t, samples, int(tt.samples))
			for _, es := range samples {
				require.Equal(t, -1.0, es.KVUsage, "kv_cache_pct is 0 throughout: not recorded")
			}
			require.Equal(t, tt.model, m.Model.Name)
			require.Equal(t, "bfloat16", m.Model.DType)
			require.Equal(t, "0.19.0", m.Source.Detail["vllm_version"])
			require.Equal(t, tt.model, m.Source.Detail["model"])
			require.Equal(t, &datasets.Hardware{GPUName: "RTXPRO6000", GPUCount: tt.gpus}, m.Hardware)
			require.Equal(t, uint64(42), m.Workload.Seed)
			rows, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
			require.NoError(t, err)
			rows = emptyListsNil(rows)
			require.Len(t, rows, 300)
			checkRequests(t, rows, true)
			require.Equal(t, "bench-0", rows[0].ReqID)
			require.Equal(t, int64(0), rows[0].ArrivalNs)
			var last datasets.Request
			for _, r := range rows {
				if r.ReqID == "bench-299" {
					last = r
				}
			}
			require.Equal(t, tt.last, last)
			hasReorderNote := false
			for _, n := range m.Notes {
				if len(n) > 24 && n[:24] == "rows sorted by arrival_n" {
					hasReorderNote = true
				}
			}
			require.False(t, hasReorderNote, "arrival_time follows the file")
			for i, r := range rows {
				// The client's order, though with DP=2 the engines queued
				// bench-10 before bench-9.
				require.Equal(t, fmt.Sprintf("bench-%d", i), r.ReqID)
			}
			require.Contains(t, m.Source.Detail["clock"], "arrival_time (client wall clock) + arrival_offset_s")
		})
	}
}

// The RTX 4090 run records what vLLM allocated and resolved: the engine is
// taken from there, and its timeseries has real KV usage.
func TestVLLMRequestsResolvedRun(t *testing.T) {
	out := t.TempDir() + "/ds"
	res, err := Import("vllm-requests", "testdata/llmservingsim-rtx4090-llama-3.1-8b", out, Options{})
	require.NoError(t, err)
	require.Equal(t, int64(300), res.Rows)
	require.Equal(t, int64(184), res.EngineSamples)
	d, err := datasets.Open(out)
	require.NoError(t, err)
	m := d.Manifest
	require.Equal(t, &datasets.EngineConfig{MaxNumSeqs: 256, MaxNumBatchedTokens: 2048, MaxModelLen: 32768, BlockSize: 16,
		NumGPUBlocks: 2588, NumKVTokens: 41408, GPUMemoryUtilization: 0.9, PrefixCaching: true, ChunkedPrefill: true,
		AsyncScheduling: true, KVCacheDType: "auto", TensorParallelSize: 1, PipelineParallelSize: 1, DataParallelSize: 1}, m.Engine,
		"resolved_config wins over engine_kwargs (max_model_len null there)")
	require.Len(t, m.CUDAGraphSizes, 51)
	require.Equal(t, 512, m.CUDAGraphSizes[50])
	require.Equal(t, &datasets.Hardware{GPUName: "NVIDIA GeForce RTX 4090", GPUCount: 1, MemTotalBytes: 25250627584}, m.Hardware)
	require.Equal(t, "RTX4090", m.Source.Detail["config_hardware"])
	require.Equal(t, "fcfs", m.Source.Detail["scheduler_config.policy"])
	require.Equal(t, "[2,1]", m.Source.Detail["compilation_config.cudagraph_mode"])
	require.Equal(t, "bfloat16", m.Model.DType)
	for _, n := range m.Notes {
		require.NotContains(t, n, "engine: dtype", "torch.bfloat16 and bfloat16 agree")
	}
	samples, err := datasets.ReadAll[datasets.EngineSample](d, datasets.TableEngineSamples)
	require.NoError(t, err)
	peakWaiting, peakKV := int32(0), 0.0
	for i, es := range samples {
		require.Equal(t, int32(0), es.DPRank)
		require.Equal(t, int64(1e9), es.WindowNs)
		if i > 0 {
			require.Equal(t, int64(1e9), es.TNs-samples[i-1].TNs, "one row per 1 s tick")
		}
		peakWaiting, peakKV = max(peakWaiting, es.NumWaiting), max(peakKV, es.KVUsage)
	}
	require.Equal(t, int32(234), peakWaiting)
	require.Equal(t, 1.0, peakKV)
	require.Equal(t, "-0.140", m.Source.Detail["timeseries_offset_s"])
}

func TestVLLMRequestsEmbedded(t *testing.T) {
	rows, err := ReadRequests("vllm-requests", "embedded:llmservingsim-llama-3.1-8b")
	require.NoError(t, err)
	require.Len(t, rows, 300)
	// bench-0 was queued 1.20 ms after it arrived, and scheduled 46 µs
	// after that.
	require.Equal(t, datasets.Request{ReqID: "bench-0", ArrivalNs: 0, PromptTokens: 2358, OutputTokens: 531,
		FirstScheduledNs: 1_244_432, FirstTokenNs: 170_723_478, FinishNs: 15_714_600_107, NumPreemptions: -1, Status: "finished"}, rows[0])
}

// Without async_scheduling in meta.json the import records vLLM's default
// for the recorded version: asynchronous since 0.14.0, unless the run
// configured what vLLM does not schedule asynchronously by default.
func TestVLLMAsyncDefault(t *testing.T) {
	const in = `{"request_id": "a", "input_toks": 10, "output_toks": 2, "queued_ts": 1, "scheduled_ts": 1, "first_token_ts": 1, "last_token_ts": 1}` + "\n"
	for _, c := range []struct {
		name, meta string
		async      bool
		note       string
	}{
		{"0.19 default", `{"vllm_version": "0.19.0"}`, true, "engine: async_scheduling not in meta.json: recorded true, vLLM 0.19.0's default (asynchronous by default since 0.14)"},
		{"0.14 release candidate", `{"vllm_version": "0.14.0rc1"}`, true, "recorded true, vLLM 0.14.0rc1's default"},
		{"0.11 default", `{"vllm_version": "0.11.2"}`, false, "engine: async_scheduling not in meta.json: recorded false, vLLM 0.11.2's default (asynchronous by default since 0.14)"},
		{"no version", `{}`, false, "no vLLM release number (vllm_version \"\"): recorded false"},
		{"pipeline parallel", `{"vllm_version": "0.19.0", "engine_kwargs": {"pipeline_parallel_size": 2}}`, false, "but not with pipeline parallelism"},
		{"stated", `{"vllm_version": "0.19.0", "engine_kwargs": {"async_scheduling": false}}`, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, s, err := parseRequests("vllm-requests", []byte(in), map[string][]byte{"meta.json": []byte(c.meta)})
			require.NoError(t, err)
			require.Equal(t, c.async, s.m.Engine.AsyncScheduling)
			var notes []string
			for _, n := range s.m.Notes {
				if strings.Contains(n, "async_scheduling") {
					notes = append(notes, n)
				}
			}
			if c.note == "" {
				require.Empty(t, notes, "stated: nothing assumed")
				return
			}
			require.Len(t, notes, 1)
			require.Contains(t, notes[0], c.note)
		})
	}
}

func TestVLLMRequestsParsing(t *testing.T) {
	const meta = `{"schema_version": 1, "model": "m", "vllm_version": "0.19.0", "engine_kwargs": {"max_num_seqs": 8, "max_num_batched_tokens": 512, "max_model_len": 4096, "block_size": 32, "enable_prefix_caching": false}}`
	timed := func(id, a, q, s, f, l string) string {
		return `{"request_id": "` + id + `", "input_toks": 10, "output_toks": 2, "arrival_time": ` + a + `, "queued_ts": ` + q +
			`, "scheduled_ts": ` + s + `, "first_token_ts": ` + f + `, "last_token_ts": ` + l + "}\n"
	}
	line := func(id string, q, s, f, l string) string { return timed(id, "1777142838.5", q, s, f, l) }
	engine := &datasets.EngineConfig{MaxNumSeqs: 8, MaxNumBatchedTokens: 512, MaxModelLen: 4096, BlockSize: 32, PrefixCaching: false,
		ChunkedPrefill: true, AsyncScheduling: true}
	tests := []struct {
		name    string
		in      string
		meta    string
		want    []datasets.Request
		engine  *datasets.EngineConfig
		note    string
		wantErr string
	}{
		// a arrived 1000.10 and was queued at once (the smallest queued −
		// arrival: the offset); b arrived 1000.30 and waited 50 ms for the
		// engine loop to queue it at 100.50.
		{name: "arrival on the engine clock, unfinished request", meta: meta,
			in: timed("b", "1000.30", "100.5", "100.6", "100.7", "101.0") + timed("a", "1000.10", "100.25", "100.3", "null", "null"),
			want: []datasets.Request{
				{ReqID: "a", ArrivalNs: 0, PromptTokens: 10, OutputTokens: 2, FirstScheduledNs: 50_000_000, FirstTokenNs: -1, FinishNs: -1, NumPreemptions: -1, Status: "unfinished"},
				{ReqID: "b", ArrivalNs: 200_000_000, PromptTokens: 10, OutputTokens: 2, FirstScheduledNs: 350_000_000, FirstTokenNs: 450_000_000, FinishNs: 750_000_000, NumPreemptions: -1, Status: "finished"},
			},
			engine: engine, note: "rows sorted by arrival_ns: 1 rows of the source arrived before the row above them (arrival order differs from the file's: data-parallel engines queue independently)"},
		{name: "no arrival_time: queued_ts", meta: meta,
			in:     `{"request_id": "a", "input_toks": 10, "output_toks": 2, "queued_ts": 5, "scheduled_ts": 5.5, "first_token_ts": 6, "last_token_ts": 7}` + "\n",
			want:   []datasets.Request{{ReqID: "a", PromptTokens: 10, OutputTokens: 2, FirstScheduledNs: 500_000_000, FirstTokenNs: 1e9, FinishNs: 2e9, NumPreemptions: -1, Status: "finished"}},
			engine: engine, note: "vllm-requests: no arrival_time: arrival_ns = queued_ts, so the wait before the engine loop picked a request up (up to a step) is missing from TTFT"},
		{name: "no meta.json", in: line("a", "1", "1", "1", "1"),
			want: []datasets.Request{{ReqID: "a", PromptTokens: 10, OutputTokens: 2, NumPreemptions: -1, Status: "finished"}}},
		{name: "event order", meta: meta, in: line("a", "1", "2", "1.5", "3"), wantErr: "in:1: first_token_ts 1.500000 is earlier than scheduled_ts 2.000000"},
		{name: "duplicate id", meta: meta, in: line("a", "1", "1", "1", "1") + line("a", "2", "2", "2", "2"), wantErr: `in:2: request_id: "a" already used on line 1`},
		{name: "missing queued", meta: meta, in: line("a", "null", "1", "1", "1"), wantErr: "in:1: missing field queued_ts"},
		{name: "bad time", meta: meta, in: line("a", `"x"`, "1", "1", "1"), wantErr: `in:1: queued_ts: "x" is not a number of seconds`},
		{name: "bad arrival", meta: meta, in: timed("a", "1e300", "1", "1", "1", "1"), wantErr: "in:1: arrival_time: 1e300 is not a number of seconds"},
		{name: "negative tokens", meta: meta, in: `{"request_id": "a", "input_toks": -1, "output_toks": 2, "queued_ts": 1}`, wantErr: "in:1: input_toks: -1 is negative"},
		{name: "empty", meta: meta, in: "\n", wantErr: "in: no requests"},
		{name: "meta schema", meta: `{"schema_version": 2}`, in: line("a", "1", "1", "1", "1"), wantErr: "meta.json: schema_version 2 is not supported"},
		{name: "bad meta kwarg", meta: `{"engine_kwargs": {"max_num_seqs": "many"}}`, in: line("a", "1", "1", "1", "1"), wantErr: `meta.json: engine_kwargs.max_num_seqs: "many" is not a non-negative integer`},
		{name: "bad kv_cache", meta: `{"kv_cache": {"num_gpu_blocks": -3, "gpu_memory_utilization": 1.5}}`, in: line("a", "1", "1", "1", "1"),
			wantErr: "meta.json: kv_cache.num_gpu_blocks: -3 is not a non-negative integer; kv_cache.gpu_memory_utilization: 1.5 is not a fraction in (0, 1]"},
		{name: "bad resolved section", meta: `{"resolved_config": {"cache_config": {"block_size": }}}`, in: line("a", "1", "1", "1", "1"),
			wantErr: "meta.json: "},
		{name: "kv_cache and conflicts", meta: `{"engine_kwargs": {"max_num_seqs": 8, "num_gpu_blocks_override": 100},
			"kv_cache": {"num_gpu_blocks": 90, "block_size": 32, "num_kv_tokens": 2880, "gpu_memory_utilization": 0.8}, "resolved_config": {}}`,
			in:   line("a", "1", "1", "1", "1"),
			want: []datasets.Request{{ReqID: "a", PromptTokens: 10, OutputTokens: 2, NumPreemptions: -1, Status: "finished"}},
			engine: &datasets.EngineConfig{MaxNumSeqs: 8, BlockSize: 32, NumGPUBlocks: 90, NumKVTokens: 2880, GPUMemoryUtilization: 0.8,
				PrefixCaching: true, ChunkedPrefill: true},
			note: "engine: num_gpu_blocks 90 from kv_cache.num_gpu_blocks (engine_kwargs.num_gpu_blocks_override says 100)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sib map[string][]byte
			if tt.meta != "" {
				sib = map[string][]byte{"meta.json": []byte(tt.meta)}
			}
			rows, s, err := parseRequests("vllm-requests", []byte(tt.in), sib)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, rows)
			require.Equal(t, tt.engine, s.m.Engine)
			if tt.note != "" {
				require.Contains(t, s.m.Notes, tt.note)
			}
			if tt.meta == "" {
				require.Contains(t, s.m.Notes, "no meta.json beside in: engine limits and model unknown")
			}
		})
	}
}
