package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// PlanFromManifest is the inverse of Plan.Manifest for a placement: pools,
// roles, replicas, expert parallelism, router, links, experts and every
// pool's engine come back as they went.
func TestPlanFromManifestInverse(t *testing.T) {
	for _, sets := range [][]string{
		{"cluster.pools={sim: {replicas: 3}}", "cluster.router.name=kv"},
		{"cluster.pools={p: {role: prefill, replicas: 2, engine: {max_num_seqs: 32}}, d: {role: decode, replicas: 3}}",
			"cluster.links.kv_transfer={bandwidth_gbs: 25, latency_us: 40}", "cluster.router.name=least_kv"},
		{"cluster.moe={experts: 64, top_k: 4, expert_intermediate: 1024}", "cluster.pools={e: {replicas: 4, expert_parallel: 2}}",
			"cluster.links.expert={bandwidth_gbs: 100, latency_us: 8}", "cluster.router.name=vllm_dp"},
	} {
		sc := DefaultScenario()
		for _, s := range sets {
			require.NoError(t, sc.Set(s))
		}
		p, err := sc.EnginePlan()
		require.NoError(t, err, sets)
		m := p.Manifest(nil, "")
		require.NotNil(t, m.Cluster)
		back, warn, err := PlanFromManifest(&m, ManifestOptions{})
		require.NoError(t, err, sets)
		assert.Empty(t, warn, sets)
		assert.Equal(t, p.Router.Name, back.Router.Name)
		assert.Equal(t, p.KVLink, back.KVLink)
		assert.Equal(t, p.MoE, back.MoE)
		assert.Equal(t, p.GPUs(), back.GPUs())
		require.Len(t, back.Pools, len(p.Pools))
		for i, pp := range p.Pools {
			bp := back.Pools[i]
			assert.Equal(t, pp.Name, bp.Name)
			assert.Equal(t, pp.Role, bp.Role)
			assert.Equal(t, pp.Replicas, bp.Replicas)
			assert.Equal(t, pp.ExpertParallel, bp.ExpertParallel)
			assert.Equal(t, pp.ExpertLink, bp.ExpertLink)
			assert.Equal(t, pp.Engine.Sched, bp.Engine.Sched, "pool %s", pp.Name)
			assert.Equal(t, pp.Engine.Async, bp.Engine.Async)
			assert.Equal(t, pp.Engine.Shape, bp.Engine.Shape)
		}
	}
}

// A vLLM import records data parallelism in its source details: without
// experts the ranks are independent engines behind vLLM's balancer.
func TestPlanFromManifestDataParallel(t *testing.T) {
	p, err := DefaultScenario().EnginePlan()
	require.NoError(t, err)
	m := p.Manifest(nil, "")
	m.Source.Detail = map[string]string{"data_parallel_size": "4", "enable_expert_parallel": "false"}
	back, warn, err := PlanFromManifest(&m, ManifestOptions{})
	require.NoError(t, err)
	assert.Equal(t, 4, back.Engines())
	assert.Zero(t, back.Pools[0].ExpertParallel)
	assert.Equal(t, RouterVLLMDP, back.Router.Name)
	assert.Contains(t, warn[0], "data_parallel_size 4: 4 engines as independent engines behind router vllm_dp")

	m.Engine.DataParallelSize, m.Engine.ExpertParallel = 2, true
	_, _, err = PlanFromManifest(&m, ManifestOptions{})
	assert.ErrorContains(t, err, "expert layout is unknown", "the engine section wins over the details")
	spec := Spec{MoE: &MoE{Experts: 8, TopK: 2, ExpertIntermediate: 512}, Router: RouterSpec{Name: RouterKV}}
	back, _, err = PlanFromManifest(&m, ManifestOptions{Spec: &spec})
	require.NoError(t, err)
	assert.Equal(t, 2, back.Pools[0].ExpertParallel)
	assert.Equal(t, RouterKV, back.Router.Name, "the placement names the router")
}

// One engine's manifest has no cluster section: simulate's manifest.
func TestOneEngineManifest(t *testing.T) {
	p, err := DefaultScenario().EnginePlan()
	require.NoError(t, err)
	assert.Equal(t, p.Pools[0].Engine.Manifest(nil, ""), p.Manifest(nil, ""))
	var m datasets.Manifest = p.Manifest(nil, "")
	assert.Nil(t, m.Cluster)
}

// A placement's inline GPU and model price a run whose manifest names
// ones the catalogue does not know.
func TestPlanFromManifestInlineSpecs(t *testing.T) {
	m := &datasets.Manifest{Hardware: &datasets.Hardware{GPUName: "Imaginary GPU"}, Model: &datasets.ModelShape{Name: "org/Imaginary-8B"},
		Engine: &datasets.EngineConfig{MaxNumSeqs: 64, MaxNumBatchedTokens: 2048, BlockSize: 16, MaxModelLen: 4096, NumGPUBlocks: 5000, ChunkedPrefill: true}}
	_, _, err := PlanFromManifest(m, ManifestOptions{})
	require.ErrorContains(t, err, "Imaginary GPU")
	spec := Spec{HardwareSpec: &HardwareSpec{Name: "g", PeakTFLOPS: 400, MemBandwidthGBs: 2000, MemGB: 48},
		ModelSpec: &ModelSpec{Name: "m", Layers: 8, Hidden: 1024, Heads: 8, KVHeads: 8, HeadDim: 128, Intermediate: 4096, Vocab: 32000}}
	p, _, err := PlanFromManifest(m, ManifestOptions{Spec: &spec})
	require.NoError(t, err)
	assert.Equal(t, "g", p.Pools[0].Engine.HW.Name)
	assert.Equal(t, 8, p.Pools[0].Engine.Shape.Layers)
	assert.Equal(t, 5000, p.Pools[0].Engine.Sched.NumGPUBlocks)
}
