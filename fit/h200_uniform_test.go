package fit

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// h200Grids are every committed grid with the traffic of its shape: the
// three shapes' steady grids, and the first Llama captures (a uniform
// grid) with theirs.
var h200Grids = append(slices.Clone(h200Shapes),
	h200Shape{"Llama-3.1-8B (first captures)", "bench-steady", []string{"traffic-azure-5rps", "traffic-azure-12rps"}, true})

// TestH200Uniform fits the default recipe on each committed grid's uniform
// points only (Selection.Uniform: what Dynamo's and AIConfigurator's
// B × context grids record) and on the whole grid, and prices the shape's
// traffic, which neither saw.
func TestH200Uniform(t *testing.T) {
	for _, sh := range h200Grids {
		for _, target := range []string{TargetWall, TargetGPU} {
			traffic := h200Data(t, target, Selection{}, sh.traffic...).Data
			for _, uniform := range []bool{true, false} {
				grid := h200Data(t, target, Selection{Uniform: uniform}, sh.bench).Data
				res, err := FitRecipe(grid, RecipeOptions{Seed: 1, SkipResiduals: true})
				require.NoError(t, err)
				r := Evaluate(res.Model, traffic, 0)
				dec, mix := r.ByKind[datasets.KindDecode], r.ByKind[datasets.KindMixed]
				t.Logf("%-30s %-12s uniform=%-5v rows %4d | decode MAPE %5.2f%% p90 %5.2f%% bias %+6.2f%% | mixed MAPE %5.2f%% | all %5.2f%%",
					sh.name, target, uniform, grid.Len(), dec.MAPE, dec.P90APE, dec.MeanBias, mix.MAPE, r.Overall.MAPE)
			}
		}
	}
}
