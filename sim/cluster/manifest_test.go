package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim/cluster"
)

// PlanFromManifest is the inverse of Plan.Manifest for a placement: pools,
// roles, replicas, expert parallelism, router, links, experts and every
// pool's engine come back as they went.
func TestPlanFromManifestInverse(t *testing.T) {
	for _, sets := range [][]string{
		{"cluster.pools={sim: {replicas: 3}}", "cluster.router.name=kv"},
		{"cluster.pools={p: {role: prefill, replicas: 2, engine: {max_num_seqs: 32}}, d: {role: decode, replicas: 3}}",
			"cluster.links.kv_transfer={bandwidth_gbs: 25, latency_us: 40}", "cluster.router.name=least_kv"},
		{"model=" + tinyMoE, "cluster.pools={e: {replicas: 4, expert_parallel: 2}}",
			"cluster.links.expert={bandwidth_gbs: 100, latency_us: 8}", "cluster.router.name=vllm_dp"},
		{"model=Qwen3-30B-A3B", "hardware=RTXPRO6000", "cluster.pools={dp: {replicas: 2, expert_parallel: 2}}"},
		// an instance of 16 H200s spans two boards: the layout is found again
		{"model=Qwen3-30B-A3B", "cluster.pools={dp: {replicas: 16, expert_parallel: 16}}"},
	} {
		sc := scenario.Default()
		for _, s := range sets {
			require.NoError(t, sc.Set(s))
		}
		p, err := sc.EnginePlan()
		require.NoError(t, err, sets)
		m := p.Manifest(nil, "")
		require.NotNil(t, m.Cluster)
		back, warn, err := scenario.PlanFromManifest(&m, scenario.ManifestOptions{})
		require.NoError(t, err, sets)
		assert.Empty(t, warn, sets)
		assert.Equal(t, p.Router.Name, back.Router.Name)
		assert.Equal(t, p.KVLink, back.KVLink)
		assert.Equal(t, p.Shape, back.Shape, "the whole model, experts and all")
		assert.Equal(t, p.ExpertParallel(), back.ExpertParallel())
		assert.Equal(t, p.GPUs(), back.GPUs())
		require.Len(t, back.Pools, len(p.Pools))
		for i, pp := range p.Pools {
			bp := back.Pools[i]
			assert.Equal(t, pp.Name, bp.Name)
			assert.Equal(t, pp.Role, bp.Role)
			assert.Equal(t, pp.Replicas, bp.Replicas)
			assert.Equal(t, pp.ExpertParallel, bp.ExpertParallel)
			assert.Equal(t, pp.ExpertLink, bp.ExpertLink)
			assert.Equal(t, pp.ExpertLayout, bp.ExpertLayout)
			assert.Equal(t, pp.Engine.Sched, bp.Engine.Sched, "pool %s", pp.Name)
			assert.Equal(t, pp.Engine.Async, bp.Engine.Async)
			assert.Equal(t, pp.Engine.Shape, bp.Engine.Shape)
		}
	}
}

// A vLLM import records data parallelism in its source details: without
// experts the ranks are independent engines behind vLLM's balancer.
func TestPlanFromManifestDataParallel(t *testing.T) {
	p, err := scenario.Default().EnginePlan()
	require.NoError(t, err)
	m := p.Manifest(nil, "")
	m.Source.Detail = map[string]string{"data_parallel_size": "4", "enable_expert_parallel": "false"}
	back, warn, err := scenario.PlanFromManifest(&m, scenario.ManifestOptions{})
	require.NoError(t, err)
	assert.Equal(t, 4, back.Engines())
	assert.Zero(t, back.Pools[0].ExpertParallel)
	assert.Equal(t, cluster.RouterVLLMDP, back.Router.Name)
	assert.Contains(t, warn[0], "data_parallel_size 4: 4 engines as independent engines behind router vllm_dp")

	m.Engine.DataParallelSize, m.Engine.ExpertParallel = 2, true
	_, _, err = scenario.PlanFromManifest(&m, scenario.ManifestOptions{})
	assert.ErrorContains(t, err, "the manifest records data_parallel_size 2 with expert parallelism, but model Llama-3.1-8B has no routed experts",
		"the engine section wins over the details")

	sc := scenario.Default()
	require.NoError(t, sc.Set("model="+tinyMoE))
	p, err = sc.EnginePlan()
	require.NoError(t, err)
	m = p.Manifest(nil, "")
	m.Engine.DataParallelSize, m.Engine.ExpertParallel, m.Engine.NumGPUBlocks = 2, true, 0
	spec := scenario.Spec{Router: cluster.RouterSpec{Name: cluster.RouterKV}}
	back, warn, err = scenario.PlanFromManifest(&m, scenario.ManifestOptions{Spec: &spec})
	require.NoError(t, err)
	assert.Equal(t, 2, back.Pools[0].ExpertParallel)
	assert.Equal(t, cluster.RouterKV, back.Router.Name, "the placement names the router")
	assert.Equal(t, 8, back.Shape.MoE.Experts, "the experts from the manifest's model section")
	assert.Zero(t, back.Pools[0].Engine.Shape.MoE, "the engines price the dense part")
	want, err := catalog.KVBlocks(back.Pools[0].Engine.HW, back.Shape, 16, 0.9, 2)
	require.NoError(t, err)
	assert.Equal(t, want, back.Pools[0].Engine.Sched.NumGPUBlocks, "the KV beside half the experts")
	assert.Contains(t, warn, fmt.Sprintf("num_gpu_blocks not recorded: %d estimated from H200-SXM memory, the dense weights, the 8 experts' share over 2 GPUs and gpu_memory_utilization 0.9", want))
}

// One engine's manifest has no cluster section: simulate's manifest.
func TestOneEngineManifest(t *testing.T) {
	p, err := scenario.Default().EnginePlan()
	require.NoError(t, err)
	m := p.Manifest(nil, "")
	assert.Nil(t, m.Cluster)
}

// A run on a GPU and a model no catalogue knows replays from the spec file
// and config.json its manifest records; a user catalogue (STEPLAB_CATALOG)
// names them as the built-ins do.
func TestPlanFromManifestUserFiles(t *testing.T) {
	m := &datasets.Manifest{Hardware: &datasets.Hardware{GPUName: "Imaginary GPU"}, Model: &datasets.ModelShape{Name: "org/Imaginary-MoE"},
		Engine: &datasets.EngineConfig{MaxNumSeqs: 64, MaxNumBatchedTokens: 2048, BlockSize: 16, MaxModelLen: 4096, NumGPUBlocks: 5000,
			ChunkedPrefill: true, DataParallelSize: 2, ExpertParallel: true}}
	_, _, err := scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	require.ErrorContains(t, err, "Imaginary GPU")
	m.Hardware.Spec, m.Model.Config = "testdata/imaginary-gpu.yaml", tinyMoE
	p, _, err := scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Imaginary GPU", p.Pools[0].Engine.HW.Name)
	assert.Equal(t, 8, p.Shape.MoE.Experts)
	assert.Equal(t, 2, p.Pools[0].ExpertParallel)
	assert.Equal(t, 5000, p.Pools[0].Engine.Sched.NumGPUBlocks)
	assert.Equal(t, cluster.Link{BytesPerSec: 32e9, LatencyNs: 15000}, p.Pools[0].ExpertLink, "the spec's PCIe")

	dir := t.TempDir()
	for src, dst := range map[string]string{"testdata/imaginary-gpu.yaml": "hardware/imaginary.yaml", tinyMoE + "/config.json": "models/Imaginary-MoE/config.json"} {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(dst)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, dst), b, 0o644))
	}
	t.Setenv(catalog.CatalogEnv, dir)
	m.Hardware.Spec, m.Model.Config = "", ""
	p, _, err = scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	require.NoError(t, err)
	assert.Equal(t, 8, p.Shape.MoE.Experts, "org/Imaginary-MoE from the user catalogue")
}
