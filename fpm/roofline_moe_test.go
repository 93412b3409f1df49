package fpm

import (
	"math"
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRooflineMoE: a batch-1 decode streams top-k experts per layer, a
// large step nearly all of them, and GEMM FLOPs count the active experts.
func TestRooflineMoE(t *testing.T) {
	s := mustShape("Qwen3-30B-A3B")
	r := NewRoofline(h200, s)
	require.NoError(t, r.Validate())
	bw := h200.BandwidthBytes() * 0.8
	expertBytes := 3 * 2048 * 768 * 2.0
	all := float64(s.StreamedWeightBytes())

	b1 := r.Breakdown(decodeStep(1, 1024))
	assert.InDelta(t, 8, b1.ExpertsPerLayer, 1e-9)
	assert.InDelta(t, (all-48*(128-8)*expertBytes)/bw*1e9, b1.WeightStreamNs, 1)
	assert.InDelta(t, s.StreamedWeightBytesAt(1)/bw*1e9, b1.WeightStreamNs, 1)

	b256 := r.Breakdown(decodeStep(256, 1024))
	assert.Greater(t, b256.ExpertsPerLayer, 127.9)
	assert.InEpsilon(t, all/bw*1e9, b256.WeightStreamNs, 1e-3, "B=256 reads (nearly) every expert")
	assert.Less(t, 3*b1.WeightStreamNs, b256.WeightStreamNs, "B=1 reads ~1/6 of the weights")

	// Streaming never shrinks as tokens grow.
	prev := 0.0
	for _, b := range []float64{1, 2, 4, 8, 16, 32, 64, 128, 256} {
		w := r.Breakdown(decodeStep(b, 1024)).WeightStreamNs
		assert.GreaterOrEqual(t, w, prev)
		prev = w
	}
	// Per token, the GEMMs multiply the attention, the router and top-8
	// experts: ~2.7B parameters of the 30.5B.
	assert.InDelta(t, 48*(2048*4096*2+2*2048*512+2048*128+8*expertBytes/2), s.GEMMParamsPerGPU(), 1)
	p := r.Breakdown(prefillStep(8192))
	assert.InDelta(t, 2*(s.GEMMParamsPerGPU()*8192+s.LMHeadParamsPerGPU())/(989e12*0.8)*1e9, p.GEMMComputeNs, 1)
	// A dense model of the same active size would stream far less at
	// B=256; the MoE's large steps cost its full weights.
	assert.Greater(t, b256.WeightStreamNs, 5*float64(s.GEMMParamsPerGPU()*2)/bw*1e9)

	// The memory model keeps every expert resident: 61 GB of bf16.
	assert.InDelta(t, 61.06e9, float64(s.WeightBytes()), 0.05e9)
	n, err := catalog.KVBlocks(h200, s, 16, 0.9, 0)
	require.NoError(t, err)
	used := float64(n)*16*float64(s.KVBytesPerToken()) + float64(s.WeightBytes()+catalog.ActivationReserveBytes(s))
	assert.LessOrEqual(t, used, 0.9*h200.MemBytes())
	assert.Greater(t, used, 0.89*h200.MemBytes())
}

// TestRooflineMLA: DeepSeek-V3 decode reads its latent KV and pays the
// absorbed-attention FLOPs.
func TestRooflineMLA(t *testing.T) {
	s := mustShape("DeepSeek-V3-TP8")
	r := NewRoofline(h200, s)
	require.NoError(t, r.Validate())
	base := decodeStep(64, 2048)
	more := base
	more.DecodeKVTokens += 1e6
	perTok := (r.PredictNs(more) - r.PredictNs(base)) / 1e6
	// 61 layers × 576 latent values × 2 bytes at 90% of 4.8 TB/s, the
	// same on every rank; the absorbed attention's FLOPs (16 heads per
	// rank over 1,088 latent dims) stay under it.
	kvNs := 61 * 576 * 2 / (4800e9 * 0.9) * 1e9
	flopNs := 61 * 2 * 16 * (2*512 + 64) / (989e12 * 0.52) * 1e9
	assert.InEpsilon(t, math.Max(kvNs, flopNs), perTok, 1e-6)
	assert.Greater(t, kvNs, flopNs)
	// fp8 weights on an H200: the GEMMs run at the fp8 peak.
	c := r.consts()
	assert.Equal(t, 1979e12, c.gemmPeak)
	assert.Equal(t, 989e12, c.attnPeak)
}

// TestRooflineSlidingWindow: gpt-oss's sliding layers read at most 128
// tokens per request whatever the context.
func TestRooflineSlidingWindow(t *testing.T) {
	s := mustShape("gpt-oss-120b")
	r := NewRoofline(h200, s)
	require.NoError(t, r.Validate())
	layerKV := float64(2 * 8 * 64 * 2)
	for _, ctx := range []float64{64, 128, 4096, 65536} {
		b := r.Breakdown(decodeStep(32, ctx))
		kv := 32 * (ctx*18*layerKV + math.Min(ctx, 128)*18*layerKV)
		assert.InEpsilon(t, kv/(4800e9*0.9)*1e9, b.DecodeAttnNs, 1e-9, "ctx %v", ctx)
	}
	// A long prefill's sliding layers pay attention over the window only.
	long := r.Breakdown(prefillStep(16384))
	full := s
	full.SlidingLayers, full.SlidingWindow = 0, 0
	assert.Less(t, long.PrefillAttnNs, 0.6*NewRoofline(h200, full).Breakdown(prefillStep(16384)).PrefillAttnNs)
}
