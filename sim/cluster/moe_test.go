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
