package fit

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model/features"
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

// TestLoadDatasetsStreams: streaming the steps table through the builder
// gives the data of the whole table read at once, completed from
// step_requests and converted, on datasets whose steps table records
// every feature column and on one written before it did.
func TestLoadDatasetsStreams(t *testing.T) {
	for i, dir := range []string{filepath.Join(h200Dir, "bench-steady"), filepath.Join(h200Dir, "qwen2.5-7b/traffic-azure-12rps")} {
		l, err := LoadDatasets([]string{dir}, LoadOptions{Target: TargetWall})
		require.NoError(t, err)
		require.Nil(t, l.Steps, "rows are kept only with KeepSteps")
		d, err := datasets.Open(dir)
		require.NoError(t, err)
		steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
		require.NoError(t, err)
		completed, _, err := features.CompleteSteps(d, steps)
		require.NoError(t, err)
		t.Logf("%s: %d steps, %d completed from step_requests", dir, len(steps), completed)
		require.Equal(t, i == 0, completed > 0, "the first predates the feature columns, the second records them")
		kept := slices.DeleteFunc(steps, func(st datasets.Step) bool { return !(Selection{}).Keep(&st) })
		want, err := DataFromSteps(kept, TargetWall)
		require.NoError(t, err)
		require.Equal(t, 512, l.Data.GraphTokens, "%s: the manifest's largest CUDA-graph capture size", dir)
		want.GraphTokens = 512
		require.Equal(t, want, l.Data, dir)
	}
}
