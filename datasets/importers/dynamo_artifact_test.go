package importers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

func readFixture(t testing.TB, name string) []byte {
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

func TestDynamoArtifactComplete(t *testing.T) {
	rows, s, err := parseSteps("dynamo-fpm-artifact", readFixture(t, "artifact_complete.json"))
	require.NoError(t, err)
	require.Len(t, rows, 8)
	checkSteps(t, rows)
	u, u32 := datasets.Unknown, int32(datasets.Unknown)
	require.Equal(t, datasets.Step{
		StepID: 3, WorkerID: "7587891376465402128", DPRank: 0, Kind: "prefill", Role: "measured", BenchmarkID: 4,
		SampleReason: "capture", Valid: true,
		NumNewReqs: u32, NumCachedReqs: u32, NumResumedReqs: u32, NumPreempted: u32, NumFinished: u32,
		NumPrefillRequests: 2, SumPrefillTokens: 512, SumPrefillKVTokens: 1024, TotalScheduledTokens: 512, PaddedTokens: 0,
		MaxDecodeKVTokens: u, SumPrefillAttn: float64(u), NewReqTokens: u, CUDAGraphSize: 512,
		PayloadBytes: u, PayloadNewBytes: u, PayloadCachedBytes: u,
		TScheduleStart: u, TScheduleEnd: u, TDispatch: u, TOutput: u, TUpdateEnd: u, WallTimeNs: 24_871_000,
		NarrowTimeNs: u, GPUTimeNs: u, HostPrepNs: u, WorkerRecvNs: u, SampleNs: u,
		NumWaiting: 0, NumRunning: u32, KVBlocksUsed: u, KVBlocksTotal: 41234,
	}, rows[3])
	require.Equal(t, "scaffolding", rows[1].Role, "eager_warmup replica")
	require.Equal(t, "eager_tail,eager_warmup", rows[1].SampleReason)
	require.Equal(t, "decode", rows[7].Kind)
	require.Equal(t, int64(1), rows[7].PaddedTokens, "context_clamped decode B=3 padded to capture size 4")
	require.Equal(t, int32(4), rows[7].CUDAGraphSize)
	require.Equal(t, int64(3), rows[7].TotalScheduledTokens)
	for _, r := range rows {
		require.True(t, r.Valid, "benchmark %d", r.BenchmarkID)
	}
	m := s.m
	require.Equal(t, &datasets.MeasurementPolicy{Decode: "steady_state_second_step", Prefill: "single_step"}, m.MeasurementPolicy)
	require.Equal(t, &datasets.EngineConfig{MaxNumSeqs: 256, MaxNumBatchedTokens: 8192, MaxModelLen: 32768, BlockSize: 16, NumGPUBlocks: 41234}, m.Engine)
	require.Equal(t, []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}, m.CUDAGraphSizes)
	require.Equal(t, "2026-04-12T10:15:02.118Z", m.Created)
	require.Equal(t, "agg", m.Source.Detail["benchmark_mode"])
	require.Equal(t, "fpm-bench-20260412T101502Z-3f9c", m.Source.Detail["run_id"])
	require.Equal(t, "FULL_AND_PIECEWISE", m.Source.Detail["cudagraph_mode"])
	require.Contains(t, m.Notes, "coverage: 8 of 8 points completed")
	for _, n := range m.Notes {
		require.False(t, strings.HasPrefix(n, "skipped point"), n)
	}
}

func TestDynamoArtifactPartial(t *testing.T) {
	rows, s, err := parseSteps("dynamo-fpm-artifact", readFixture(t, "artifact_partial.json"))
	require.NoError(t, err)
	require.Len(t, rows, 4)
	checkSteps(t, rows)
	for _, r := range rows {
		require.False(t, r.Valid)
		require.Equal(t, "artifact_invalid:partial", r.InvalidReason)
	}
	n := s.m.Notes
	require.Contains(t, n, "artifact status partial: the benchmark did not finish; rows are what it measured before stopping")
	require.Contains(t, n, "stop_reason: timeout")
	require.Contains(t, n, "missing phases: decode")
	require.Contains(t, n, "error: benchmark timeout after 900.0 s (soft limit)")
	require.Contains(t, n, "skipped point decode benchmark_id=5 batch_size=1 total_prefill_tokens=0 total_kv_read_tokens=1024 (capture): decode_injection_failed")
	require.Contains(t, n, "skipped point decode benchmark_id=6 batch_size=64 total_prefill_tokens=0 total_kv_read_tokens=65536 (capture,geometric_axis): measured_decode_context_mismatch")
	require.Equal(t, "partial", s.m.Source.Detail["status"])
	require.Equal(t, "false", s.m.Source.Detail["usable"])
}

func TestDynamoArtifactLegacyWithoutPolicy(t *testing.T) {
	rows, s, err := parseSteps("dynamo-fpm-artifact", readFixture(t, "artifact_legacy.json"))
	require.NoError(t, err)
	require.Len(t, rows, 3)
	checkSteps(t, rows)
	require.Equal(t, &datasets.MeasurementPolicy{Decode: "admission_step", Prefill: "single_step"}, s.m.MeasurementPolicy)
	found := false
	for _, n := range s.m.Notes {
		found = found || strings.HasPrefix(n, "measurement_policy absent: the artifact predates steady-state decode")
	}
	require.True(t, found, "the policy assumption is noted: %q", s.m.Notes)
	require.True(t, rows[0].Valid)
	require.False(t, rows[1].Valid)
	require.Equal(t, "measured_batch_size_mismatch", rows[1].InvalidReason, "63 requests measured for a B=64 point")
	require.Equal(t, int32(2), rows[2].NumWaiting)
	require.Equal(t, int64(171_620_000), rows[2].WallTimeNs)
	require.Contains(t, s.m.Notes, "1 rows invalid: measured_batch_size_mismatch")
}

func TestDynamoArtifactFailed(t *testing.T) {
	rows, s, err := parseSteps("dynamo-fpm-artifact", readFixture(t, "artifact_failed.json"))
	require.NoError(t, err)
	require.Empty(t, rows)
	require.Contains(t, s.m.Notes, `error: {"type":"RuntimeError","message":"CUDA out of memory while injecting 8192-token prefill"}`)
	require.Contains(t, s.m.Notes, "skipped point prefill benchmark_id=1 batch_size=1 total_prefill_tokens=8192 total_kv_read_tokens=0 (engine_limit): prefill_injection_failed")
	require.Contains(t, s.m.Notes, "missing phases: prefill, decode")
}

func TestDynamoArtifactErrors(t *testing.T) {
	complete := string(readFixture(t, "artifact_complete.json"))
	tests := []struct{ name, in, want string }{
		{"schema 3", `{"schema_version": 3, "results": []}`, "in: schema_version 3 is not supported: this importer reads Dynamo self-benchmark artifacts with schema_version 2"},
		{"schema 1", `{"schema_version": 1}`, "schema_version 1 is not supported"},
		{"no schema", `{"results": []}`, "in: no schema_version: not a Dynamo self-benchmark artifact"},
		{"not json", "schema_version: 2", "in:1:1: invalid character"},
		{"truncated", complete[:500], "in: truncated JSON"},
		{"merged", `{"schema_version": 2, "artifact_type": "merged"}`, `artifact_type "merged": import the per-rank artifacts`},
		{"type error", strings.Replace(complete, `"batch_size": 2,`, `"batch_size": "two",`, 1),
			`results.point.batch_size: string where the format has an integer`},
		{"negative count", strings.Replace(complete, `"sum_prefill_kv_tokens": 1024`, `"sum_prefill_kv_tokens": -1024`, 1),
			"in: results[3].fpms[0]: scheduled_requests.sum_prefill_kv_tokens: -1024 is negative"},
		{"fpm version", strings.Replace(complete, `"version": 1,`, `"version": 2,`, 1),
			"in: results[0].fpms[0]: version 2 is not supported"},
		{"bad point type", strings.Replace(complete, `"point_type": "prefill"`, `"point_type": "agg"`, 1),
			`in: results[0].point: point_type "agg" is neither prefill nor decode`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseSteps("dynamo-fpm-artifact", []byte(tt.in))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// A malformed artifact is described in JSON's words, never with a Go type.
func TestArtifactTypeErrorsInJSONWords(t *testing.T) {
	for _, c := range []struct {
		mutate func(map[string]any)
		want   string
	}{
		{func(a map[string]any) { a["results"] = "nope" }, "results: string where the format has an array of objects"},
		{func(a map[string]any) { a["timing"] = []any{1} }, "timing: array where the format has an object"},
	} {
		b, err := os.ReadFile("testdata/artifact_complete.json")
		require.NoError(t, err)
		var a map[string]any
		require.NoError(t, json.Unmarshal(b, &a))
		c.mutate(a)
		b, err = json.Marshal(a)
		require.NoError(t, err)
		p := filepath.Join(t.TempDir(), "bad.json")
		require.NoError(t, os.WriteFile(p, b, 0o644))
		_, err = Import("dynamo-fpm-artifact", p, filepath.Join(t.TempDir(), "out"), Options{})
		require.ErrorContains(t, err, c.want)
		require.NotContains(t, err.Error(), "struct")
		require.NotContains(t, err.Error(), "importers.")
	}
}
