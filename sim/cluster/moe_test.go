package cluster

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
)

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

// An instance of 16 H200s spans two HGX boards: of the hidden states a
// rank sends, 7/16 go to the other GPUs of its board over NVLink and 8/16
// over its 400 Gb/s NIC at the same time, and the all-to-all waits for the
// network.
func TestMoEAllToAllAcrossNodes(t *testing.T) {
	s, err := catalog.LookupModel("Qwen3-30B-A3B")
	require.NoError(t, err)
	hw, err := catalog.LookupHardware("H200")
	require.NoError(t, err)
	link, layout, err := ExpertLinks(LinkSpec{}, hw, 16, "cluster.links.expert")
	require.NoError(t, err)
	require.True(t, layout.MultiNode())
	assert.Equal(t, Link{BytesPerSec: 450e9, LatencyNs: 5000}, link, "NVLink within a board")
	across := newMoEPricer(s, hw, 16, link, Scales{})
	flat := *across
	across.acrossNodes(layout)
	sent := 100 * 8 * 2048 * 2.0 // tokens · top-k · hidden · bf16
	intra := 5000 + sent*7/16/(450e9*0.7)*1e9
	inter := 10_000 + sent*8/16/(50e9*0.7)*1e9
	require.Greater(t, inter, intra)
	assert.InEpsilon(t, 2*48*inter, across.a2aNs(100), 1e-9)
	assert.Greater(t, across.a2aNs(100), flat.a2aNs(100), "slower than one NVLink domain of 16")

	// A stated link is the one link of every pair; within one node the
	// hardware's link, as before.
	bw := 100.0
	_, stated, err := ExpertLinks(LinkSpec{BandwidthGBs: &bw}, hw, 16, "cluster.links.expert")
	require.NoError(t, err)
	assert.False(t, stated.MultiNode())
	_, one, err := ExpertLinks(LinkSpec{}, hw, 8, "cluster.links.expert")
	require.NoError(t, err)
	assert.False(t, one.MultiNode())
	_, _, err = ExpertLinks(LinkSpec{}, hw, 12, "cluster.links.expert")
	assert.ErrorContains(t, err, "an expert-parallel instance of 12 GPUs: 12 GPUs do not fill whole nodes of 8 H200-SXM GPUs")
	assert.ErrorContains(t, err, "or state cluster.links.expert.bandwidth_gbs")
}
