package cluster

import (
	"math"
	"testing"

	"github.com/steplab/steplab/catalog"
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
			sc := DefaultScenario()
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
	sc := DefaultScenario()
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
	assert.Equal(t, Link{BytesPerSec: 450e9, LatencyNs: 5000}, p.KVLink, "the H200's NVLink by default")
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
		spec LinkSpec
		hw   catalog.Hardware
		want Link
	}{
		{"H200: NVLink", LinkSpec{}, h200, Link{BytesPerSec: 450e9, LatencyNs: 5000}},
		{"RTX PRO 6000: PCIe", LinkSpec{}, pcie, Link{BytesPerSec: 64e9, LatencyNs: 15000}},
		{"bandwidth stated", LinkSpec{BandwidthGBs: &bw}, h200, Link{BytesPerSec: 25e9, LatencyNs: 5000}},
		{"latency stated", LinkSpec{LatencyUs: &lat}, pcie, Link{BytesPerSec: 64e9}},
	} {
		got, err := DefaultLink(c.spec, c.hw, "cluster.links.x")
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
	none := pcie
	none.Interconnects = nil
	_, err = DefaultLink(LinkSpec{}, none, "cluster.links.expert")
	assert.ErrorContains(t, err, "cluster.links.expert.bandwidth_gbs is not set and hardware RTX-PRO-6000-Server lists no GPU-to-GPU interconnect")
}

// c_P is the expected maximum of P standard normals (tables: 0.5642 for 2,
// 1.0294 for 4, 1.4236 for 8).
func TestExpectedMaxNormal(t *testing.T) {
	assert.Zero(t, expectedMaxNormal(1))
	assert.InDelta(t, 1/math.Sqrt(math.Pi), expectedMaxNormal(2), 1e-6)
	assert.InDelta(t, 1.0294, expectedMaxNormal(4), 1e-4)
	assert.InDelta(t, 1.4236, expectedMaxNormal(8), 1e-4)
}

// The expert part of a wave: streaming bound at small batch (only the
// experts touched are read, catalog.ExpectedExperts of them), compute bound
// at large batch at the bf16 peak, the busiest of P GPUs above the mean
// load; the all-to-all grows with the busiest rank's tokens and vanishes
// on one GPU.
func TestMoEPricer(t *testing.T) {
	s, err := catalog.LookupModel("Qwen/Qwen3-30B-A3B-Instruct-2507")
	require.NoError(t, err)
	hw, err := catalog.LookupHardware("RTXPRO6000")
	require.NoError(t, err)
	link := Link{BytesPerSec: 64e9, LatencyNs: 10_000}
	two := newMoEPricer(s, hw, 2, link, Scales{})
	one := newMoEPricer(s, hw, 1, link, Scales{})
	r := hw.Roofline // generic: flat curves
	expert := 3 * 2048 * 768 * 2.0

	// One token: its 8 experts, each 3·2048·768·2 bytes a layer, over 48
	// MoE layers at the weight-streaming efficiency.
	bytes := catalog.ExpectedExperts(128, 8, 1) * expert * 48
	assert.InDelta(t, 8.0, catalog.ExpectedExperts(128, 8, 1), 1e-9)
	assert.InEpsilon(t, bytes/(1597e9*r.WeightBWEff.At(bytes))*1e9, one.expertNs(1), 1e-9)
	// Many tokens: every expert read, compute bound at the bf16 peak; the
	// busiest of two GPUs carries more than half.
	big := 20000.0
	assign := big * 8
	mean := assign / 2
	load := two.maxLoad(assign)
	assert.Greater(t, load, mean)
	assert.Less(t, load, mean*1.01)
	assert.InEpsilon(t, 2*3*2048*768*load*48/(503.8e12*r.GEMMEff.At(load))*1e9, two.expertNs(big), 1e-9)
	assert.Greater(t, one.expertNs(big), two.expertNs(big))

	assert.Zero(t, one.a2aNs(100))
	a := two.a2aNs(100)
	msg := 100 * 8 * 2048 * 2 * 0.5
	assert.InEpsilon(t, 2*48*(10_000+msg/(64e9*r.AllReduceEff.At(msg))*1e9), a, 1e-9)
	scaled := *two
	scaled.scales = Scales{A2A: 2}.or1()
	assert.InEpsilon(t, 2.0, scaled.a2aNs(100)/a, 1e-9)

	// fp8 experts run at the fp8 peak where the chip has one, at bf16's
	// where it has none.
	fp8, err := s.WithDTypes("fp8", "")
	require.NoError(t, err)
	assert.Equal(t, 1007.6e12, newMoEPricer(fp8, hw, 2, link, Scales{}).peak)
	a100, err := catalog.LookupHardware("A100-SXM-80GB")
	require.NoError(t, err)
	assert.Equal(t, a100.TFLOPS.BF16*1e12, newMoEPricer(fp8, a100, 2, link, Scales{}).peak)
	assert.Equal(t, 1.0, newMoEPricer(fp8, a100, 2, link, Scales{}).bytesPerExpert/(3*2048*768), "fp8 experts stream one byte a parameter")
}

// The Qwen3 example names its GPU and model as the catalogue does and
// plans the run's placement: two ranks of one expert-parallel instance.
func TestQwenExampleScenario(t *testing.T) {
	sc, err := LoadScenario("../../examples/placement/qwen3-30b-a3b-rtxpro6000.yaml")
	require.NoError(t, err)
	p, err := sc.Plan()
	require.NoError(t, err)
	require.Len(t, p.Pools, 1)
	assert.Equal(t, 2, p.Pools[0].Replicas)
	assert.Equal(t, 2, p.Pools[0].ExpertParallel)
	assert.Equal(t, "RTX-PRO-6000-Server", p.Pools[0].Engine.HW.Name)
	assert.Equal(t, 128, p.Shape.MoE.Experts)
	assert.Equal(t, RouterVLLMDP, p.Router.Name)
	assert.Equal(t, Link{BytesPerSec: 64e9, LatencyNs: 15000}, p.Pools[0].ExpertLink, "PCIe 5.0, the GPU's only link")
}
