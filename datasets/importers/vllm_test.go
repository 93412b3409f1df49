package importers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

func TestVLLMRequestsRealRuns(t *testing.T) {
	tests := []struct {
		dir       string
		model     string
		last      datasets.Request // bench-299
		reordered bool
		gpus, dp  int
		samples   int64
	}{
		{dir: vllmLlama, model: "meta-llama/Llama-3.1-8B",
			last: datasets.Request{ReqID: "bench-299", ArrivalNs: 29_171_480_718, PromptTokens: 582, OutputTokens: 768,
				FirstScheduledNs: 49_349_103_715, FirstTokenNs: 49_442_175_210, FinishNs: 64_202_072_513, NumPreemptions: -1, Status: "finished"},
			gpus: 1, dp: 1, samples: 67},
		{dir: vllmQwen, model: "Qwen/Qwen3-30B-A3B-Instruct-2507",
			last: datasets.Request{ReqID: "bench-299", ArrivalNs: 29_123_358_519, PromptTokens: 1168, OutputTokens: 583,
				FirstScheduledNs: 38_461_779_818, FirstTokenNs: 38_625_068_461, FinishNs: 58_392_312_143, NumPreemptions: -1, Status: "finished"},
			reordered: true, gpus: 2, dp: 2, samples: 65},
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
				PrefixCaching: true, ChunkedPrefill: true, KVCacheDType: "auto", TensorParallelSize: 1, DataParallelSize: tt.dp,
				ExpertParallel: tt.dp > 1}, m.Engine)
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
			require.Equal(t, tt.reordered, hasReorderNote)
			if tt.reordered {
				require.Equal(t, "bench-10", rows[9].ReqID, "DP=2: bench-10 was queued before bench-9")
			}
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
	require.Equal(t, "-0.148", m.Source.Detail["timeseries_offset_s"])
}

func TestVLLMRequestsEmbedded(t *testing.T) {
	rows, err := ReadRequests("vllm-requests", "embedded:llmservingsim-llama-3.1-8b")
	require.NoError(t, err)
	require.Len(t, rows, 300)
	require.Equal(t, datasets.Request{ReqID: "bench-0", ArrivalNs: 0, PromptTokens: 2358, OutputTokens: 531,
		FirstScheduledNs: 46_148, FirstTokenNs: 169_525_194, FinishNs: 15_713_401_823, NumPreemptions: -1, Status: "finished"}, rows[0])
}

func TestVLLMRequestsParsing(t *testing.T) {
	const meta = `{"schema_version": 1, "model": "m", "vllm_version": "0.19.0", "engine_kwargs": {"max_num_seqs": 8, "max_num_batched_tokens": 512, "max_model_len": 4096, "block_size": 32, "enable_prefix_caching": false}}`
	line := func(id string, q, s, f, l string) string {
		return `{"request_id": "` + id + `", "input_toks": 10, "output_toks": 2, "arrival_time": 1777142838.5, "queued_ts": ` + q +
			`, "scheduled_ts": ` + s + `, "first_token_ts": ` + f + `, "last_token_ts": ` + l + "}\n"
	}
	tests := []struct {
		name    string
		in      string
		meta    string
		want    []datasets.Request
		engine  *datasets.EngineConfig
		note    string
		wantErr string
	}{
		{name: "sorted by queued_ts, unfinished request", meta: meta,
			in: line("b", "100.5", "100.6", "100.7", "101.0") + line("a", "100.25", "100.3", "null", "null"),
			want: []datasets.Request{
				{ReqID: "a", ArrivalNs: 0, PromptTokens: 10, OutputTokens: 2, FirstScheduledNs: 50_000_000, FirstTokenNs: -1, FinishNs: -1, NumPreemptions: -1, Status: "unfinished"},
				{ReqID: "b", ArrivalNs: 250_000_000, PromptTokens: 10, OutputTokens: 2, FirstScheduledNs: 350_000_000, FirstTokenNs: 450_000_000, FinishNs: 750_000_000, NumPreemptions: -1, Status: "finished"},
			},
			engine: &datasets.EngineConfig{MaxNumSeqs: 8, MaxNumBatchedTokens: 512, MaxModelLen: 4096, BlockSize: 32, PrefixCaching: false, ChunkedPrefill: true}},
		{name: "no meta.json", in: line("a", "1", "1", "1", "1"),
			want: []datasets.Request{{ReqID: "a", PromptTokens: 10, OutputTokens: 2, NumPreemptions: -1, Status: "finished"}}},
		{name: "event order", meta: meta, in: line("a", "1", "2", "1.5", "3"), wantErr: "in:1: first_token_ts 1.500000 is earlier than scheduled_ts 2.000000"},
		{name: "duplicate id", meta: meta, in: line("a", "1", "1", "1", "1") + line("a", "2", "2", "2", "2"), wantErr: `in:2: request_id: "a" already used on line 1`},
		{name: "missing queued", meta: meta, in: line("a", "null", "1", "1", "1"), wantErr: "in:1: missing field queued_ts"},
		{name: "bad time", meta: meta, in: line("a", `"x"`, "1", "1", "1"), wantErr: `in:1: queued_ts: "x" is not a number of seconds`},
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
