package replay

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/importers"
	"github.com/steplab/steplab/sim/cluster"
)

const qwenPlacement = "../examples/placement/qwen3-30b-a3b-rtxpro6000.yaml"

// The vLLM run of Qwen3-30B-A3B on two RTX PRO 6000 (data parallel 2,
// expert parallel) replays as the pair of ranks it ran on, and calibrating
// on its first 70% of requests predicts the held-out 30%: ITL and E2E
// within 10%. TTFT is within 20%: the import takes each request's arrival
// from vLLM's queued_ts, stamped when the engine loop picks it up at a
// step boundary, not when it arrived (docs/placement.md).
func TestQwenDataParallelExpertParallelHoldout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "qwen")
	_, err := importers.Import("vllm-requests", "embedded:llmservingsim-qwen3-30b-a3b", dir, importers.Options{})
	require.NoError(t, err)
	run, err := CalibSpec{Datasets: []string{dir}, Holdout: 0.3, Cluster: qwenPlacement, MaxEvals: 150}.Setup()
	require.NoError(t, err)
	p := run.Sets[0].Plan
	require.Equal(t, 2, p.Engines())
	require.Equal(t, 2, p.Pools[0].ExpertParallel)
	require.Equal(t, cluster.RouterVLLMDP, p.Router.Name)
	require.NotNil(t, p.MoE)
	res, err := Calibrate(run.Sets, run.Opts)
	require.NoError(t, err)
	require.Len(t, res.Holdout, 1)
	h := res.Holdout[0]
	for _, m := range []string{"itl_mean", "itl_p50", "e2e_mean"} {
		assert.Less(t, math.Abs(h.RelErr[m]), 0.10, "held-out %s %+.1f%%", m, 100*h.RelErr[m])
	}
	assert.Less(t, math.Abs(h.RelErr["ttft_mean"]), 0.20, "held-out ttft_mean %+.1f%%", 100*h.RelErr["ttft_mean"])
	for _, m := range calibMetrics {
		e := res.Train[0].RelErr[m]
		assert.Less(t, math.Abs(e), 0.05, "fitted %s %+.1f%%", m, 100*e)
	}
	require.NotNil(t, res.MoE)
	a, err := res.Artifact(nil, "test")
	require.NoError(t, err)
	s, ok, err := cluster.ScalesOf(a)
	require.NoError(t, err)
	require.True(t, ok, "the expert-parallel scales travel in the artifact")
	assert.Equal(t, *res.MoE, s)
}

// Without the model's expert layout the run is refused, not replayed as a
// dense engine.
func TestQwenWithoutExpertsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "qwen")
	_, err := importers.Import("vllm-requests", "embedded:llmservingsim-qwen3-30b-a3b", dir, importers.Options{})
	require.NoError(t, err)
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	_, _, err = cluster.PlanFromManifest(d.Manifest, cluster.ManifestOptions{})
	require.ErrorContains(t, err, "data_parallel_size 2 with expert parallelism, but the model's expert layout is unknown")
}
