package fpm

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blocksFor is the KV blocks a context of n tokens holds.
func blocksFor(n, blockSize int) int { return (n + blockSize - 1) / blockSize }

// TestPayloadR1 reproduces R1 (docs/architecture.md#r1-payload): at B=513 with ~4,100-token
// contexts and block size 16, an admission step ships ≈ 8.5 MB and a
// steady decode step ≈ 6.8 KB.
func TestPayloadR1(t *testing.T) {
	p := DefaultPayloadModel()
	const B, ctx, bs = 513, 4100, 16
	adm := p.StepBytes(PayloadStep{NewReqs: B, NewTokens: B * ctx, NewBlocks: B * blocksFor(ctx, bs)})
	steady := p.StepBytes(PayloadStep{CachedReqs: B})
	assert.InEpsilon(t, 8.5e6, float64(adm), 0.10, "admission step bytes")
	assert.InEpsilon(t, 6.8e3, float64(steady), 0.10, "steady step bytes")
	assert.Equal(t, int64(8_591_298), adm, "the arithmetic on PayloadModel")
	assert.Equal(t, int64(6_756), steady)
	// "About four orders of magnitude" (1,271×).
	assert.Greater(t, float64(adm)/float64(steady), 1000.0)
	// A steady step where every 16th request crosses a block boundary
	// still ships a few KB.
	withBlocks := p.StepBytes(PayloadStep{CachedReqs: B, CachedNewBlocks: B / bs})
	assert.InEpsilon(t, 6.8e3, float64(withBlocks), 0.10)
}

func TestPayloadPerRequest(t *testing.T) {
	p := DefaultPayloadModel()
	tests := []struct {
		name string
		got  int64
		want int64
	}{
		{"new, empty", p.NewReqBytes(0, 0), 600},
		{"new, 1000 tokens 63 blocks", p.NewReqBytes(1000, 63), 600 + 3750 + 189},
		{"cached decode", p.CachedReqBytes(0, false, 4100), 12},
		{"cached with a new block", p.CachedReqBytes(1, false, 0), 15},
		{"cached prefill chunk with 32 blocks", p.CachedReqBytes(32, false, 512), 12 + 96},
		{"resumed ships its tokens", p.CachedReqBytes(257, true, 4100), 12 + 771 + 16 + 15375},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.got)
		})
	}
	// A resumed request costs about what a new one does: both ship the
	// whole token list.
	assert.InEpsilon(t, float64(p.NewReqBytes(4100, 257)), float64(p.CachedReqBytes(257, true, 4100)), 0.05)
}

func TestPayloadBreakdownMatchesPerRequest(t *testing.T) {
	p := DefaultPayloadModel()
	// 3 new requests, 5 cached of which 1 resumed, 2 finished.
	newTok := []int{100, 2000, 37}
	step := PayloadStep{FinishedReqs: 2}
	var wantNew, wantCached int64
	for _, n := range newTok {
		wantNew += p.NewReqBytes(n, blocksFor(n, 16))
		step.NewReqs++
		step.NewTokens += n
		step.NewBlocks += blocksFor(n, 16)
	}
	cached := []struct {
		blocks  int
		resumed bool
		tokens  int
	}{{0, false, 0}, {1, false, 0}, {0, false, 0}, {4, false, 0}, {10, true, 150}}
	for _, c := range cached {
		wantCached += p.CachedReqBytes(c.blocks, c.resumed, c.tokens)
		step.CachedReqs++
		step.CachedNewBlocks += c.blocks
		if c.resumed {
			step.ResumedReqs++
			step.ResumedTokens += c.tokens
		}
	}
	b := p.Breakdown(step)
	assert.InDelta(t, wantNew, b.New, 2, "rounding once vs per request")
	assert.InDelta(t, wantCached, b.Cached, 2)
	assert.Equal(t, int64(600+2*8), b.Fixed)
	assert.Equal(t, b.New+b.Cached+b.Fixed, b.Total)
	assert.Equal(t, b.Total, p.StepBytes(step))

	// The linear form the fit uses gives the same bytes.
	var dot float64
	for i, x := range step.Terms() {
		dot += x * p.Vector()[i]
	}
	assert.InDelta(t, float64(b.Total), dot, 2)
}

func TestPayloadVectorRoundTrip(t *testing.T) {
	p := DefaultPayloadModel()
	assert.Len(t, p.Vector(), len(PayloadTermNames))
	assert.Len(t, PayloadStep{}.Terms(), len(PayloadTermNames))
	back, err := PayloadModelFromVector(p.Vector())
	require.NoError(t, err)
	assert.Equal(t, p, back)

	_, err = PayloadModelFromVector([]float64{1, 2})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 coefficients, want 7")
	v := p.Vector()
	v[1] = -1
	_, err = PayloadModelFromVector(v)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "block_id_bytes")
}

func TestPayloadJSONRoundTrip(t *testing.T) {
	p := DefaultPayloadModel()
	require.NoError(t, p.Validate())
	b, err := json.Marshal(p)
	require.NoError(t, err)
	for _, name := range PayloadTermNames {
		assert.Contains(t, string(b), `"`+name+`"`, "JSON keys are the term names")
	}
	var back PayloadModel
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, p, back)
}

// TestRoundIntIsMathRound holds roundInt to int64(math.Round(x)) where the
// two could part: halves of both signs, the largest double below ½ (x + ½
// rounds up to 1), the doubles around 2^52 where fractions run out, and
// random values of the magnitudes bytes and nanoseconds take.
func TestRoundIntIsMathRound(t *testing.T) {
	xs := []float64{0, math.Copysign(0, -1), 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994,
		math.Nextafter(0.5, 1), 1 << 52, 1<<52 + 1, 1<<52 - 0.5, -(1<<52 - 0.5), 1 << 53, 1<<62 + 1024, -(1 << 62), 1e-300}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		xs = append(xs, (r.Float64()-0.25)*math.Pow(10, float64(r.IntN(16))))
	}
	for _, x := range xs {
		if got, want := roundInt(x), int64(math.Round(x)); got != want {
			t.Fatalf("roundInt(%v) = %d, want %d", x, got, want)
		}
	}
}
