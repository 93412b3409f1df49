package capture

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/fpm/opdb"
)

// TestMeasureOpsCPU runs the operations benchmark on the CPU path (eager
// timings, the torch attention) over the tiny shape and reads its rows
// into a database the ops prior prices steps with.
func TestMeasureOpsCPU(t *testing.T) {
	requirePython(t, "torch")
	tiny, err := catalog.LookupModel("tiny")
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "rows.jsonl")
	opts := OpBenchOptions{Worker: WorkerOptions{Python: python, Script: "worker/worker.py"},
		Shapes: []catalog.Shape{tiny}, Device: "cpu", Grid: "quick", Out: out}
	require.NoError(t, MeasureOps(context.Background(), opts))

	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	db, meta, err := opdb.ReadBench(f)
	require.NoError(t, err)
	require.Equal(t, "cpu", meta.Device)
	require.Equal(t, []string{opdb.LaunchEager}, meta.Launches)
	for _, r := range db.GEMM {
		require.True(t, r.Eager, "a CPU run times eager calls only")
	}
	ops := map[string]bool{}
	for _, r := range db.Elementwise {
		ops[r.Op] = true
	}
	require.Len(t, ops, len(fpm.ElementwiseOps), "every element-wise op of a layer is measured")
	require.NotEmpty(t, db.ContextAttention)
	require.NotEmpty(t, db.GenerationAttention)

	db.System = fpm.OpSystem{GPU: "cpu", MemBandwidth: 1e11, BF16FLOPS: 1e12, MemBWScaling: 1}
	o, err := fpm.NewOps(db, tiny)
	require.NoError(t, err)
	f1 := fpm.Features{DecodeRequests: 4, DecodeKVTokens: 200, PaddedBatch: 4}
	f2 := f1
	f2.PrefillTokens, f2.PrefillRequests = 24, 1
	require.Positive(t, o.PredictNs(f1))
	require.Greater(t, o.PredictNs(f2), o.PredictNs(f1), "a prefill chunk adds work")
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
