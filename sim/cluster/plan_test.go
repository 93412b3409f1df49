package cluster

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/model"
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
		{"expert link with no bandwidth", []string{"cluster.moe={experts: 8, top_k: 2, expert_intermediate: 64}",
			"cluster.pools={e: {replicas: 2, expert_parallel: 2}}", "cluster.links.expert={bandwidth_gbs: -1}"},
			[]string{"cluster.links.expert.bandwidth_gbs is -1"}},
		{"more EP ranks than experts", []string{"cluster.moe={experts: 4, top_k: 2, expert_intermediate: 64}",
			"cluster.pools={e: {replicas: 8, expert_parallel: 8}}"}, []string{"cluster.pools.e.expert_parallel is 8, more ranks than the model's 4 experts"}},
		{"expert parallel without experts", []string{"cluster.pools={e: {replicas: 2, expert_parallel: 2}}"},
			[]string{"cluster.pools.e.expert_parallel is 2 but the model has no experts"}},
		{"EP does not divide replicas", []string{"cluster.moe={experts: 8, top_k: 2, expert_intermediate: 64}",
			"cluster.pools={e: {replicas: 3, expert_parallel: 2}}"}, []string{"expert_parallel 2 does not divide replicas 3"}},
		{"top_k above experts", []string{"cluster.moe={experts: 4, top_k: 8, expert_intermediate: 64}"}, []string{"moe.top_k is 8"}},
		{"two aggregated pools", []string{"cluster.pools={a: {replicas: 1}, b: {replicas: 1}}"}, []string{"found 2 both, 0 prefill, 0 decode"}},
		{"prefill without decode", []string{"cluster.pools={p: {role: prefill, replicas: 1}}"}, []string{"found 0 both, 1 prefill, 0 decode"}},
		{"unknown role", []string{"cluster.pools={a: {role: encode, replicas: 1}}"}, []string{`cluster.pools.a.role "encode"`}},
		{"negative temperature", []string{"cluster.router.temperature=-1"}, []string{"cluster.router.temperature is -1"}},
		{"pool engine key unknown", []string{"cluster.pools={a: {replicas: 1, engine: {max_num_seqz: 3}}}"}, []string{`unknown key "max_num_seqz" in cluster.pools.a.engine`}},
		{"pool limits invalid", []string{"cluster.pools={a: {replicas: 2, engine: {block_size: 24}}}"}, []string{"cluster.pools.a", "block_size is 24"}},
		{"pools of different block sizes", []string{"cluster.pools={p: {role: prefill, replicas: 1, engine: {block_size: 32}}, d: {role: decode, replicas: 1}}"},
			[]string{"cluster.pools.d: block_size 16 differs"}},
		{"experts do not fit", []string{"cluster.moe={experts: 4096, top_k: 2, expert_intermediate: 14336}"}, []string{"the experts need", "expert_parallel"}},
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
	assert.InDelta(t, 450e9, p.KVLink.BytesPerSec, 1, "the H200's interconnect by default")
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
// experts touched are read), compute bound at large batch, the busiest of
// P GPUs above the mean load; the all-to-all grows with the busiest rank's
// tokens and vanishes on one GPU.
func TestMoEPricer(t *testing.T) {
	m := MoE{Experts: 128, TopK: 8, ExpertIntermediate: 768}
	s := model.Shape{Name: "m", Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Intermediate: 6144, Vocab: 1000, DTypeBytes: 2}
	hw := model.Hardware{Name: "g", PeakTFLOPS: 500, MemBandwidthGBs: 1800, MemGB: 96}
	link := Link{BytesPerSec: 64e9, LatencyNs: 10_000}
	two := newMoEPricer(m, s, hw, 2, link, Scales{})
	one := newMoEPricer(m, s, hw, 1, link, Scales{})
	one.cmax = 0

	// One token: the experts its 8 draws touch, each 3·2048·768·2 bytes a
	// layer, read at the roofline's weight-streaming efficiency.
	touched := 128 * (1 - math.Pow(1-1.0/128, 8))
	assert.InEpsilon(t, touched*3*2048*768*2*48/(1800e9*0.8)*1e9, one.expertNs(1), 1e-9)
	// Many tokens: every expert read, compute bound; the busiest of two
	// GPUs carries more than half.
	big := 20000.0
	assign := big * 8
	mean := assign / 2
	assert.Greater(t, two.maxLoad(assign), mean)
	assert.Less(t, two.maxLoad(assign), mean*1.01)
	assert.InEpsilon(t, 2*3*2048*768*two.maxLoad(assign)*48/(500e12*0.8)*1e9, two.expertNs(big), 1e-9)
	assert.Greater(t, one.expertNs(big), two.expertNs(big))

	assert.Zero(t, one.a2aNs(100))
	a := two.a2aNs(100)
	assert.InEpsilon(t, 2*48*(10_000+100*8*2048*2*0.5/(64e9*0.7)*1e9), a, 1e-9)
	scaled := *two
	scaled.scales = Scales{A2A: 2}.or1()
	assert.InEpsilon(t, 2.0, scaled.a2aNs(100)/a, 1e-9)
}
