package fit

import (
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/require"
)

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
