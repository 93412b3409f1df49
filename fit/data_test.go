package fit

import (
	"math"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/require"
)

func TestFeaturesOf(t *testing.T) {
	// One prefill request: the attention term is exact, c·(k + c/2).
	st := datasets.Step{Kind: datasets.KindMixed, NumPrefillRequests: 1, SumPrefillTokens: 512, SumPrefillKVTokens: 1024,
		NumDecodeRequests: 30, SumDecodeKVTokens: 30 * 700, PaddedTokens: 32, NumNewReqs: 1, PayloadNewBytes: 2048}
	f := FeaturesOf(&st)
	require.Equal(t, 512*(1024+256.0), f.PrefillAttn)
	require.Equal(t, 30.0, f.PaddedBatch, "padding applies to decode steps only")
	require.Equal(t, math.Round(2048/PayloadBytesPerToken), f.NewReqTokens, "payload_new_bytes over the token-id width")
	require.Equal(t, 1.0, f.NewRequests)
	require.Equal(t, "mixed", f.Kind())

	// padded_tokens is the padding: 30 requests run in the graph of 32.
	st = datasets.Step{Kind: datasets.KindDecode, NumDecodeRequests: 30, SumDecodeKVTokens: 100, PaddedTokens: 2}
	require.Equal(t, 32.0, FeaturesOf(&st).PaddedBatch)
	st.PaddedTokens = 0
	require.Equal(t, 30.0, FeaturesOf(&st).PaddedBatch)

	// Two requests: chunks 100 and 300 (mean 200, population variance
	// 10000) after 0 and 1000 cached tokens. Σc² is exact from the variance;
	// Σc·k is approximated by T·K/n.
	reqs := []datasets.StepRequest{
		{IsPrefill: true, IsNew: true, NumScheduledTokens: 100, NumComputedTokens: 0, PromptLen: 100},
		{IsPrefill: true, NumScheduledTokens: 300, NumComputedTokens: 1000, PromptLen: 5000},
		{IsPrefill: false, NumScheduledTokens: 1, NumComputedTokens: 900, PromptLen: 800},
	}
	st = datasets.Step{Kind: datasets.KindMixed, NumPrefillRequests: 2, SumPrefillTokens: 400, VarPrefillLength: 10000, SumPrefillKVTokens: 1000,
		NumDecodeRequests: 1, SumDecodeKVTokens: 900, NumNewReqs: 1, PayloadNewBytes: 1000}
	approx := FeaturesOf(&st)
	exact := FeaturesWithRequests(&st, reqs)
	require.Equal(t, 400.0*1000/2+(2*10000+400*400/2)/2, approx.PrefillAttn)
	require.Equal(t, 100*(0+50.0)+300*(1000+150.0), exact.PrefillAttn)
	require.Equal(t, 100.0, exact.NewReqTokens)
	require.Equal(t, math.Round(1000/PayloadBytesPerToken), approx.NewReqTokens)
}

func TestDataFromStepsTargets(t *testing.T) {
	steps := []datasets.Step{
		{StepID: 1, Kind: "decode", NumDecodeRequests: 2, SumDecodeKVTokens: 10, GPUTimeNs: 100, WallTimeNs: 120},
		{StepID: 2, Kind: "decode", NumDecodeRequests: 2, SumDecodeKVTokens: 12, GPUTimeNs: 110, WallTimeNs: 130},
	}
	d, err := DataFromSteps(steps, TargetAuto)
	require.NoError(t, err)
	require.Equal(t, TargetGPU, d.Target)
	require.Equal(t, []float64{100, 110}, d.Y)
	steps[1].GPUTimeNs = datasets.Unknown
	d, err = DataFromSteps(steps, "")
	require.NoError(t, err)
	require.Equal(t, TargetWall, d.Target, "auto never mixes gpu and wall times")
	require.Equal(t, []float64{120, 130}, d.Y)
	_, err = DataFromSteps(steps, TargetGPU)
	require.ErrorContains(t, err, "at row 1 (step_id 2): gpu_time_ns is -1")
	require.Equal(t, []int64{1, 2}, d.StepIDs)
	require.Equal(t, "decode", d.Kind(0))
}
