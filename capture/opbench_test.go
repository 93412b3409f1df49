package capture

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/fpm/opdb"
)

// TestMeasureOpsCPU runs the operations benchmark on the CPU path (eager
// timings, the torch attention, the unfused element-wise steps) over the
// tiny shape and a tiny mixture of experts, and reads its rows into a
// database the ops prior prices steps with.
func TestMeasureOpsCPU(t *testing.T) {
	requirePython(t, "torch")
	tiny, err := catalog.LookupModel("tiny")
	require.NoError(t, err)
	tinyMoE, err := catalog.LookupModel(filepath.Join("testdata", "tiny-moe", "config.json"))
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "rows.jsonl")
	opts := OpBenchOptions{Worker: WorkerOptions{Python: python, Script: "worker/worker.py"},
		Shapes: []catalog.Shape{tiny, tinyMoE}, Device: "cpu", Grid: "quick", RoutingSkews: []float64{0, 0.5}, Out: out}
	require.NoError(t, MeasureOps(context.Background(), opts))

	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	db, meta, err := opdb.ReadBench(f)
	require.NoError(t, err)
	require.Equal(t, "cpu", meta.Device)
	require.Equal(t, []string{opdb.LaunchEager}, meta.Launches)
	require.NotEmpty(t, meta.WorkerGeneration, "the worker names its generation")
	require.Equal(t, "torch", meta.AttentionBackend)
	for _, r := range db.GEMM {
		require.True(t, r.Eager, "a CPU run times eager calls only")
	}
	ops := map[string]bool{}
	for _, r := range db.Elementwise {
		ops[r.Op] = true
	}
	require.Equal(t, map[string]bool{fpm.OpRMSNorm: true, fpm.OpResidualAdd: true, fpm.OpRoPE: true, fpm.OpKVWrite: true,
		fpm.OpSiLUMul: true, fpm.OpEmbedding: true}, ops, "the CPU's pass: every element-wise step on its own")
	require.NotEmpty(t, db.ContextAttention)
	require.NotEmpty(t, db.GenerationAttention)
	routings := map[string]bool{}
	for _, r := range db.MoE {
		require.True(t, r.Eager)
		require.Equal(t, [4]int{tinyMoE.Hidden, tinyMoE.MoE.ExpertIntermediate, tinyMoE.MoE.TopK, tinyMoE.MoE.Experts}, [4]int{r.Hidden, r.Inter, r.TopK, r.Experts})
		routings[r.Distribution] = true
	}
	require.Equal(t, map[string]bool{"balanced": true, "routing_skew_0": true, "routing_skew_0.5": true}, routings)

	db.System = fpm.OpSystem{GPU: "cpu", MemBandwidth: 1e11, BF16FLOPS: 1e12, MemBWScaling: 1}
	f1 := fpm.Features{DecodeRequests: 4, DecodeKVTokens: 200, PaddedBatch: 4}
	f2 := f1
	f2.PrefillTokens, f2.PrefillRequests = 24, 1
	for _, s := range []catalog.Shape{tiny, tinyMoE} {
		o, err := fpm.NewOps(db, s)
		require.NoError(t, err)
		require.Positive(t, o.PredictNs(f1))
		require.Greater(t, o.PredictNs(f2), o.PredictNs(f1), "a prefill chunk adds work")
	}
	o, err := fpm.NewOps(db, tinyMoE)
	require.NoError(t, err)
	require.Contains(t, strings.Join(o.Notes(), "\n"), "fused MoE table (bfloat16, 8 experts, top-2, TP 1) under routing_skew_0 routing")
}

// A benchmark stopped midway says where its rows are.
func TestMeasureOpsInterrupted(t *testing.T) {
	requirePython(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(t.TempDir(), "rows.jsonl")
	err := MeasureOps(ctx, OpBenchOptions{Worker: WorkerOptions{Python: python, Script: "worker/worker.py"},
		Shapes: nil, Device: "cpu", Grid: "quick", Out: out})
	require.ErrorContains(t, err, "interrupted")
	require.ErrorContains(t, err, out)
}
