package replay

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/importers"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim/cluster"
)

// The vLLM run of Qwen3-30B-A3B on two RTX PRO 6000 (data parallel 2,
// expert parallel) replays, with no placement file, as the pair of ranks
// it ran on: the manifest records the parallelism, the catalogue knows
// the GPU and the model's experts. Calibrating on its first 70% of
// requests predicts the held-out 30% within 10% (TTFT, ITL, E2E).
func TestQwenDataParallelExpertParallelHoldout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "qwen")
	_, err := importers.Import("vllm-requests", "embedded:llmservingsim-qwen3-30b-a3b", dir, importers.Options{})
	require.NoError(t, err)
	run, err := CalibSpec{Datasets: []string{dir}, Holdout: 0.3, MaxEvals: 150}.Setup()
	require.NoError(t, err)
	p := run.Sets[0].Plan
	require.Equal(t, 2, p.Engines())
	require.Equal(t, 2, p.Pools[0].ExpertParallel)
	require.Equal(t, cluster.RouterVLLMDP, p.Router.Name)
	require.True(t, p.ExpertParallel())
	require.Equal(t, 128, p.Shape.MoE.Experts, "the catalogue's Qwen3-30B-A3B")
	require.Equal(t, "RTX-PRO-6000-Server", p.Pools[0].Engine.HW.Name)
	require.True(t, p.Pools[0].Engine.Async, "vLLM 0.19's default")
	res, err := Calibrate(run.Sets, run.Opts)
	require.NoError(t, err)
	require.Len(t, res.Holdout, 1)
	h := res.Holdout[0]
	for _, m := range []string{"ttft_mean", "itl_mean", "itl_p50", "e2e_mean"} {
		assert.Less(t, math.Abs(h.RelErr[m]), 0.10, "held-out %s %+.1f%%", m, 100*h.RelErr[m])
	}
	for _, m := range calibMetrics {
		e := res.Train[0].RelErr[m]
		assert.Less(t, math.Abs(e), 0.05, "fitted %s %+.1f%%", m, 100*e)
	}
	require.NotNil(t, res.MoE)
	a, err := res.Artifact(nil, nil, "test")
	require.NoError(t, err)
	s, ok, err := cluster.ScalesOf(a)
	require.NoError(t, err)
	require.True(t, ok, "the expert-parallel scales travel in the artifact")
	assert.Equal(t, *res.MoE, s)
}

// A run recorded with expert parallelism whose model has no routed
// experts is refused, not replayed as dense engines.
func TestExpertParallelDenseModelRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "qwen")
	_, err := importers.Import("vllm-requests", "embedded:llmservingsim-qwen3-30b-a3b", dir, importers.Options{})
	require.NoError(t, err)
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	d.Manifest.Model.Name = "Qwen/Qwen3-32B"
	_, _, err = scenario.PlanFromManifest(d.Manifest, scenario.ManifestOptions{})
	require.ErrorContains(t, err, "the manifest records data_parallel_size 2 with expert parallelism, but model Qwen3-32B has no routed experts")
}
