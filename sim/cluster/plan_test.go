package cluster_test

import (
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Placements that cannot run are refused before anything runs, with a
// message that names the field (and lists the routers).
func TestBadPlacementRefused(t *testing.T) {
	cases := []struct {
		name string
		sets []string
		want []string
	}{
		{"pool with no GPUs", []string{"cluster.pools={a: {replicas: 0}}"}, []string{"cluster.pools.a.replicas is 0"}},
		{"negative replicas", []string{"cluster.pools={a: {replicas: -2}}"}, []string{"cluster.pools.a.replicas is -2"}},
		{"unknown router", []string{"cluster.pools={a: {replicas: 2}}", "cluster.router.name=fastest"},
			[]string{`cluster.router.name "fastest"`, "round_robin, least_requests, least_kv, session, kv, vllm_dp"}},
		{"link with no bandwidth", []string{"cluster.pools={p: {role: prefill, replicas: 1}, d: {role: decode, replicas: 1}}",
			"cluster.links.kv_transfer={bandwidth_gbs: 0}"}, []string{"cluster.links.kv_transfer.bandwidth_gbs is 0"}},
		{"link with negative latency", []string{"cluster.pools={p: {role: prefill, replicas: 1}, d: {role: decode, replicas: 1}}",
			"cluster.links.kv_transfer={latency_us: -1}"}, []string{"cluster.links.kv_transfer.latency_us is -1"}},
		{"expert link with no bandwidth", []string{"model=" + tinyMoE,
			"cluster.pools={e: {replicas: 2, expert_parallel: 2}}", "cluster.links.expert={bandwidth_gbs: -1}"},
			[]string{"cluster.links.expert.bandwidth_gbs is -1"}},
		{"more EP ranks than experts", []string{"model=" + tinyMoE, "cluster.pools={e: {replicas: 16, expert_parallel: 16}}"},
			[]string{"cluster.pools.e.expert_parallel is 16, more ranks than the model's 8 experts"}},
		{"EP instance not filling nodes", []string{"model=Qwen3-30B-A3B", "cluster.pools={e: {replicas: 12, expert_parallel: 12}}"},
			[]string{"cluster.pools.e: an expert-parallel instance of 12 GPUs: 12 GPUs do not fill whole nodes of 8 H200-SXM GPUs"}},
		{"expert parallel without experts", []string{"cluster.pools={e: {replicas: 2, expert_parallel: 2}}"},
			[]string{"cluster.pools.e.expert_parallel is 2 but model Llama-3.1-8B has no routed experts"}},
		{"EP does not divide replicas", []string{"cluster.pools={e: {replicas: 3, expert_parallel: 2}}"}, []string{"expert_parallel 2 does not divide replicas 3"}},
		{"unknown pool hardware", []string{"cluster.pools={a: {replicas: 2, hardware: Imaginary GPU}}"}, []string{"cluster.pools.a.hardware", "Imaginary GPU"}},
		{"two aggregated pools", []string{"cluster.pools={a: {replicas: 1}, b: {replicas: 1}}"}, []string{"found 2 both, 0 prefill, 0 decode"}},
		{"prefill without decode", []string{"cluster.pools={p: {role: prefill, replicas: 1}}"}, []string{"found 0 both, 1 prefill, 0 decode"}},
		{"unknown role", []string{"cluster.pools={a: {role: encode, replicas: 1}}"}, []string{`cluster.pools.a.role "encode"`}},
		{"negative temperature", []string{"cluster.router.temperature=-1"}, []string{"cluster.router.temperature is -1"}},
		{"pool engine key unknown", []string{"cluster.pools={a: {replicas: 1, engine: {max_num_seqz: 3}}}"}, []string{`unknown key "max_num_seqz" in cluster.pools.a.engine`}},
		{"pool limits invalid", []string{"cluster.pools={a: {replicas: 2, engine: {block_size: 24}}}"}, []string{"cluster.pools.a", "block_size is 24"}},
		{"pools of different block sizes", []string{"cluster.pools={p: {role: prefill, replicas: 1, engine: {block_size: 32}}, d: {role: decode, replicas: 1}}"},
			[]string{"cluster.pools.d: block_size 16 differs"}},
		{"experts do not fit", []string{"model=testdata/huge-moe", "cluster.pools={e: {replicas: 2, expert_parallel: 2}}"},
			[]string{"cluster.pools.e: the experts need", "spread them over more GPUs (expert_parallel)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := scenario.Default()
			var err error
			for _, s := range c.sets {
				if err = sc.Set(s); err != nil {
					break
				}
			}
			if err == nil {
				_, err = sc.Plan()
			}
			require.Error(t, err)
			for _, w := range c.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// A pool's engine keys override the scenario's; a --set updates the pool
// it names and keeps the others.
func TestPoolOverrides(t *testing.T) {
	sc := scenario.Default()
	require.NoError(t, sc.Set("cluster.pools={p: {role: prefill, replicas: 2, engine: {max_num_seqs: 8}}, d: {role: decode, replicas: 3}}"))
	require.NoError(t, sc.Set("cluster.pools.d.replicas=5"))
	require.NoError(t, sc.Set("cluster.pools.p.engine.max_num_batched_tokens=4096"))
	p, err := sc.Plan()
	require.NoError(t, err)
	require.Len(t, p.Pools, 2)
	assert.Equal(t, 2, p.Pools[0].Replicas)
	assert.Equal(t, 5, p.Pools[1].Replicas)
	assert.Equal(t, 8, p.Pools[0].Engine.Sched.MaxNumSeqs, "kept through the second --set of the pool")
	assert.Equal(t, 4096, p.Pools[0].Engine.Sched.MaxNumBatchedTokens)
	assert.Equal(t, 256, p.Pools[1].Engine.Sched.MaxNumSeqs, "the scenario's")
	assert.Equal(t, 7, p.GPUs())
	assert.True(t, p.Disaggregated())
	assert.Equal(t, cluster.Link{BytesPerSec: 450e9, LatencyNs: 5000}, p.KVLink, "the H200's NVLink by default")
}

// tinyMoE is a two-layer mixture of 8 experts, 2 per token.
const tinyMoE = "testdata/tiny-moe"

// Links left out are the hardware's GPU-to-GPU link (TPLink); what a spec
// states wins, field by field.
func TestDefaultLink(t *testing.T) {
	h200, err := catalog.LookupHardware("H200")
	require.NoError(t, err)
	pcie, err := catalog.LookupHardware("RTXPRO6000")
	require.NoError(t, err)
	bw, lat := 25.0, 0.0
	for _, c := range []struct {
		name string
		spec cluster.LinkSpec
		hw   catalog.Hardware
		want cluster.Link
	}{
		{"H200: NVLink", cluster.LinkSpec{}, h200, cluster.Link{BytesPerSec: 450e9, LatencyNs: 5000}},
		{"RTX PRO 6000: PCIe", cluster.LinkSpec{}, pcie, cluster.Link{BytesPerSec: 64e9, LatencyNs: 15000}},
		{"bandwidth stated", cluster.LinkSpec{BandwidthGBs: &bw}, h200, cluster.Link{BytesPerSec: 25e9, LatencyNs: 5000}},
		{"latency stated", cluster.LinkSpec{LatencyUs: &lat}, pcie, cluster.Link{BytesPerSec: 64e9}},
	} {
		got, err := cluster.DefaultLink(c.spec, c.hw, "cluster.links.x")
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
	none := pcie
	none.Interconnects = nil
	_, err = cluster.DefaultLink(cluster.LinkSpec{}, none, "cluster.links.expert")
	assert.ErrorContains(t, err, "cluster.links.expert.bandwidth_gbs is not set and hardware RTX-PRO-6000-Server lists no GPU-to-GPU interconnect")
}

// The Qwen3 example names its GPU and model as the catalogue does and
// plans the run's placement: two ranks of one expert-parallel instance.
func TestQwenExampleScenario(t *testing.T) {
	sc, err := scenario.Load("../../examples/placement/qwen3-30b-a3b-rtxpro6000.yaml")
	require.NoError(t, err)
	p, err := sc.Plan()
	require.NoError(t, err)
	require.Len(t, p.Pools, 1)
	assert.Equal(t, 2, p.Pools[0].Replicas)
	assert.Equal(t, 2, p.Pools[0].ExpertParallel)
	assert.Equal(t, "RTX-PRO-6000-Server", p.Pools[0].Engine.HW.Name)
	assert.Equal(t, 128, p.Shape.MoE.Experts)
	assert.Equal(t, cluster.RouterVLLMDP, p.Router.Name)
	assert.Equal(t, cluster.Link{BytesPerSec: 64e9, LatencyNs: 15000}, p.Pools[0].ExpertLink, "PCIe 5.0, the GPU's only link")
}
